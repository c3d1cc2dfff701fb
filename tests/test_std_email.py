"""std.email through the real commands against a real SMTP server (aiosmtpd) on 127.0.0.1."""

from __future__ import annotations

import email
import email.policy
import socket

import pytest

from stdlib_helpers import clean_failure, sense_run

aiosmtpd = pytest.importorskip("aiosmtpd.controller")

IMPORT = "from std.email import send\n"


class Handler:
    def __init__(self, refuse=()):
        self.messages: list = []
        self.refuse = refuse

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos),
                              email.message_from_bytes(envelope.content,
                                                       policy=email.policy.default)))
        return "250 Message accepted for delivery"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def smtp(monkeypatch):
    handler = Handler(refuse=("nobody@example.com",))
    port = free_port()
    controller = aiosmtpd.Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    for name in ("SENSE_SMTP_USER", "SENSE_SMTP_PASSWORD_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SENSE_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SENSE_SMTP_PORT", str(port))
    monkeypatch.setenv("SENSE_SMTP_FROM", "agent@example.org")
    yield handler
    controller.stop()


def send(to: str, subject: str, body: str) -> str:
    return f'a = send("{to}", "{subject}", "{body}")\na.verify()\nprint(a.commit() != nil)\n'


def test_a_message_arrives_with_its_headers_and_body(tmp_path, smtp):
    done = sense_run(tmp_path, IMPORT + send("ann@example.com, Bob <bob@example.com>",
                                             "Notes for today", "Hello Ann,\\nthe notes.") +
                     "print(a.state)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "true\ncommitted\n"
    [(sender, rcpts, message)] = smtp.messages
    assert sender == "agent@example.org"
    assert rcpts == ["ann@example.com", "bob@example.com"]
    assert message["From"] == "agent@example.org"
    assert message["To"] == "ann@example.com, Bob <bob@example.com>"
    assert message["Subject"] == "Notes for today"
    assert message["Message-ID"] and message["Date"]
    assert message.get_content().replace("\r\n", "\n") == "Hello Ann,\nthe notes.\n"


def test_a_refused_recipient_is_a_clean_error_and_the_action_failed(tmp_path, smtp):
    source = (IMPORT + 'a = send("nobody@example.com", "hi", "text")\na.verify()\n'
              'try:\n    a.commit()\nexcept SenseRuntimeError as e:\n    print(e)\nprint(a.state)\n')
    done = sense_run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert "refused the recipient 'nobody@example.com' (550 5.1.1 no such user here)" \
        in done.stdout
    assert done.stdout.endswith("failed\n")
    assert smtp.messages == []
    # Uncaught: a positioned Sense error naming the server, no traceback.
    done = sense_run(tmp_path, IMPORT + 'a = send("nobody@example.com", "hi", "t")\n'
                     'a.verify()\na.commit()\n')
    clean_failure(done)
    assert "SenseRuntimeError" in done.stderr and "127.0.0.1:" in done.stderr
    assert "main.sns:4:" in done.stderr


def test_no_smtp_host_is_a_clean_error(tmp_path, monkeypatch):
    monkeypatch.delenv("SENSE_SMTP_HOST", raising=False)
    done = sense_run(tmp_path, IMPORT + send("ann@example.com", "s", "b"))
    clean_failure(done)
    assert "no SMTP server is configured (set SENSE_SMTP_HOST)" in done.stderr


def test_an_unreachable_server_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SENSE_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SENSE_SMTP_PORT", str(free_port()))
    monkeypatch.setenv("SENSE_SMTP_FROM", "agent@example.org")
    done = sense_run(tmp_path, IMPORT + send("ann@example.com", "s", "b"))
    clean_failure(done)
    assert "cannot send through the SMTP server 127.0.0.1:" in done.stderr


@pytest.mark.parametrize("to,subject", [("ann@example.com", "hi\\r\\nBcc: evil@evil.example"),
                                        ("ann@example.com\\nBcc: evil@evil.example", "hi")])
def test_header_injection_is_refused(tmp_path, smtp, to, subject):
    done = sense_run(tmp_path, IMPORT + send(to, subject, "b"))
    clean_failure(done)
    assert "line break" in done.stderr and "refused" in done.stderr
    assert smtp.messages == []


def test_a_login_needs_starttls(tmp_path, smtp, monkeypatch):
    monkeypatch.setenv("SENSE_SMTP_USER", "agent")
    monkeypatch.setenv("SENSE_SMTP_PASSWORD_ENV", "MY_SMTP_PASSWORD")
    monkeypatch.setenv("MY_SMTP_PASSWORD", "hunter2")
    done = sense_run(tmp_path, IMPORT + send("ann@example.com", "s", "b"))
    clean_failure(done)
    assert "does not offer STARTTLS" in done.stderr and "hunter2" not in done.stderr
    monkeypatch.delenv("MY_SMTP_PASSWORD")
    done = sense_run(tmp_path, IMPORT + send("ann@example.com", "s", "b"))
    clean_failure(done)
    assert "MY_SMTP_PASSWORD is not set" in done.stderr
    assert smtp.messages == []


def test_dry_run_and_denied_send_nothing(tmp_path, smtp):
    dry = sense_run(tmp_path, IMPORT + send("ann@example.com", "s", "b"), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    denied = sense_run(tmp_path, "policy:\n    deny email.send\n" + IMPORT +
                       send("ann@example.com", "s", "b"))
    clean_failure(denied)
    assert "email.send" in denied.stderr
    assert smtp.messages == []


def test_second_look_flags_a_recipient_from_a_tool(tmp_path, smtp):
    source = ("tool read_page() returns String:\n    return \"x@evil.example\"\n" + IMPORT +
              'a = send(read_page(), "s", "b")\na.verify()\nprint(a.second_look)\na.commit()\n')
    done = sense_run(tmp_path, source)
    clean_failure(done)
    assert "x@evil.example" in done.stdout and "argument 'to'" in done.stdout
    assert "SenseApprovalError" in done.stderr
    assert smtp.messages == []
