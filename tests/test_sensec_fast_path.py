"""``sensec build FILE [-o OUT]`` without click (sensec.launch) behaves exactly as the click command does."""

from __future__ import annotations

import os

import pytest

from conftest import run_script

# The same command line through the click group, bypassing the launcher's fast path.
CLICK = ("import sys\n"
         "from sensec.cli import main\n"
         "main(sys.argv[1:], prog_name='sensec')\n")
# The launcher (what `python -m sensec` and the console script run), reporting whether it
# imported click.
FAST = ("import sys, atexit\n"
        "atexit.register(lambda: sys.__stderr__.write(\n"
        "    'CLICK ' + str('click' in sys.modules) + '\\n'))\n"
        "sys.argv[0] = 'sensec'\n"
        "from sensec.launch import entry\n"
        "entry()\n")


def _run(script, args, cwd):
    return run_script(script, args, cwd, "_SENSEC_COMPLETE")


def both(args, cwd, outputs=()):
    """(fast, click): exit status, stdout, stderr and the bytes of each file in ``outputs``
    after the run (None when missing; removed before each run), plus whether the fast run
    imported click."""
    def one(script):
        for path in outputs:
            if os.path.exists(path):
                os.remove(path)
        proc = _run(script, args, cwd)
        files = tuple(open(p, "rb").read() if os.path.exists(p) else None for p in outputs)
        return proc, files

    fast, fast_files = one(FAST)
    click, click_files = one(CLICK)
    lines = fast.stderr.splitlines(keepends=True)
    used_click = lines.pop() == "CLICK True\n" if lines and lines[-1].startswith("CLICK") else None
    return ((fast.returncode, fast.stdout, "".join(lines), fast_files),
            (click.returncode, click.stdout, click.stderr, click_files), used_click)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


@pytest.mark.parametrize("options, out", [
    ([], "a.snb"),
    (["-o", "x.snb"], "x.snb"),
    (["--output", "x.snb"], "x.snb"),
    (["--output=x.snb"], "x.snb"),
    (["-ox.snb"], "x.snb"),
    (["-o", "y.snb", "-o", "x.snb"], "x.snb"),      # the last one wins, as in click
])
def test_good_build_same_file_and_no_click(tmp_path, options, out):
    src = write(tmp_path, "a.sns", 'print("answer", 6 * 7)\n')
    target = str(tmp_path / out)
    fast, click, used_click = both(["build", src, *options], tmp_path, [target])
    assert fast == click
    assert fast[:3] == (0, "", "") and fast[3][0] is not None
    assert used_click is False


def test_option_before_the_file(tmp_path):
    src = write(tmp_path, "a.sns", "print(1)\n")
    target = str(tmp_path / "x.snb")
    fast, click, used_click = both(["build", "-o", target, src], tmp_path, [target])
    assert fast == click and fast[0] == 0 and fast[3][0] is not None
    assert used_click is False


def test_compile_error_same_report(tmp_path):
    src = write(tmp_path, "bad.sns", 'print("never")\nx = (1\n')
    fast, click, used_click = both(["build", src], tmp_path, [str(tmp_path / "bad.snb")])
    assert fast == click
    assert fast[0] == 1 and ": SenseSyntaxError: " in fast[2] and fast[3] == (None,)
    assert used_click is False


def test_missing_file_same_report(tmp_path):
    fast, click, used_click = both(["build", str(tmp_path / "nope.sns")], tmp_path)
    assert fast == click
    assert fast[0] == 1 and "no such file or directory" in fast[2]
    assert used_click is False


def test_unwritable_output_same_report(tmp_path):
    src = write(tmp_path, "a.sns", "print(1)\n")
    out = str(tmp_path / "no" / "such" / "dir" / "a.snb")
    fast, click, used_click = both(["build", src, "-o", out], tmp_path)
    assert fast == click
    assert fast[0] == 1 and fast[2].startswith(f"sensec: cannot write {out}: ")
    assert used_click is False


@pytest.mark.parametrize("args", [
    ["build"],                              # missing argument: click's usage error
    ["build", "--help"],
    ["build", "a.sns", "b.sns"],            # extra argument
    ["build", "a.sns", "-o"],               # option without its value
    ["build", "--out", "x.snb", "a.sns"],   # no such option (click suggests --output)
    ["build", "--", "a.sns"],
    ["build", "-"],
    ["check", "a.sns"],
    [],
])
def test_everything_else_goes_to_click(tmp_path, args):
    write(tmp_path, "a.sns", "print(1)\n")
    fast, click, used_click = both(args, tmp_path)
    assert fast == click
    assert used_click is True


@pytest.mark.parametrize("where", ["file", "output"])
def test_directory_is_refused_by_click_as_before(tmp_path, where):
    src = write(tmp_path, "a.sns", "print(1)\n")
    args = ["build", str(tmp_path)] if where == "file" else ["build", src, "-o", str(tmp_path)]
    fast, click, used_click = both(args, tmp_path)
    assert fast == click
    assert fast[0] == 2 and "is a directory" in fast[2]
    assert used_click is True
