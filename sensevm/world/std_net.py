"""The natives of std.http, std.email and std.shell: what leaves the machine (docs/stdlib.md).

Registered with the others (``stdlib_native.REGISTRY``); the kinds and capabilities are the
contract's rows in ``sensevm/bytecode/natives.py``. The library declares each as an ordinary
tool or irreversible action with ``requires CAP`` (stdlib/http.sns, email.sns, shell.sns), so
an effect happens only through that declaration's checks: the capability, verify, approval,
the second look (every action here is outgoing), commit, never under ``--dry-run``, queued in
a session.

Every failure is a SenseRuntimeError (or SenseTypeError) naming the URL, the SMTP server or
the command; the NATIVE handler places it at the program's call into the library. The
modules they need (urllib, smtplib, subprocess, ssl) are imported inside the natives, so a
run that uses none of them never loads them.

Settings (environment variables, read at each call):

* ``SENSE_HTTP_TIMEOUT`` (seconds, default 30), ``SENSE_HTTP_MAX_BYTES`` (a reply's body, default
  10 MB), ``SENSE_HTTP_MAX_REDIRECTS`` (default 5);
* ``SENSE_SMTP_HOST``, ``SENSE_SMTP_PORT`` (default 25), ``SENSE_SMTP_USER``,
  ``SENSE_SMTP_PASSWORD_ENV`` (the name of the variable holding the password),
  ``SENSE_SMTP_FROM``, ``SENSE_SMTP_TIMEOUT`` (default 30);
* ``SENSE_SHELL_TIMEOUT`` (seconds, default 60).
"""

from __future__ import annotations

import math
import os

from sensevm.base.errors import SenseRuntimeError, SenseTypeError
from sensevm.guard import provenance as PV

_WEB = PV.only(PV.untrusted("web"))
_SHELL = PV.only(PV.untrusted("shell"))


def _type_name(v) -> str:
    from sensevm.runtime.values import type_name
    return type_name(v)


def _setting(name: str, default: float, integer: bool = False):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise SenseRuntimeError(f"{name} must be a number, not {raw!r}") from None
    if value < 0 or (not integer and not math.isfinite(value)) or (value == 0 and not integer):
        raise SenseRuntimeError(f"{name} must be a positive number, not {raw!r}")
    return value


def _string(fn: str, what: str, value) -> str:
    v = PV.plain(value)
    if type(v) is not str:
        raise SenseTypeError(f"{fn}() expects {what} (String), got {_type_name(value)}")
    return v


# ----------------------------------------------------------------------------- std.http

_SCHEMES = ("http", "https")
_REDIRECTS = (301, 302, 303, 307, 308)


def _url(fn: str, value) -> str:
    from urllib.parse import urlsplit
    url = _string(fn, "a URL", value)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise SenseRuntimeError(f"cannot fetch '{url}': not a valid URL") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise SenseRuntimeError(f"cannot fetch '{url}': only http and https URLs are allowed")
    if not parts.hostname:
        raise SenseRuntimeError(f"cannot fetch '{url}': the URL names no host")
    if any(c in url for c in "\x00\r\n\t "):
        raise SenseRuntimeError(f"cannot fetch '{url}': the URL holds a space or a control "
                                "character")
    return url


def _headers(message) -> dict:
    """A reply's headers as a Map: lower-case names; a repeated header's values joined by
    ', ' (as HTTP allows)."""
    out: dict = {}
    for name, value in message.items():
        key = PV.label(name.lower(), _WEB)
        text = str(value)
        if key in out:
            out[key] = PV.label(PV.plain(out[key]) + ", " + text, _WEB)
        else:
            out[key] = PV.label(text, _WEB)
    return out


