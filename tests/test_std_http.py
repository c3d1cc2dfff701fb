"""std.http through the real commands against a real HTTP server on 127.0.0.1 (docs/stdlib.md)."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from stdlib_helpers import TIERS, clean_failure, sense_run

IMPORT = "from std.http import get, get_json, post, post_json\n"


class Server:
    """A ThreadingHTTPServer in a thread; ``posts`` holds each POST's (path, type, body)."""

    def __init__(self):
        self.posts: list = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send(self, status, body=b"", headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                p = self.path
                base = f"http://127.0.0.1:{server.port}"
                if p == "/ok":
                    self.send(200, "héllo".encode(), [("Content-Type", "text/plain; charset=utf-8"),
                                                     ("X-Thing", "a"), ("X-Thing", "b")])
                elif p in ("/404", "/500"):
                    self.send(int(p[1:]), b"status " + p[1:].encode())
                elif p == "/json":
                    self.send(200, json.dumps({"name": "Ann", "tags": [1, 2.5, True, None]}).encode(),
                              [("Content-Type", "application/json")])
                elif p == "/badjson":
                    self.send(200, b'{"a": 1,,}')
                elif p == "/redir":
                    self.send(302, headers=[("Location", "/ok")])
                elif p == "/loop":
                    self.send(302, headers=[("Location", "/loop")])
                elif p == "/file":
                    self.send(302, headers=[("Location", "file:///etc/passwd")])
                elif p == "/slow":
                    time.sleep(3)
                    self.send(200, b"late")
                elif p == "/big":
                    self.send(200, b"x" * 5000)
                elif p == "/page":
                    self.send(200, f"{base}/hook".encode())
                elif p == "/count":
                    self.send(200, str(len(server.posts)).encode())
                else:
                    self.send(404)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                data = self.rfile.read(n).decode()
                server.posts.append((self.path, self.headers.get("Content-Type"), data))
                if self.path == "/moved":
                    self.send(307, headers=[("Location", "/hook2")])
                else:
                    self.send(201, b"got it")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def web(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("no_proxy", "*")
    server = Server()
    yield server
    server.close()


def commit(call: str, name: str = "a") -> str:
    return f"{name} = {call}\n{name}.verify()\nprint({name}.commit())\n"


@pytest.mark.parametrize("tier", TIERS)
def test_get_statuses_headers_and_labels(tmp_path, web, tier):
    source = (IMPORT + f'b = "{web.base}"\nr = get(b + "/ok")\n'
              'print(r["status"], r["body"], r["headers"]["x-thing"])\n'
              'print(r["headers"]["content-type"])\n'
              'print(get(b + "/404")["status"], get(b + "/404")["body"])\n'
              'print(get(b + "/500")["status"])\n'
              'j = get_json(b + "/json")["body"]\nprint(j["name"], j["tags"], type_of(j))\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("200 héllo a, b\ntext/plain; charset=utf-8\n404 status 404\n500\n"
                           "Ann [1, 2.5, true, nil] Map\n")


def test_what_comes_back_is_untrusted_web(tmp_path, web):
    # A page's body given to an outgoing action as its URL is flagged, naming the web.
    source = (IMPORT + f'r = get("{web.base}/page")\n'
              'p = post(r["body"], "hello")\np.verify()\nprint(p.second_look)\n')
    done = sense_run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert "/hook" in done.stdout and "web" in done.stdout
    assert web.posts == []


def test_redirects_followed_bounded_and_only_to_http(tmp_path, web, monkeypatch):
    done = sense_run(tmp_path, IMPORT + f'r = get("{web.base}/redir")\nprint(r["status"], r["body"])\n')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "200 héllo\n"
    monkeypatch.setenv("SENSE_HTTP_MAX_REDIRECTS", "3")
    loop = sense_run(tmp_path, IMPORT + f'print("start")\nr = get("{web.base}/loop")\n')
    clean_failure(loop)
    assert "more than 3 redirects" in loop.stderr and f"'{web.base}/loop'" in loop.stderr
    assert "main.sns:3:" in loop.stderr
    to_file = sense_run(tmp_path, IMPORT + f'r = get("{web.base}/file")\n')
    clean_failure(to_file)
    assert "file:///etc/passwd" in to_file.stderr and "not an http or https URL" in to_file.stderr


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "127.0.0.1/x",
                                 "http:///nohost"])
