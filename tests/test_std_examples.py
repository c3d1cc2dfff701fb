"""The examples built on the standard library (examples/triage, examples/deploy), run as a
person runs them: in a copy of their folder, through the real commands, on both tiers, with a
real SMTP server (aiosmtpd) on 127.0.0.1 for the replies; each prints its NAME.out and leaves
the world as the output says."""

from __future__ import annotations

import email
import email.policy
import os
import shutil

import pytest

from conftest import ROOT
from stdlib_helpers import TIERS, sense_run
from test_std_email import smtp  # noqa: F401 (the fixture: a real SMTP server on 127.0.0.1)

aiosmtpd = pytest.importorskip("aiosmtpd.controller")

EXAMPLES = os.path.join(ROOT, "examples")


def copy_example(tmp_path, name: str):
    folder = tmp_path / name
    shutil.copytree(os.path.join(EXAMPLES, name), folder)
    source = (folder / f"{name}.sns").read_text(encoding="utf-8")
    expected = (folder / f"{name}.out").read_text(encoding="utf-8")
    return folder, source, expected


@pytest.mark.parametrize("tier", TIERS)
def test_the_triage_agent_answers_its_contacts_and_holds_the_rest(tmp_path, smtp, tier):
    folder, source, expected = copy_example(tmp_path, "triage")
    done = sense_run(folder, source, tier=tier, name="triage.sns")
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    # Exactly the two replies the session's manifest listed, each sent once, at its commit.
    sent = sorted((rcpts, m["Subject"], m.get_content().strip()) for _, rcpts, m in smtp.messages)
    assert sent == [
        (["ada@example.com"], "Re: Lunch on Friday?",
         "Thanks for asking. Yes: I will get back to you today."),
        (["grace@example.com"], "Re: Compiler review",
         "Thanks for asking. Yes: I will get back to you today.")]
    # The held message was drafted but never sent; every draft is on disk.
    drafts = sorted(os.listdir(folder / "outbox"))
    assert drafts == ["01-ada.txt", "02-grace.txt", "03-invoice.txt"]
    assert (folder / "outbox" / "03-invoice.txt").read_text().startswith(
        "To: billing@invoices.example\n\n")


def test_the_triage_agent_without_a_mail_server_says_nothing_went_out(tmp_path, monkeypatch):
    """The session commits what it can and says what failed: no reply is reported sent."""
    monkeypatch.delenv("SENSE_SMTP_HOST", raising=False)
    folder, source, _ = copy_example(tmp_path, "triage")
    done = sense_run(folder, source, name="triage.sns")
    assert done.returncode == 1
    assert "SenseSessionError: session 'replies' committed, but not all of it: 2 of 2" in (
        done.stderr)
    assert "no SMTP server is configured" in done.stderr and "Traceback" not in done.stderr
    assert "session committed" not in done.stdout


@pytest.mark.parametrize("tier", TIERS)
def test_the_deploy_script_rolls_back_a_release_that_fails_its_check(tmp_path, tier):
    folder, source, expected = copy_example(tmp_path, "deploy")
    before = {name: (folder / "site" / name).read_bytes()
              for name in os.listdir(folder / "site")}
    done = sense_run(folder, source, tier=tier, name="deploy.sns")
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    after = {name: (folder / "site" / name).read_bytes()
             for name in os.listdir(folder / "site")}
    assert after == before          # byte for byte, and no file left behind


def test_the_deploy_script_keeps_a_healthy_release(tmp_path):
    """The same script, with a release the check accepts: nothing is rolled back."""
    folder, source, _ = copy_example(tmp_path, "deploy")
    source = source.replace('"workers = 0"', '"workers = 2"')
    done = sense_run(folder, source, name="deploy.sns")
    assert done.returncode == 0, done.stderr
    assert "health check: healthy: version 2 (exit 0)" in done.stdout
    assert "rolled_back" not in done.stdout
    assert (folder / "site" / "config.txt").read_text() == "version = 2\nworkers = 2\n"


def test_the_deploy_script_without_the_allow_changes_nothing(tmp_path):
    """shell.exec needs its explicit allow: without it the check is refused before anything
    runs, and the writes before it were made (the script did not roll them back: it stopped)."""
    folder, source, _ = copy_example(tmp_path, "deploy")
    done = sense_run(folder, source.replace("policy: allow shell.exec\n", ""), name="deploy.sns")
    assert done.returncode == 1
    assert "shell.exec" in done.stderr and "Traceback" not in done.stderr
    assert "health check" not in done.stdout