def _request(url: str, method: str, data: bytes | None, content_type: str | None,
             follow: bool):
    """(status, headers message, body bytes, final URL) of one request, following redirects
    (GET only, at most SENSE_HTTP_MAX_REDIRECTS, to http and https only)."""
    import urllib.error
    import urllib.request
    from urllib.parse import urljoin, urlsplit
    from sensevm.runtime import values as V
    from sensevm.world.bounded_http import FAILURES, failure, read_at_most, urlopen
    from sensevm.world.deadline import Deadline

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None         # a 3xx reaches us as it is; we decide whether to follow it

    timeout = _setting("SENSE_HTTP_TIMEOUT", 30.0)
    limit = _setting("SENSE_HTTP_MAX_BYTES", 10_000_000, integer=True)
    hops = _setting("SENSE_HTTP_MAX_REDIRECTS", 5, integer=True)
    deadline = Deadline(timeout, V.BUDGET)
    first = url
    for hop in range(hops + 1):
        headers = {"User-Agent": "sense-std.http", "Accept-Encoding": "identity"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            try:
                reply = urlopen(request, deadline, (NoRedirect(),))
            except urllib.error.HTTPError as exc:
                reply = exc             # a status that is not 2xx: a reply like any other
            with reply:
                status = reply.status if reply.status is not None else reply.code
                message = reply.headers
                location = message.get("Location") if message is not None else None
                if follow and status in _REDIRECTS and location:
                    target = urljoin(url, location)
                    if urlsplit(target).scheme.lower() not in _SCHEMES:
                        raise SenseRuntimeError(
                            f"cannot fetch '{first}': it redirects to '{target}', which is not "
                            "an http or https URL")
                    url = target
                    continue
                body = read_at_most(reply, limit)
        except SenseRuntimeError:
            raise
        except FAILURES as exc:
            why = failure(exc)
            raise (_no_reply(url, deadline) if why is None
                   else SenseRuntimeError(f"cannot fetch '{url}': {why}")) from None
        if body is None:
            raise SenseRuntimeError(f"cannot fetch '{url}': the reply is larger than {limit} "
                                    "bytes (SENSE_HTTP_MAX_BYTES)")
        return status, message, body, url
    raise SenseRuntimeError(f"cannot fetch '{first}': more than {hops} redirects "
                            "(SENSE_HTTP_MAX_REDIRECTS)")


def _no_reply(url: str, deadline):
    return (deadline.run_out(f"a reply from {url}")
            or SenseRuntimeError(f"cannot fetch '{url}': no reply within {deadline.timeout:g}s "
                                 "(SENSE_HTTP_TIMEOUT)"))


def _text_of(body: bytes, message) -> str:
    charset = None
    if message is not None:
        charset = message.get_content_charset()
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:         # a charset Python does not know
        return body.decode("utf-8", "replace")


def _reply(status, message, body_value) -> dict:
    return {"status": PV.label(int(status), _WEB),
            "headers": _headers(message) if message is not None else {},
            "body": body_value}


def _text_body(fn: str, message, body: bytes):
    from sensevm.runtime import values as V
    text = _text_of(body, message)
    if len(text) > V.MAX_STRING:
        raise SenseRuntimeError(f"{fn}(): the reply is longer than the string limit "
                                f"({V.MAX_STRING} characters)")
    return PV.label(text, _WEB)


def _json_body(url: str, message, body: bytes):
    import json
    from sensevm.runtime import values as V
    from sensevm.runtime.conversions import int_reader

    def no_constant(name):
        raise ValueError(f"{name} is not JSON")
    try:
        value = json.loads(_text_of(body, message), parse_int=int_reader(V.BUDGET),
                           parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise SenseRuntimeError(f"cannot read JSON from '{url}': {exc.msg} at line {exc.lineno} "
                                f"column {exc.colno}") from None
    except ValueError as exc:
        raise SenseRuntimeError(f"cannot read JSON from '{url}': {exc}") from None
    return PV.label(value, _WEB)


def n_http_get(vm, args):
    url = _url("get", args[0])
    status, message, body, _ = _request(url, "GET", None, None, True)
    return _reply(status, message, _text_body("get", message, body))


def n_http_get_json(vm, args):
    url = _url("get_json", args[0])
    status, message, body, final = _request(url, "GET", None, None, True)
    return _reply(status, message, _json_body(final, message, body))


def _to_json(value, where: str = "value", depth: int = 0):
    """A Sense value as Python's JSON data, or a type error naming where the bad part is."""
    v = PV.plain(value)
    t = type(v)
    if depth > 500:
        raise SenseRuntimeError("post_json(): the value is nested too deeply")
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        if not math.isfinite(v):
            raise SenseRuntimeError(f"post_json(): {where} is {v!r}, which JSON cannot hold")
        return v
    if t is list:
        return [_to_json(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v)]
    if t is dict:
        out = {}
        for k, x in v.items():
            key = PV.plain(k)
            out[str(key)] = _to_json(x, f"{where}[{key!r}]", depth + 1)
        return out
    raise SenseTypeError(f"post_json(): {where} is a {_type_name(value)}, which is not JSON")


def n_http_post(vm, args):
    url = _url("post", args[0])
    body = _string("post", "a body", args[1])
    status, message, data, _ = _request(url, "POST", body.encode("utf-8"),
                                        "text/plain; charset=utf-8", False)
    return _reply(status, message, _text_body("post", message, data))


def n_http_post_json(vm, args):
    import json
    url = _url("post_json", args[0])
    payload = json.dumps(_to_json(args[1]), ensure_ascii=False).encode("utf-8")
    status, message, data, _ = _request(url, "POST", payload, "application/json", False)
    return _reply(status, message, _text_body("post_json", message, data))


# ----------------------------------------------------------------------------- std.email

def _header_text(what: str, value) -> str:
    text = _string("send", what, value)
    if "\r" in text or "\n" in text or "\x00" in text:
        raise SenseRuntimeError(f"send(): the {what} holds a line break, which could add "
                                "headers to the message; refused")
    return text


def n_email_send(vm, args):
    from email.utils import getaddresses
    to = _header_text("recipient", args[0])
    subject = _header_text("subject", args[1])
    body = _string("send", "a body", args[2])
    addresses = [addr for _, addr in getaddresses([to])]
    if not addresses or any("@" not in a or a.count("@") != 1 for a in addresses):
        raise SenseRuntimeError(f"send(): not an e-mail address: '{to}'")
    host = os.environ.get("SENSE_SMTP_HOST", "").strip()
    if not host:
        raise SenseRuntimeError("send(): no SMTP server is configured (set SENSE_SMTP_HOST)")
    port = _setting("SENSE_SMTP_PORT", 25, integer=True)
    timeout = _setting("SENSE_SMTP_TIMEOUT", 30.0)
    user = os.environ.get("SENSE_SMTP_USER", "").strip() or None
    sender = os.environ.get("SENSE_SMTP_FROM", "").strip() or user
    server = f"{host}:{port}"
    if not sender:
        raise SenseRuntimeError("send(): no sender address (set SENSE_SMTP_FROM)")
    if "\r" in sender or "\n" in sender:
        raise SenseRuntimeError("send(): SENSE_SMTP_FROM holds a line break; refused")
    password = None
    if user is not None:
        var = os.environ.get("SENSE_SMTP_PASSWORD_ENV", "").strip()
        if not var or var not in os.environ:
            raise SenseRuntimeError(f"send(): SENSE_SMTP_USER is set but no password: set "
                                    f"SENSE_SMTP_PASSWORD_ENV to the name of the variable "
                                    f"that holds it" + (f" ({var} is not set)" if var else ""))
        password = os.environ[var]
    message = _message(sender, to, subject, body)
    _smtp_send(server, host, port, timeout, user, password, sender, addresses, message)
    return message["Message-ID"]


def _message(sender: str, to: str, subject: str, body: str):
    from email.message import EmailMessage
    from email.utils import formatdate, make_msgid
    from email import policy
    message = EmailMessage(policy=policy.SMTP)
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2].strip(">") or None)
    message.set_content(body)
    return message


