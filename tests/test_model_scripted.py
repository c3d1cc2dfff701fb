"""The scripted model provider: replayed turns, tool calls through the tool path, script errors."""

from __future__ import annotations

import json

import pytest

from sensevm.base.errors import SensePolicyError, SenseRuntimeError


@pytest.fixture
def script(tmp_path):
    def write(data, filename="script.json"):
        (tmp_path / filename).write_text(json.dumps(data), encoding="utf-8")
        return filename
    return write


def calls(*pairs):
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


HEAD = 'model bot = inference("scripted", "script.json")\nset delegation = bot\n'


def test_text_turns_answer_asks_in_order(run, script):
    script([{"text": "first", "confidence": 0.9}, {"text": "second"}])
    out = run(HEAD + 'print(ask("a"))\nprint(bot.ask("b"))\nprint(bot.name)\n'
                     "for e in audit_log():\n    print(e)\n")
    assert out.error is None, out.error
    assert out.stdout.splitlines() == [
        "answer<0.90>(first)", "answer<?>(second)", "bot",
        "[line 3] model 'bot' -> called", "[line 4] model 'bot' -> called"]


def test_the_name_comes_from_the_script_or_its_file_name(run, script):
    script([], "planner.json")
    script({"name": "helper", "turns": []}, "other.json")
    out = run('print(inference("scripted", "planner.json").name)\n'
              'print(inference("scripted", "other.json"))\n')
    assert out.error is None, out.error
    assert out.stdout == "planner\n<model helper>\n"


def test_the_script_file_name_is_relative_to_the_program(tmp_path):
    from conftest import run_program
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "s.json").write_text('{"name": "n1", "turns": [{"text": "hi"}]}')
    (tmp_path / "sub" / "main.sns").write_text(
        'm = 1\nmodel x = inference("scripted", "s.json")\nprint(x.ask("q").value)\n')
    out = run_program(str(tmp_path / "sub" / "main.sns"))
    assert out.error is None, out.error
    assert out.stdout == "hi\n"


TOOLS = '''tool lookup(name: String) returns String "finds a contact's address":
    print("lookup", name)
    return name + "@example.com"
tool send(to: String, body: String) returns Bool requires email.send "sends an email":
    print("SENT", to, body)
    return true
'''


def test_a_denied_tool_is_stopped_audited_and_told_to_the_model(run, script):
    script([calls(("lookup", {"name": "arjun"}), ("send", {"to": "x@evil.test", "body": "hi"})),
            {"text": "done: {results}"}])
    out = run(HEAD + TOOLS + "policy:\n    deny email.send\n"
              'print(ask_with_tools("email arjun", [lookup, send]).value)\n'
              "for e in audit_log():\n    print(e)\n")
    assert out.error is None, out.error
    assert "SENT" not in out.stdout
    assert out.stdout.splitlines() == [
        "lookup arjun",
        "done: arjun@example.com",
        "error: [line 11] tool 'send' requires capability 'email.send', which is denied by policy",
        "[line 11] tool 'lookup' -> called",
        "[line 11] tool 'send' -> denied (capability 'email.send' denied by policy)",
        "[line 11] model 'bot' -> called"]


def test_the_model_sees_the_tools_and_the_results(script, tmp_path):
    import io
    from sensec.driver import compile_source
    from sensevm.bytecode.snb import dump
    from sensevm.runtime.values import Scope
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    script([calls(("lookup", {"name": "ana"})), {"text": "ok"}])
    source = (HEAD + TOOLS +
              'a = ask_with_tools("find ana", [skill("contacts", "address book", [lookup])])\n')
    verified = load_verified(dump(compile_source(source, str(tmp_path / "main.sns"))))
    vm = VM(verified, stdout=io.StringIO())
    scope = Scope(vm.builtins, tag="module")
    vm.run_unit(vm.prepared, scope)
    first, second = scope.vars["bot"].provider.received
    assert first == [{"role": "user", "text": "Available skills:\n- contacts: address book\n\n"
                                              "find ana"}]
    assert second[-1] == {"role": "tool", "id": "call_1_1", "name": "lookup",
                          "text": "ana@example.com"}
    assert scope.vars["a"].value == "ok"