def test_other_schemes_are_refused_naming_the_url(tmp_path, url):
    done = sense_run(tmp_path, IMPORT + f'r = get("{url}")\n')
    clean_failure(done)
    assert f"'{url}'" in done.stderr and "SenseRuntimeError" in done.stderr


def test_timeout_and_size_cap_and_unreachable(tmp_path, web, monkeypatch):
    monkeypatch.setenv("SENSE_HTTP_TIMEOUT", "0.5")
    slow = sense_run(tmp_path, IMPORT + f'r = get("{web.base}/slow")\n')
    clean_failure(slow)
    assert "no reply within 0.5s" in slow.stderr and "/slow'" in slow.stderr
    monkeypatch.setenv("SENSE_HTTP_MAX_BYTES", "1000")
    big = sense_run(tmp_path, IMPORT + f'r = get("{web.base}/big")\n')
    clean_failure(big)
    assert "larger than 1000 bytes" in big.stderr and "/big'" in big.stderr
    web.close()
    gone = sense_run(tmp_path, IMPORT + f'r = get("{web.base}/ok")\n')
    clean_failure(gone)
    assert f"cannot fetch '{web.base}/ok'" in gone.stderr


def test_bad_json_is_a_clean_error(tmp_path, web):
    done = sense_run(tmp_path, IMPORT + f'r = get_json("{web.base}/badjson")\n')
    clean_failure(done)
    assert "cannot read JSON from" in done.stderr and "line 1 column" in done.stderr


@pytest.mark.parametrize("tier", TIERS)
def test_post_and_post_json_arrive(tmp_path, web, tier):
    source = (IMPORT + commit(f'post("{web.base}/hook", "héllo body")') +
              commit(f'post_json("{web.base}/hook", {{"n": 1, "xs": [1.5, nil, true]}})', "b") +
              "print(a.state)\n")
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[2] == "committed"
    assert all(line.startswith("{status: 201, headers: {") and line.endswith(", body: got it}")
               for line in lines[:2]), lines
    assert web.posts == [("/hook", "text/plain; charset=utf-8", "héllo body"),
                         ("/hook", "application/json", '{"n": 1, "xs": [1.5, null, true]}')]


def test_post_follows_no_redirect(tmp_path, web):
    done = sense_run(tmp_path, IMPORT + f'a = post("{web.base}/moved", "x")\na.verify()\n'
                     'print(a.commit()["status"])\n')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "307\n"
    assert [p[0] for p in web.posts] == ["/moved"]


def test_post_dry_run_and_denied_send_nothing(tmp_path, web):
    dry = sense_run(tmp_path, IMPORT + commit(f'post("{web.base}/hook", "x")'), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "body not executed" in dry.stdout
    denied = sense_run(tmp_path, "policy:\n    deny http.post\n" + IMPORT +
                       commit(f'post("{web.base}/hook", "x")'))
    clean_failure(denied)
    assert "http.post" in denied.stderr
    assert web.posts == []


def test_post_in_a_session_fires_at_the_session_commit(tmp_path, web):
    source = (IMPORT + f'b = "{web.base}"\np = nil\nsession notify as s:\n'
              '    p = post(b + "/hook", "queued")\n    p.verify()\n    p.commit()\n'
              '    print(get(b + "/count")["body"])\n    m = s.manifest()\n    s.commit(m.hash)\n'
              'print(get(b + "/count")["body"], p.state)\n')
    done = sense_run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0\n1 committed\n"
    assert web.posts == [("/hook", "text/plain; charset=utf-8", "queued")]


def test_second_look_flags_a_page_url_and_endorses_the_programs_own(tmp_path, web):
    flagged = sense_run(tmp_path, IMPORT + f'r = get("{web.base}/page")\n'
                        'p = post(r["body"], "hello")\np.verify()\np.commit()\n')
    clean_failure(flagged)
    assert "SenseApprovalError" in flagged.stderr and "second look" in flagged.stderr
    assert web.posts == []
    # The same URL written in the program vouches for the page's copy of it.
    endorsed = sense_run(tmp_path, IMPORT + f'known = "{web.base}/hook"\n'
                         f'r = get("{web.base}/page")\n'
                         'p = post(r["body"], "hello")\np.verify()\nprint(p.second_look)\n'
                         'print(p.commit()["status"])\n')
    assert endorsed.returncode == 0, endorsed.stderr
    assert endorsed.stdout == "nil\n201\n"
    assert web.posts == [("/hook", "text/plain; charset=utf-8", "hello")]