def _smtp_send(server, host, port, timeout, user, password, sender, addresses, message):
    import smtplib
    import socket
    import ssl
    try:
        with smtplib.SMTP(host, port, timeout=timeout) as smtp:
            smtp.ehlo()
            if smtp.has_extn("starttls"):
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo()
            elif user is not None:
                raise SenseRuntimeError(f"send(): the SMTP server {server} does not offer "
                                        "STARTTLS; the password is not sent in the clear")
            if user is not None:
                smtp.login(user, password)
            refused = smtp.send_message(message, from_addr=sender, to_addrs=addresses)
    except SenseRuntimeError:
        raise
    except smtplib.SMTPRecipientsRefused as exc:
        who = ", ".join(f"'{a}' ({_smtp_reply(r)})" for a, r in exc.recipients.items())
        raise SenseRuntimeError(f"send(): the SMTP server {server} refused the recipient "
                                f"{who}; nothing was sent") from None
    except smtplib.SMTPSenderRefused as exc:
        raise SenseRuntimeError(f"send(): the SMTP server {server} refused the sender "
                                f"'{sender}' ({_smtp_reply((exc.smtp_code, exc.smtp_error))})") \
            from None
    except smtplib.SMTPAuthenticationError as exc:
        raise SenseRuntimeError(f"send(): the SMTP server {server} refused the login of "
                                f"'{user}' ({_smtp_reply((exc.smtp_code, exc.smtp_error))})") \
            from None
    except smtplib.SMTPResponseException as exc:
        raise SenseRuntimeError(f"send(): the SMTP server {server} said "
                                f"{_smtp_reply((exc.smtp_code, exc.smtp_error))}") from None
    except (socket.timeout, TimeoutError):
        raise SenseRuntimeError(f"send(): no reply from the SMTP server {server} within "
                                f"{timeout:g}s (SENSE_SMTP_TIMEOUT)") from None
    except (smtplib.SMTPException, ssl.SSLError, OSError) as exc:
        raise SenseRuntimeError(f"send(): cannot send through the SMTP server {server}: "
                                f"{exc}") from None
    if refused:
        # Some recipients were accepted (the mail went to them), some refused: say which.
        who = ", ".join(f"'{a}' ({_smtp_reply(r)})" for a, r in refused.items())
        raise SenseRuntimeError(f"send(): the SMTP server {server} refused the recipient {who} "
                                "(the others were sent the message)")


