"""The command line of issue 26: `run -`, --version, the help pages' examples and environment,
shell completion through the fast-path launchers (docs/cli.md). All through real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT


def cli(module, *args, cwd, input=None, env=None):
    full = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, input=input,
                          capture_output=True, env=full, timeout=120)


def test_run_dash_reads_source_from_stdin(tmp_path):
    proc = cli("sensevm", "run", "-", cwd=tmp_path, input=b'x = 2\nprint(x * 21)\n')
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"42\n", b"")


@pytest.mark.parametrize("source, first", [
    (b'x = 1\nprint(x +)\n', b"<stdin>:2:10: SenseSyntaxError: unexpected token RPAREN ')'\n"),
    (b'x = [1]\nprint(x[3])\n', b"<stdin>:2:8: SenseRuntimeError: index 3 out of bounds\n"),
])
def test_run_dash_errors_name_stdin(tmp_path, source, first):
    proc = cli("sensevm", "run", "-", cwd=tmp_path, input=source)
    assert proc.returncode == 1 and proc.stdout == b""
    lines = proc.stderr.split(b"\n")
    assert lines[0] + b"\n" == first
    assert lines[1].strip() == b"2 | " + source.split(b"\n")[1]    # the caret's line is shown


def test_run_dash_reads_bytecode_and_takes_program_args(tmp_path):
    (tmp_path / "a.sns").write_text('import std.env\nprint(env.args())\n')
    assert cli("sensec", "build", "a.sns", cwd=tmp_path).returncode == 0
    proc = cli("sensevm", "run", "-", "--", "one", "two", cwd=tmp_path,
               input=(tmp_path / "a.snb").read_bytes())
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout == b'[one, two]\n'


@pytest.mark.parametrize("module", ["sensevm", "sensec"])
def test_version_names_language_format_and_python(tmp_path, module):
    from sensevm.bytecode.opcodes import FORMAT_MAJOR, FORMAT_MINOR
    proc = cli(module, "--version", cwd=tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.decode().split("\n")
    assert lines[0] == f"{module} 0.1.0"
    assert lines[1].startswith("language: Sense 0.20.0 ")
    assert lines[2].startswith(f"bytecode: .snb format {FORMAT_MAJOR}.{FORMAT_MINOR} ")
    assert lines[3] == (f"python: {sys.implementation.name.replace('cpython', 'CPython')} "
                        f"{'.'.join(map(str, sys.version_info[:3]))}")


@pytest.mark.parametrize("module, command, example", [
    ("sensevm", "run", "echo 'print(1 + 2)' | sensevm run -"),
    ("sensevm", "test", "sensevm test tests/"),
    ("sensec", "build", "sensec build app.sns -o dist/app.snb"),
])
def test_help_pages_have_examples_and_environment(tmp_path, module, command, example):
    proc = cli(module, command, "--help", cwd=tmp_path)
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "Examples:" in text and example in text
    assert "Environment:" in text
    assert "SENSE_DEBUG" in text and "NO_COLOR" in text
    if module == "sensevm":
        for var in ("SENSE_TIER", "SENSE_MAX_STEPS", "SENSE_MEMORY_DIR", "SENSE_SMTP_HOST",
                    "SENSE_HTTP_TIMEOUT", "SENSE_SHELL_TIMEOUT", "OPENAI_API_KEY"):
            assert var in text, var


@pytest.mark.parametrize("module, var", [("sensevm", "_SENSEVM_COMPLETE"),
                                         ("sensec", "_SENSEC_COMPLETE")])
def test_completion_script_and_answers(tmp_path, module, var):
    script = cli(module, cwd=tmp_path, env={var: "bash_source"})
    assert script.returncode == 0
    assert f"_{module}_completion()".encode() in script.stdout
    # What bash asks for: the fast paths (`run FILE`, `build FILE`) must not take these.
    words = {"sensevm": ("sensevm run x.sns --max-s", "--max-steps"),
             "sensec": ("sensec build x.sns --out", "--output")}[module]
    (tmp_path / "x.sns").write_text("print(1)\n")
    answer = cli(module, *words[0].split()[1:], cwd=tmp_path,
                 env={var: "bash_complete", "COMP_WORDS": words[0], "COMP_CWORD": "3"})
    assert answer.returncode == 0 and answer.stdout != b"1\n"
    assert f"plain,{words[1]}".encode() in answer.stdout
    commands = cli(module, cwd=tmp_path, env={var: "bash_complete", "COMP_WORDS": f"{module} ",
                                              "COMP_CWORD": "1"})
    assert b"plain,run" in commands.stdout if module == "sensevm" else b"plain,build" in \
        commands.stdout


@pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")
def test_completion_in_a_terminal_is_not_the_repl(tmp_path):
    import pty
    import select
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", _SENSEVM_COMPLETE="bash_source")
    proc = subprocess.Popen([sys.executable, "-m", "sensevm"], stdin=slave, stdout=slave,
                            stderr=slave, cwd=tmp_path, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert b"_sensevm_completion()" in out and b">>> " not in out
