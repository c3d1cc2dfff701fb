"""Every code block of README.md and docs/ marked as a program runs, on both tiers, and prints
exactly what the text says it prints.

A block whose fence says ```` ```sense program ```` is a whole program; the fenced block right
after it, if its fence says ```` ```output ````, is its standard output, exactly. Blocks marked
only ```` ```sense ```` are fragments (declarations elided with `...`, names from the text around
them) and are not run. A block may name what it needs with its first line: `# needs: FILE=TEXT`
writes FILE (relative to the run's directory) first."""

from __future__ import annotations

import glob
import os
import re

import pytest

from conftest import ROOT
from stdlib_helpers import TIERS, sense_run

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)


def doc_programs():
    found = []
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                                  "*.md"))):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        blocks = [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
                  for m in FENCE.finditer(text)]
        for k, (info, body, line) in enumerate(blocks):
            if info != "sense program":
                continue
            output = None
            if k + 1 < len(blocks) and blocks[k + 1][0] == "output":
                output = blocks[k + 1][1]
            found.append(pytest.param(body, output,
                                      id=f"{os.path.relpath(path, ROOT)}:{line}"))
    return found


PROGRAMS = doc_programs()


def test_the_docs_hold_programs():
    assert len(PROGRAMS) >= 5


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("body, output", PROGRAMS)
def test_a_documented_program_prints_what_the_text_says(tmp_path, body, output, tier):
    for line in body.splitlines():
        if not line.startswith("# needs: "):
            break
        name, _, content = line[len("# needs: "):].partition("=")
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content.encode().decode("unicode_escape"),
                                     encoding="utf-8")
    done = sense_run(tmp_path, body, tier=tier)
    assert done.returncode == 0, done.stderr
    if output is not None:
        # (As the reader runs it: `sensevm run main.sns` in its folder, so paths are relative.)
        assert done.stdout.replace(str(tmp_path) + os.sep, "") == output


def _guide() -> str:
    with open(os.path.join(ROOT, "docs", "guide.md"), encoding="utf-8") as fh:
        return fh.read()


def test_the_guide_lists_every_builtin_and_reserved_word():
    """The guide's reference cannot drift from the language's own tables."""
    from sensevm.base.builtins import BUILTINS
    from sensevm.base.keywords import KEYWORDS
    guide = _guide()
    rows = set(re.findall(r"^\| `([^`]+)` \| ", guide, re.M))
    assert {b.signature for b in BUILTINS if not b.retired} <= rows
    listed = re.search(r"Reserved words: `([^`]+)`", guide, re.S).group(1).split()
    assert sorted(listed) == sorted(KEYWORDS)


def test_the_guide_links_every_document():
    guide = _guide()
    for path in glob.glob(os.path.join(ROOT, "docs", "*.md")):
        name = os.path.basename(path)
        if name != "guide.md":
            assert f"docs/{name}" in guide, name
