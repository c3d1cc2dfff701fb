"""The HTTP model providers against a chat server the tests start on 127.0.0.1.

The server replays queued replies (JSON, an HTTP status, a slow reply, bytes that are not JSON)
and records every request, so the tests check both what a Sense program sees and what went over
the wire: the OpenAI chat-completions shape (any compatible server: Ollama, LM Studio, vLLM) and
Anthropic's messages shape, tool calls included.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sensevm.base.errors import SensePolicyError, SenseRuntimeError


class ChatServer:
    """Replies, in order, with what was queued; records (path, headers, body) of each request."""

    def __init__(self):
        self.replies: list = []
        self.requests: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                        body))
                kind, value = server.replies.pop(0) if server.replies else ("status", 404)
                if kind == "sleep":
                    time.sleep(value)
                    kind, value = "json", {"choices": [{"message": {"content": "late"}}]}
                if kind == "status":
                    payload, status = b'{"error": {"message": "upstream exploded"}}', value
                elif kind == "raw":
                    payload, status = value, 200
                else:
                    payload, status = json.dumps(value).encode(), 200
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass            # the client gave up (the timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = ChatServer()
    yield s
    s.close()


def text_reply(text):
    return ("json", {"choices": [{"message": {"role": "assistant", "content": text}}]})


def calls_reply(*calls):
    return ("json", {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)]}}]})


def openai_model(server, extra=""):
    return (f'model gpt = inference("openai", "llama3.2", base_url: "{server.url}/v1"{extra})\n'
            "set delegation = gpt\n")


# ----------------------------------------------------------------------------- ask

def test_ask_posts_a_chat_completion_and_returns_an_answer(run, server):
    server.replies.append(text_reply("Paris"))
    out = run(openai_model(server, ", temperature: 0.2, max_tokens: 50") +
              'a = ask("Capital of France?")\nprint(a)\nprint(a.value, a.confidence, a.source)\n'
              "for e in audit_log():\n    print(e)\n")
    assert out.error is None, out.error
    assert out.stdout.splitlines() == ["answer<?>(Paris)", "Paris nil gpt",
                                       "[line 3] model 'gpt' -> called"]
    (path, headers, body), = server.requests
    assert path == "/v1/chat/completions"
    assert body == {"model": "llama3.2", "temperature": 0.2, "max_tokens": 50,
                    "messages": [{"role": "user", "content": "Capital of France?"}]}
    assert "authorization" not in headers          # a local server named by base_url: no key


def test_the_key_goes_in_the_authorization_header(run, server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test-123")
    server.replies.append(text_reply("ok"))
    out = run(openai_model(server, ', api_key_env: "MY_KEY"') + 'print(ask("hi").value)\n')
    assert out.error is None, out.error
    assert server.requests[0][1]["authorization"] == "Bearer sk-test-123"


def test_a_named_key_variable_that_is_unset_is_an_error(run, server, monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)
    out = run(openai_model(server, ', api_key_env: "MY_KEY"'))
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == ("inference() needs the 'MY_KEY' environment variable set to "
                                 "a real API key")


def test_without_base_url_the_reference_key_rule_holds(run, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for provider, var in (("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")):
        out = run(f'model m = inference("{provider}")\n')
        assert out.error.message == (f"inference() needs the '{var}' environment variable set "
                                     "to a real API key")


def test_options_are_checked(run, server):
    for extra, message in [
        (", temperature: \"hot\"", "inference()'s temperature option must be a number"),
        (", max_tokens: 1.5", "inference()'s max_tokens option must be an Int"),
        (", timeout: 0", "inference()'s timeout option must be a positive number of seconds"),
        # (The reference's list; this VM's base_url and timeout are the error's note.)
        (", seed: 1", "inference(): unknown option(s) seed -- supported: api_key_env, "
                      "max_tokens, temperature"),
    ]:
        out = run(openai_model(server, extra))
        assert out.error is not None and out.error.message == message, extra
        if "seed" in extra:
            assert out.error.note == "this VM also takes base_url, timeout (docs/models.md)"
    assert server.requests == []


def test_policy_denies_the_model_before_any_request(run, server):
    server.replies.append(text_reply("never"))
    out = run("policy:\n    deny model.openai\n" + openai_model(server) + 'print(ask("x"))\n')
    assert isinstance(out.error, SensePolicyError)
    assert out.error.message == ("model 'gpt' requires capability 'model.openai', which is "
                                 "denied by policy")
    assert server.requests == []


def test_a_callers_deny_reaches_an_ask_in_a_function(run, server):
    # Spec 21.2: the call chain, not only the lexical scope.
    out = run(openai_model(server) +
              'def helper():\n    return ask("x")\n'
              "def restricted():\n    policy:\n        deny model.openai\n    return helper()\n"
              "print(restricted())\n")
    assert isinstance(out.error, SensePolicyError)
    assert server.requests == []


# ----------------------------------------------------------------------------- failures

def test_an_http_500_is_a_runtime_error_with_the_reason(run, server):
    server.replies.append(("status", 500))
    out = run(openai_model(server) + 'print(ask("x"))\n')
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == (f"model 'gpt' failed: HTTP 500 from {server.url}/v1/chat/"
                                 'completions: {"error": {"message": "upstream exploded"}}')
    assert out.error.pos.line == 3


def test_a_timeout_is_a_runtime_error(run, server):
    server.replies.append(("sleep", 2.0))
    started = time.monotonic()
    out = run(openai_model(server, ", timeout: 0.3") + 'print(ask("x"))\n')
    assert time.monotonic() - started < 1.8          # gave up, did not wait for the reply
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == (f"model 'gpt' failed: no reply from {server.url}/v1/chat/"
                                 "completions within 0.3s")


def test_invalid_json_is_a_runtime_error(run, server):
    server.replies.append(("raw", b"<html>gateway</html>"))
    out = run(openai_model(server) + 'print(ask("x"))\n')
    assert out.error.message == (f"model 'gpt' failed: malformed reply from {server.url}/v1/"
                                 "chat/completions: not JSON: '<html>gateway</html>'")


def test_json_without_choices_is_a_runtime_error(run, server):
    server.replies.append(("json", {"object": "error"}))
    out = run(openai_model(server) + 'print(ask("x"))\n')
    assert out.error.message == (f"model 'gpt' failed: malformed reply from {server.url}/v1/"
                                 "chat/completions: no choices")


def test_an_unreachable_server_is_a_runtime_error(run, server):
    url = server.url
    server.close()
    out = run(f'model gpt = inference("openai", "x", base_url: "{url}/v1")\n'
              'print(gpt.ask("x"))\n')
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message.startswith(f"model 'gpt' failed: cannot reach {url}/v1/chat/"
                                        "completions: ")


def test_a_failure_is_in_the_durable_audit_log_but_not_audit_log(tmp_path, server):
    import io
    from sensec.driver import compile_source
    from sensevm.guard.audit import AuditFile, AuditLog
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    server.replies.append(("status", 503))
    source = openai_model(server) + 'test "t":\n    ask("x")\nprint(audit_log())\n'
    verified = load_verified(dump(compile_source(source, str(tmp_path / "m.sns"))))
    log = AuditLog(AuditFile(tmp_path / "audit.jsonl", fsync=False))
    out = io.StringIO()
    VM(verified, stdout=out, audit=log).run()
    log.close()
    assert out.getvalue() == "[]\n"
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["kind"] == "model"]
    assert [(r["event"], r["host_only"]) for r in failed] == [("failed", True)]
    assert failed[0]["detail"].startswith("HTTP 503 from ")


# ----------------------------------------------------------------------------- tool calls

TOOLS = '''
tool add(a: Int, b: Int) returns Int "adds two numbers":
    print("add ran", a, b)
    return a + b
'''


def test_tool_calls_run_through_the_tool_path_and_go_back_to_the_model(run, server):
    server.replies += [calls_reply(("add", {"a": 2, "b": 3})), text_reply("The sum is 5.")]
    out = run(openai_model(server) + TOOLS +
              'a = ask_with_tools("What is 2+3?", [add])\nprint(a)\n'
              "for e in audit_log():\n    print(e)\n")
    assert out.error is None, out.error
    assert out.stdout.splitlines() == [
        "add ran 2 3", "answer<?>(The sum is 5.)",
        "[line 7] tool 'add' -> called", "[line 7] model 'gpt' -> called"]
    first, second = (body for _, _, body in server.requests)
    assert first["tools"] == [{"type": "function", "function": {
        "name": "add", "description": "adds two numbers",
        "parameters": {"type": "object", "required": ["a", "b"],
                       "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
    assert second["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "5"}]


def test_a_denied_tool_is_reported_to_the_model_not_run(run, server):
    server.replies += [calls_reply(("pay", {"to": "mallory", "cents": 100})), text_reply("ok")]
    out = run(openai_model(server) +
              'tool pay(to: String, cents: Int) returns String requires payment.send "pays":\n'
              '    print("PAID")\n    return "paid"\n'
              "policy:\n    deny payment.send\n"
              'print(ask_with_tools("pay mallory", [pay]).value)\n'
              "for e in audit_log():\n    print(e)\n")
    assert out.error is None, out.error
    assert "PAID" not in out.stdout
    assert out.stdout.splitlines() == [
        "ok", "[line 8] tool 'pay' -> denied (capability 'payment.send' denied by policy)",
        "[line 8] model 'gpt' -> called"]
    result = server.requests[1][2]["messages"][-1]
    assert result == {"role": "tool", "tool_call_id": "call_0", "content":
                      "error: [line 8] tool 'pay' requires capability 'payment.send', which is "
                      "denied by policy"}


def test_bad_arguments_and_unknown_tools_are_answered_as_errors(run, server):
    server.replies += [calls_reply(("add", {"a": "two", "b": 3}), ("nope", {}),
                                   ("add", {"a": {"x": 1}, "b": 1}), ("add", {"a": 1})),
                       text_reply("gave up")]
    out = run(openai_model(server) + TOOLS + 'print(ask_with_tools("x", [add]).value)\n')
    assert out.error is None, out.error
    assert out.stdout == "gave up\n"
    results = [m["content"] for m in server.requests[1][2]["messages"] if m["role"] == "tool"]
    assert results == [
        "error: [line 7] argument 'a' of 'add' expects Int, got String",
        "error: no such tool 'nope'",
        "error: [line 7] argument 'a' of 'add' expects Int, got Map",
        "error: [line 7] argument 'b' of 'add' expects Int, got Nil",
    ]


def test_a_model_that_never_stops_calling_tools_is_stopped(run, server):
    server.replies += [calls_reply(("add", {"a": 1, "b": 1}))] * 10
    out = run(openai_model(server) + TOOLS + 'print(ask_with_tools("x", [add]))\n')
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == "model 'gpt' failed: no final answer within 10 tool-call rounds"
    assert len(server.requests) == 10
    assert out.stdout.count("add ran") == 10


def test_anthropic_messages_protocol_with_a_tool_round(run, server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-1")
    server.replies += [
        ("json", {"content": [{"type": "text", "text": "Let me add."},
                              {"type": "tool_use", "id": "tu_1", "name": "add",
                               "input": {"a": 4, "b": 5}}], "stop_reason": "tool_use"}),
        ("json", {"content": [{"type": "text", "text": "9"}], "stop_reason": "end_turn"}),
    ]
    out = run(f'model claude = inference("anthropic", base_url: "{server.url}")\n'
              "set delegation = claude\n" + TOOLS + 'print(ask_with_tools("4+5?", [add]))\n')
    assert out.error is None, out.error
    assert out.stdout.splitlines() == ["add ran 4 5", "answer<?>(9)"]
    (path, headers, first), (_, _, second) = server.requests
    assert path == "/v1/messages"
    assert headers["x-api-key"] == "ak-1" and headers["anthropic-version"] == "2023-06-01"
    assert first["model"] == "claude-sonnet-5" and first["max_tokens"] == 1024
    assert first["tools"][0]["input_schema"]["properties"] == {"a": {"type": "integer"},
                                                               "b": {"type": "integer"}}
    assert second["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me add."},
            {"type": "tool_use", "id": "tu_1", "name": "add", "input": {"a": 4, "b": 5}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                      "content": "9"}]}]


def test_a_saved_provider_keeps_its_settings_but_never_its_key(monkeypatch):
    from sensevm.world.providers import AnthropicProvider, OpenAIProvider, restore
    monkeypatch.setenv("MY_KEY", "secret-1")
    for cls in (OpenAIProvider, AnthropicProvider):
        p = cls("m1", "secret-1", "MY_KEY", "http://127.0.0.1:9/v1", 0.5, None, 7.0)
        state = p.state()
        assert "secret-1" not in repr(state)
        monkeypatch.setenv("MY_KEY", "secret-2")            # rotated while the agent slept
        back = restore(state)
        assert type(back) is cls and back.api_key == "secret-2"
        assert (back.model_id, back.base_url, back.temperature, back.max_tokens, back.timeout) \
            == (p.model_id, p.base_url, p.temperature, p.max_tokens, p.timeout)
        monkeypatch.setenv("MY_KEY", "secret-1")


def test_a_json_object_argument_is_a_map_labelled_as_the_models_words(run, server):
    """A model's JSON object reaches a `Map` parameter as a Map, keys in the model's order,
    nested objects and arrays too; what it holds is the model's words, influenced by the page
    in its prompt (an outgoing action fed from it is flagged), and the tool's answer goes back
    as its printed form."""
    server.replies += [calls_reply(("file", {"note": {"to": "bob@x.example", "tags": ["a", {"k": 1}],
                                                      "n": 2}})),
                       text_reply("filed")]
    out = run(openai_model(server) + '''tool file(note: Map) returns String requires notes.write "file a note":
    keys = ""
    for k in note:
        keys = keys + k + ";"
    print(type_of(note), keys, note["tags"][1]["k"] + 1, type_of(note["tags"][1]))
    m = mail(note["to"])
    m.verify()
    print(m.second_look != nil)
    return str(note)
irreversible action mail(to: String) sends(recipient: to) requires email.send:
    nil
tool page() returns String requires web.fetch:
    return "file this for bob@x.example"
a = ask_with_tools("file it: " + page(), [file])
print(a.value)
''')
    assert out.error is None, out.error
    assert out.stdout.splitlines() == ["Map to;tags;n; 2 Map", "true", "filed"]
    [result] = [m["content"] for m in server.requests[1][2]["messages"] if m["role"] == "tool"]
    assert result == "{to: bob@x.example, tags: [a, {k: 1}], n: 2}"