def _smtp_reply(reply) -> str:
    code, text = reply
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return f"{code} {text}".strip()


# ----------------------------------------------------------------------------- std.shell

def _argv(value) -> list:
    items = PV.plain(value)
    if type(items) is not list:
        raise SenseTypeError(f"run() expects the command as an Array of Strings, got "
                             f"{_type_name(value)}")
    if not items:
        raise SenseRuntimeError("run(): the command is empty")
    argv = []
    for i, item in enumerate(items):
        text = PV.plain(item)
        if type(text) is not str:
            raise SenseTypeError(f"run(): argument {i} of the command is a {_type_name(item)}, "
                                 "not a String")
        if "\x00" in text:
            raise SenseRuntimeError(f"run(): argument {i} of the command holds a NUL character")
        argv.append(text)
    return argv


def _shown(argv: list) -> str:
    import shlex
    text = shlex.join(argv)
    return text if len(text) <= 200 else text[:200] + "..."


def n_shell_run(vm, args):
    import subprocess
    from sensevm.runtime import values as V
    argv = _argv(args[0])
    timeout = _setting("SENSE_SHELL_TIMEOUT", 60.0)
    budget = V.BUDGET
    end = budget.deadline if budget is not None else None
    if end is not None:
        from time import monotonic
        timeout = max(min(timeout, end - monotonic()), 0.001)
    try:
        done = subprocess.run(argv, shell=False, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise SenseRuntimeError(f"cannot run '{argv[0]}': no such program") from None
    except PermissionError:
        raise SenseRuntimeError(f"cannot run '{argv[0]}': permission denied") from None
    except subprocess.TimeoutExpired:
        raise SenseRuntimeError(f"command '{_shown(argv)}' did not finish within {timeout:g}s "
                                "(SENSE_SHELL_TIMEOUT); it was stopped") from None
    except OSError as exc:
        raise SenseRuntimeError(f"cannot run '{argv[0]}': {exc.strerror or exc}") from None
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    if len(out) > V.MAX_STRING or len(err) > V.MAX_STRING:
        raise SenseRuntimeError(f"command '{_shown(argv)}' wrote more than the string limit "
                                f"({V.MAX_STRING} characters)")
    return {"code": PV.label(done.returncode, _SHELL), "stdout": PV.label(out, _SHELL),
            "stderr": PV.label(err, _SHELL)}


FUNCTIONS = {
    "http_get": n_http_get,
    "http_get_json": n_http_get_json,
    "http_post": n_http_post,
    "http_post_json": n_http_post_json,
    "email_send": n_email_send,
    "shell_run": n_shell_run,
}
