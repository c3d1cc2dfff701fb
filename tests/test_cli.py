"""The sensec and sensevm commands as a user meets them: exit codes, error rendering, files written."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def sh(*args, cwd=None, env=None, stdin=None):
    full_env = dict(os.environ, NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=full_env, input=stdin)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_build_then_run(tmp_path):
    src = write(tmp_path, "a.sns", 'x = 6 * 7\nprint("answer", x)\n')
    proc = sh("sensec", "build", src)
    assert proc.returncode == 0, proc.stderr
    assert os.path.exists(src[:-4] + ".snb")
    proc = sh("sensevm", "run", src[:-4] + ".snb")
    assert proc.returncode == 0
    assert proc.stdout == "answer 42\n"


def test_run_source_directly(tmp_path):
    src = write(tmp_path, "a.sns", 'print(1 + 1)\n')
    proc = sh("sensevm", "run", src)
    assert (proc.returncode, proc.stdout) == (0, "2\n")


def test_runtime_error_rendering(tmp_path):
    src = write(tmp_path, "boom.sns", 'print("before")\nx = 10\nprint(x / 0)\n')
    proc = sh("sensevm", "run", src)
    assert proc.returncode == 1
    assert proc.stdout == "before\n"
    lines = proc.stderr.splitlines()
    assert lines[0] == f"{src}:3:9: SenseRuntimeError: division by zero"
    assert lines[1].endswith("| print(x / 0)")
    assert lines[2].index("^") == lines[1].index("print") + 8
    assert "Traceback" not in proc.stderr


def test_syntax_error_rendering_and_nothing_runs(tmp_path):
    src = write(tmp_path, "bad.sns", 'print("never")\nx = (1\n')
    proc = sh("sensevm", "run", src)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"{src}:")
    assert ": SenseSyntaxError: " in proc.stderr.splitlines()[0]


def test_missing_file_is_a_clean_error(tmp_path):
    proc = sh("sensevm", "run", str(tmp_path / "nope.sns"))
    assert proc.returncode == 1
    assert "no such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_corrupt_snb_is_a_clean_error(tmp_path):
    src = write(tmp_path, "a.sns", 'print(1)\n')
    assert sh("sensec", "build", src).returncode == 0
    snb = src[:-4] + ".snb"
    data = bytearray(open(snb, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(snb, "wb").write(bytes(data))
    proc = sh("sensevm", "run", snb)
    assert proc.returncode == 1
    assert "SnbFormatError" in proc.stderr and "offset" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_build_output_option_and_failed_build_writes_nothing(tmp_path):
    src = write(tmp_path, "bad.sns", 'x = = 1\n')
    out = tmp_path / "out.snb"
    proc = sh("sensec", "build", src, "-o", str(out))
    assert proc.returncode == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [tmp_path / "bad.sns"]


def test_check_reports_every_syntax_error(tmp_path):
    src = write(tmp_path, "bad.sns", 'x = (1\nprint("ok")\ny = ]\nz = 3 +\n')
    proc = sh("sensec", "check", src)
    assert proc.returncode == 1
    headers = [l for l in proc.stderr.splitlines() if l.startswith(src)]
    assert len(headers) >= 2, proc.stderr


def test_check_passes_a_good_file(tmp_path):
    src = write(tmp_path, "ok.sns", 'print(1)\n')
    proc = sh("sensec", "check", src)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_check_reports_static_errors(tmp_path):
    src = write(tmp_path, "s.sns", 'def f():\n    break\nreturn 1\n')
    proc = sh("sensec", "check", src)
    assert proc.returncode == 1
    assert "'break' outside loop" in proc.stderr
    assert "'return' outside function" in proc.stderr


def test_dis_of_source_and_of_snb_agree(tmp_path):
    src = write(tmp_path, "d.sns", 'def f(a):\n    return a + 1\nprint(f(2))\n')
    from_source = sh("sensec", "dis", src)
    assert from_source.returncode == 0, from_source.stderr
    assert sh("sensec", "build", src).returncode == 0
    from_snb = sh("sensec", "dis", src[:-4] + ".snb")
    assert from_snb.stdout == from_source.stdout
    assert "MAKE_FUNCTION" in from_snb.stdout and "RETURN" in from_snb.stdout


def test_usage_error_exits_2():
    proc = sh("sensevm", "frobnicate")
    assert proc.returncode == 2


def test_color_only_on_a_terminal(tmp_path):
    src = write(tmp_path, "e.sns", 'print(1 / 0)\n')
    proc = sh("sensevm", "run", src)
    assert "\x1b[" not in proc.stderr


def test_stale_snb_warns_but_runs(tmp_path):
    src = write(tmp_path, "s.sns", 'print("v1")\n')
    assert sh("sensec", "build", src).returncode == 0
    proc = sh("sensevm", "run", src[:-4] + ".snb")
    assert (proc.stdout, proc.stderr) == ("v1\n", "")
    write(tmp_path, "s.sns", 'print("v2")\n')
    proc = sh("sensevm", "run", src[:-4] + ".snb")
    assert proc.stdout == "v1\n"
    assert "warning:" in proc.stderr and "s.sns" in proc.stderr and "sensec build" in proc.stderr


def test_import_syntax_error_surfaces_when_the_import_runs(tmp_path):
    write(tmp_path, "broken.sns", 'x = (1\n')
    src = write(tmp_path, "main.sns", 'print("before")\nimport broken\nprint("after")\n')
    proc = sh("sensevm", "run", src)
    assert proc.returncode == 1
    assert proc.stdout == "before\n"
    assert "broken.sns:" in proc.stderr and "SenseSyntaxError" in proc.stderr
    # A build is a whole-program compile: it refuses the program up front.
    proc = sh("sensec", "build", src)
    assert proc.returncode == 1 and "broken.sns:" in proc.stderr
    assert not os.path.exists(src[:-4] + ".snb")
