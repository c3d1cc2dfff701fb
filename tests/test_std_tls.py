"""std.http over https and std.email over STARTTLS with a login, against real servers on
127.0.0.1 holding a certificate made for the test (openssl): the connection is verified
against the certificate the test trusts (SSL_CERT_FILE), an untrusted one is refused with an
error naming the URL or the server, and the password only ever goes over TLS."""

from __future__ import annotations

import email
import email.policy
import http.server
import shutil
import ssl
import subprocess
import threading

import pytest

from stdlib_helpers import TIERS, clean_failure, sense_run
from test_std_email import free_port

aiosmtpd = pytest.importorskip("aiosmtpd.controller")
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl to make a "
                                "certificate with")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def server_context(certificate):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


@pytest.fixture
def https(certificate):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b"secure hello"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = server_context(certificate).wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("tier", TIERS)
def test_https_get_is_verified_against_the_trusted_certificate(tmp_path, monkeypatch, https,
                                                                certificate, tier):
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    done = sense_run(tmp_path, f'from std.http import get\nr = get("{https}/x")\n'
                               'print(r["status"], r["body"])\n', tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "200 secure hello\n"


def test_an_untrusted_certificate_is_a_clean_error_naming_the_url(tmp_path, monkeypatch, https):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    done = sense_run(tmp_path, f'from std.http import get\nprint(get("{https}/x"))\n')
    clean_failure(done)
    assert "SenseRuntimeError" in done.stderr and f"{https}/x" in done.stderr, done.stderr
    assert "certificate" in done.stderr.lower()


class LoginHandler:
    def __init__(self):
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((session.authenticated, envelope.rcpt_tos,
                              email.message_from_bytes(envelope.content,
                                                       policy=email.policy.default)))
        return "250 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    from aiosmtpd.smtp import AuthResult
    ok = auth_data.login == b"agent" and auth_data.password == b"s3cret"
    return AuthResult(success=ok, handled=False)


@pytest.fixture
def smtp_tls(monkeypatch, certificate):
    handler = LoginHandler()
    port = free_port()
    controller = aiosmtpd.Controller(
        handler, hostname="127.0.0.1", port=port, tls_context=server_context(certificate),
        require_starttls=True, auth_require_tls=True, authenticator=authenticator)
    controller.start()
    monkeypatch.setenv("SENSE_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SENSE_SMTP_PORT", str(port))
    monkeypatch.setenv("SENSE_SMTP_USER", "agent")
    monkeypatch.setenv("SENSE_SMTP_PASSWORD_ENV", "AGENT_MAIL_PASSWORD")
    monkeypatch.setenv("SENSE_SMTP_FROM", "agent@example.org")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    yield handler
    controller.stop()


SEND = ('from std.email import send\na = send("ann@example.com", "hi", "over TLS")\n'
        'a.verify()\na.commit()\nprint(a.state)\n')


@pytest.mark.parametrize("tier", TIERS)
def test_a_login_goes_over_starttls_and_the_message_arrives(tmp_path, monkeypatch, smtp_tls,
                                                            tier):
    monkeypatch.setenv("AGENT_MAIL_PASSWORD", "s3cret")
    done = sense_run(tmp_path, SEND, tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "committed\n"
    [(authenticated, rcpts, message)] = smtp_tls.messages
    assert authenticated and rcpts == ["ann@example.com"] and message["Subject"] == "hi"


def test_a_wrong_password_is_a_clean_error_and_nothing_is_sent(tmp_path, monkeypatch, smtp_tls):
    monkeypatch.setenv("AGENT_MAIL_PASSWORD", "wrong")
    done = sense_run(tmp_path, SEND)
    clean_failure(done)
    assert "refused the login of 'agent'" in done.stderr, done.stderr
    assert smtp_tls.messages == []


def test_an_untrusted_smtp_certificate_sends_no_password(tmp_path, monkeypatch, smtp_tls):
    monkeypatch.setenv("AGENT_MAIL_PASSWORD", "s3cret")
    monkeypatch.delenv("SSL_CERT_FILE")
    done = sense_run(tmp_path, SEND)
    clean_failure(done)
    assert "SenseRuntimeError" in done.stderr and "127.0.0.1" in done.stderr, done.stderr
    assert smtp_tls.messages == []
