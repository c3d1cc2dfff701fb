"""``sensevm run FILE`` without click (sensevm.cli.launch) behaves exactly as the click command does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_script

# The same command line through the click group, bypassing the launcher's fast path.
CLICK = ("import sys\n"
         "from sensevm.cli.commands import main\n"
         "main(sys.argv[1:], prog_name='sensevm')\n")
# The launcher (what `python -m sensevm` and the console script run), reporting what it imported
# (of what the interpreter had not loaded at start-up).
FAST = ("import sys, atexit\n"
        "before = set(sys.modules)\n"
        "atexit.register(lambda: sys.__stderr__.write(\n"
        "    'HEAVY ' + ' '.join(sorted(m for m in set(sys.modules) - before\n"
        "        if m.split('.')[0] in ('click', 'ply', 'sensec', 'prompt_toolkit', 'pygments',\n"
        "                               'temporalio')\n"
        "        or m in ('threading', 'typing', 'sensevm.world.agents', 'sensevm.world.models',\n"
        "                 'sensevm.world.memory', 'sensevm.runtime.sessions', 'sensevm.world.mcp',\n"
        "                 'shlex', 'sensevm.world.stdlib_native', 'sensevm.world.std_net',\n"
        "                 'sensevm.world.std_data', 'regex', 'sensevm.runtime.journal',\n"
        "                 'sensevm.cli.temporal')))\n"
        "    + '\\n'))\n"
        "sys.argv[0] = 'sensevm'\n"
        "from sensevm.cli.launch import entry\n"
        "entry()\n")


def _run(script, args, cwd, **how):
    return run_script(script, args, cwd, "_SENSEVM_COMPLETE", **how)


def both(args, cwd):
    """(fast, click) results; the fast one's stderr without its import report, plus that report.
    The fast run skips site (see run_script), so what it reports is what the launcher imported
    on any machine."""
    fast = _run(FAST, args, cwd, no_site=True)
    click = _run(CLICK, args, cwd)
    lines = fast.stderr.splitlines(keepends=True)
    heavy = lines.pop().split()[1:] if lines and lines[-1].startswith("HEAVY") else None
    return (fast.returncode, fast.stdout, "".join(lines)), \
        (click.returncode, click.stdout, click.stderr), heavy


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def build(src):
    proc = subprocess.run([sys.executable, "-m", "sensec", "build", src], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return src[:-4] + ".snb"


def test_good_run_same_output_and_no_click(tmp_path):
    snb = build(write(tmp_path, "a.sns", 'print("answer", 6 * 7)\n'))
    fast, click, heavy = both(["run", snb], tmp_path)
    assert fast == click == (0, "answer 42\n", "")
    assert heavy == []          # no click, no compiler, no prompt_toolkit, no pygments, nor
    #                             the modules of builtins the program does not call


def test_a_program_tier_two_compiles_imports_nothing_heavy(tmp_path):
    snb = build(write(tmp_path, "hot.sns", 'def f(n):\n    return n + 1\n'
                                           'x = 0\nwhile x < 2000:\n    x = f(x)\nprint(x)\n'))
    fast, click, heavy = both(["run", snb], tmp_path)
    assert fast == click == (0, "2000\n", "")
    assert heavy == []          # typing included: tier 2 is part of most runs


def test_deferred_builtins_import_their_module_when_called(tmp_path):
    snb = build(write(tmp_path, "a.sns", 'model m = inference("mock")\nprint(type_of(m))\n'))
    fast, click, heavy = both(["run", snb], tmp_path)
    assert fast == click == (0, "Model\n", "")
    assert [m for m in heavy if m != "typing"] == ["sensevm.world.models"]    # (providers use it)


def test_deferred_builtins_name_functions_of_their_modules():
    from importlib import import_module
    from sensevm.world import BUILTINS
    for b in BUILTINS:
        module, function = b.fn.deferred
        assert callable(getattr(import_module(f"sensevm.world.{module}"), function)), b.name


def test_runtime_error_same_output(tmp_path):
    snb = build(write(tmp_path, "boom.sns", 'print("before")\nx = 10\nprint(x / 0)\n'))
    fast, click, heavy = both(["run", snb], tmp_path)
    assert fast == click
    assert fast[0] == 1 and "SenseRuntimeError: division by zero" in fast[2]
    assert heavy == []


def test_relative_path_and_stale_warning_same_output(tmp_path):
    src = write(tmp_path, "s.sns", 'print(1)\n')
    build(src)
    with open(src, "a", encoding="utf-8") as fh:
        fh.write("print(2)\n")
    fast, click, _ = both(["run", "s.snb"], tmp_path)
    assert fast == click
    assert fast[0] == 0 and fast[2].startswith("warning: s.snb is older than s.sns")


def test_missing_file_same_output(tmp_path):
    fast, click, heavy = both(["run", str(tmp_path / "nope.snb")], tmp_path)
    assert fast == click
    assert fast[0] == 1 and "no such file or directory" in fast[2]
    assert heavy == []


def test_corrupt_snb_same_output(tmp_path):
    snb = build(write(tmp_path, "a.sns", 'print(1)\n'))
    data = bytearray(open(snb, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(snb, "wb").write(bytes(data))
    fast, click, _ = both(["run", snb], tmp_path)
    assert fast == click
    assert fast[0] == 1 and "SnbFormatError" in fast[2]


def test_not_a_snb_header_same_output(tmp_path):
    bad = tmp_path / "x.snb"
    bad.write_bytes(b"\x89SNB\r\n\x1a\n" + b"\0" * 10)
    fast, click, _ = both(["run", str(bad)], tmp_path)
    assert fast == click and fast[0] == 1


def test_source_with_syntax_error_same_output(tmp_path):
    src = write(tmp_path, "bad.sns", 'print("never")\nx = (1\n')
    fast, click, _ = both(["run", src], tmp_path)
    assert fast == click
    assert fast[0] == 1 and ": SenseSyntaxError: " in fast[2]


@pytest.mark.parametrize("args", [
    ["run"],                              # missing argument: click's usage error
    ["run", "--help"],
    ["run", "--dry-run=yes", "X.snb"],    # a flag takes no value: click's usage error
    ["run", "--dry", "X.snb"],            # nor is an abbreviation an option
    ["run", "-"],
    ["run", "a.snb", "b.snb"],            # extra argument
    ["run", "--", "a.snb"],
    [],
])
def test_everything_else_goes_to_click(tmp_path, args):
    args = [str(tmp_path / a) if a.endswith(".snb") else a for a in args]
    fast, click, heavy = both(args, tmp_path)
    assert fast == click
    assert "click" in heavy


def test_directory_is_refused_by_click_as_before(tmp_path):
    fast, click, heavy = both(["run", str(tmp_path)], tmp_path)
    assert fast == click
    assert fast[0] == 2 and "is a directory" in fast[2]
    assert "click" in heavy


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_refused_by_click_as_before(tmp_path):
    snb = build(write(tmp_path, "a.sns", 'print(1)\n'))
    os.chmod(snb, 0)
    fast, click, _ = both(["run", snb], tmp_path)
    assert fast == click and fast[0] == 2


def test_python_dash_m_uses_the_launcher(tmp_path):
    snb = build(write(tmp_path, "a.sns", 'print("hi")\n'))
    probe = ("import sys, runpy\n"
             "sys.argv = ['sensevm', 'run', sys.argv[1]]\n"
             "try:\n"
             "    runpy.run_module('sensevm', run_name='__main__')\n"
             "except SystemExit as e:\n"
             "    print('EXIT', e.code)\n"
             "print('CLICK', 'click' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", probe, snb], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.stdout == "hi\nEXIT 0\nCLICK False\n", proc.stderr


def test_console_script_entry_point_is_the_launcher():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        assert 'sensevm = "sensevm.cli.launch:entry"' in fh.read()


@pytest.mark.parametrize("options", [
    ["--second-look=off"], ["--second-look", "off"], ["--second-look=on"],
    ["--second-look", "off", "--second-look", "on"], ["--max-steps", "1000", "--second-look=off"],
])
def test_second_look_option_same_output_and_no_click(tmp_path, options):
    """`--second-look on|off` (the benchmarks' comparison runs) takes the fast path too: the
    same output and audit trail as click's command, without importing click."""
    src = write(tmp_path, "s.sns",
                'tool fetch(k: Int) returns String requires web.read:\n'
                '    return "x@evil.example"\n'
                'irreversible action send(to: String) requires email.send:\n'
                '    print("sent", to)\n'
                'policy:\n    allow web.read\n    allow email.send\n'
                'a = send(fetch(1))\na.verify()\nprint(a.second_look != nil)\n')
    snb = build(src)
    fast, click, heavy = both(["run", *options, snb], tmp_path)
    on = [o.split("=")[-1] for o in options if o not in ("--second-look", "--max-steps")
          and not o.isdigit()][-1] == "on"
    assert fast == click and fast[0] == 0 and fast[1] == f"{str(on).lower()}\n"
    assert heavy == []


@pytest.mark.parametrize("options", [["--second-look=OFF"], ["--second-look", "maybe"],
                                     ["--second-look"]])
def test_a_bad_second_look_value_goes_to_click(tmp_path, options):
    snb = build(write(tmp_path, "s.sns", 'print(1)\n'))
    fast, click, heavy = both(["run", *options, snb], tmp_path)
    assert fast == click and fast[0] == 2
    assert "click" in heavy


@pytest.mark.parametrize("options", [["--dry-run"], ["--dry-run", "--dry-run"],
                                     ["--max-steps=100000", "--dry-run", "--second-look=off"]])
@pytest.mark.parametrize("after", [False, True])
def test_dry_run_same_output_and_no_click(tmp_path, options, after):
    """`--dry-run` (before or after FILE, with the other options) takes the fast path: the same
    banner, output and summary as click's command, without importing click."""
    snb = build(write(tmp_path, "d.sns",
                      'reversible action credit(n: Int) requires ledger.write:\n'
                      '    print("ran", n)\n'
                      'rollback:\n    print("undone", n)\n'
                      'policy:\n    allow ledger.write\n'
                      'for k in range(3):\n'
                      '    c = credit(k)\n    c.verify()\n    print(c.commit())\n'
                      '    c.rollback()\n'))
    args = ["run", snb, *options] if after else ["run", *options, snb]
    fast, click, heavy = both(args, tmp_path)
    assert fast == click and fast[0] == 0
    assert fast[1].startswith("DRY RUN") and "ran" not in fast[1] and "undone" not in fast[1]
    assert fast[1].count("(dry run — body not executed)") == 3
    assert heavy == []
