"""std.shell through the real commands, running real processes (docs/stdlib.md)."""

from __future__ import annotations

import sys

import pytest

from stdlib_helpers import TIERS, clean_failure, sense_run

ALLOW = "policy:\n    allow shell.exec\n"
IMPORT = "from std.shell import run\n"


def run(argv: str, name: str = "a") -> str:
    return f"{name} = run({argv})\n{name}.verify()\nr = {name}.commit()\n"


@pytest.mark.parametrize("tier", TIERS)
def test_echo_and_python_output_and_exit_code(tmp_path, tier):
    py = sys.executable
    source = (ALLOW + IMPORT + run('["/bin/echo", "hi", "a b", "$HOME;", "*"]') +
              'print(r["code"], r["stdout"])\n' +
              run(f'["{py}", "-c", "import sys; print(\'out\'); print(\'err\', file=sys.stderr); '
                  f'sys.exit(3)"]', "b") +
              'print(r["code"], r["stdout"], r["stderr"], b.state)\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    # No shell: "$HOME;" and "*" reach the program as they are.
    assert done.stdout == "0 hi a b $HOME; *\n\n3 out\n err\n committed\n"


def test_without_an_explicit_allow_it_is_denied(tmp_path):
    marker = tmp_path / "made"
    done = sense_run(tmp_path, IMPORT + run(f'["/usr/bin/touch", "{marker}"]'))
    clean_failure(done)
    assert "not allowed by any policy (add 'policy: allow shell.exec')" in done.stderr
    assert "main.sns:3:" in done.stderr
    denied = sense_run(tmp_path, ALLOW + "def go():\n    policy:\n        deny shell.exec\n"
                       "    a = run([\"/usr/bin/touch\", \"" + str(marker) + "\"])\n"
                       "    a.verify()\n    a.commit()\ngo()\n" + IMPORT)
    clean_failure(denied)
    assert not marker.exists()


def test_a_missing_program_is_named(tmp_path):
    done = sense_run(tmp_path, ALLOW + IMPORT + run('["no-such-program-here", "x"]'))
    clean_failure(done)
    assert "cannot run 'no-such-program-here': no such program" in done.stderr
    assert "SenseRuntimeError" in done.stderr


def test_a_timeout_stops_the_command_and_fails_the_action(tmp_path, monkeypatch):
    monkeypatch.setenv("SENSE_SHELL_TIMEOUT", "0.5")
    source = (ALLOW + IMPORT + 'a = run(["sleep", "5"])\na.verify()\n'
              'try:\n    a.commit()\nexcept SenseRuntimeError as e:\n    print(e)\n'
              'print(a.state)\n')
    done = sense_run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert "command 'sleep 5' did not finish within 0.5s" in done.stdout
    assert done.stdout.endswith("failed\n")


@pytest.mark.parametrize("argv,message", [("[]", "the command is empty"),
                                          ('["echo", 3]', "expects Array<String>, got Array")])
def test_bad_argv(tmp_path, argv, message):
    done = sense_run(tmp_path, ALLOW + IMPORT + f"x = {argv}\n" + run("x"))
    clean_failure(done)
    assert message in done.stderr


def test_dry_run_runs_nothing(tmp_path):
    marker = tmp_path / "made"
    done = sense_run(tmp_path, ALLOW + IMPORT + run(f'["/usr/bin/touch", "{marker}"]'),
                     "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "body not executed" in done.stdout
    assert not marker.exists()
    real = sense_run(tmp_path, ALLOW + IMPORT + run(f'["/usr/bin/touch", "{marker}"]'))
    assert real.returncode == 0, real.stderr
    assert marker.exists()


def test_second_look_flags_an_argument_from_a_tool_and_output_is_untrusted(tmp_path):
    marker = tmp_path / "made"
    source = (ALLOW + "tool read_page() returns String:\n    return \"" + str(marker) + "\"\n" +
              IMPORT + 'a = run(["/usr/bin/touch", read_page()])\na.verify()\n'
              'print(a.second_look)\na.commit()\n')
    done = sense_run(tmp_path, source)
    clean_failure(done)
    assert "argument 'argv'" in done.stdout and "read_page" in done.stdout
    assert "SenseApprovalError" in done.stderr
    assert not marker.exists()
    # What a command printed is untrusted:shell: run with it, it is flagged too.
    py = sys.executable
    source = (ALLOW + IMPORT + run(f'["{py}", "-c", "print(bytes([116, 111, 117, 99, 104]).decode())"]') +
              f'b = run([r["stdout"].trim(), "{marker}"])\nb.verify()\nprint(b.second_look)\n')
    done = sense_run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert "a command's output" in done.stdout and "argument 'argv'" in done.stdout
    assert not marker.exists()