def test_tool_errors_return_type_errors_and_body_errors_are_text(run, script):
    script([calls(("half", {"n": 3}), ("boom", {}), ("half", {"n": "x"}), ("ghost", {})),
            {"text": "{results}"}])
    out = run(HEAD +
              'tool half(n: Int) returns Int "halves":\n    return n / 2\n'
              'tool boom() returns Int "fails":\n    return 1 / 0\n'
              'print(ask_with_tools("x", [half, boom]).value)\n')
    assert out.error is None, out.error
    assert out.stdout.splitlines() == [
        "error: [line 7] 'half' declared to return Int, got Float",
        "error: [line 6] division by zero",
        "error: [line 7] argument 'n' of 'half' expects Int, got String",
        "error: no such tool 'ghost'"]


def test_ten_rounds_of_tool_calls_without_an_answer_fail(run, script):
    script([calls(("lookup", {"name": "a"}))] * 11)
    out = run(HEAD + TOOLS + 'print(ask_with_tools("x", [lookup]))\n')
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == "model 'bot' failed: no final answer within 10 tool-call rounds"
    assert out.stdout.count("lookup a") == 10


def test_a_script_that_runs_out_fails_the_ask(run, script):
    script([{"text": "only one"}])
    out = run(HEAD + 'print(ask("a").value)\nprint(ask("b"))\n')
    assert out.stdout == "only one\n"
    assert out.error.message == "model 'bot' failed: the script 'script.json' has no more turns (1 used)"
    assert out.error.pos.line == 4


def test_ask_cannot_take_a_tool_call_turn(run, script):
    script([calls(("lookup", {"name": "a"}))])
    out = run(HEAD + 'print(ask("a"))\n')
    assert out.error.message == ("model 'bot' failed: turn 1 of 'script.json' asks for tool "
                                 "calls, but ask() offers the model no tools")


def test_policy_gates_the_scripted_model_like_a_remote_one(run, script):
    script([{"text": "never"}])
    # Denied where the model is made: the script is not even read.
    out = run("policy:\n    deny model.scripted\n" + HEAD + 'print(ask("a"))\n')
    assert isinstance(out.error, SensePolicyError)
    assert out.error.message == ('inference("scripted") requires capability \'model.scripted\', '
                                 "which is denied by policy")
    # Denied where it is asked.
    out = run(HEAD + 'def careful():\n    policy:\n        deny model.scripted\n'
                     '    return ask("a")\nprint(careful())\n')
    assert isinstance(out.error, SensePolicyError)
    assert out.error.message == ("model 'bot' requires capability 'model.scripted', which is "
                                 "denied by policy")


@pytest.mark.parametrize("content, message", [
    (None, "cannot read '{path}': No such file or directory"),
    ("{not json", "'{path}' is not valid JSON: Expecting property name enclosed in double "
                  "quotes at line 1 column 2"),
    ('{"turns": [], "extra": 1}', "'{path}': unknown key(s) extra -- expected name, turns"),
    ('{"name": 3, "turns": []}', "'{path}': 'name' must be a string"),
    ('"text"', "'{path}': expected a list of turns (or an object with 'turns')"),
    ('[1]', "'{path}': turn 1 must be an object"),
    ('[{"text": "a", "tool_calls": []}]',
     "'{path}': turn 1 must have exactly one of 'text' and 'tool_calls'"),
    ('[{"text": "a"}, {"text": 5}]', "'{path}': turn 2: 'text' must be a string"),
    ('[{"text": "a", "confidence": "high"}]', "'{path}': turn 1: 'confidence' must be a number"),
    ('[{"text": "a", "mood": 1}]', "'{path}': turn 1: unknown key(s) mood"),
    ('[{"tool_calls": []}]', "'{path}': turn 1: 'tool_calls' must be a non-empty list"),
    ('[{"tool_calls": [{"args": {}}]}]', "'{path}': turn 1: tool call 1 must be an object with "
                                         "a string 'name', and 'arguments' and 'id' optional"),
])
def test_a_bad_script_is_refused_at_inference_naming_the_file(run, tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    out = run('model m = inference("scripted", "bad.json")\n')
    assert isinstance(out.error, SenseRuntimeError)
    assert out.error.message == 'inference("scripted"): ' + message.format(path=path)
    assert not out.error.located                 # like every inference() argument error


def test_scripted_needs_a_path_and_takes_no_options(run, script):
    script([])
    out = run('model m = inference("scripted")\n')
    assert out.error.message.startswith('inference("scripted") needs the path of a JSON script')
    out = run('model m = inference("scripted", "script.json", temperature: 1)\n')
    assert out.error.message == ('inference("scripted"): unknown option(s) temperature -- '
                                 "supported: (none)")
