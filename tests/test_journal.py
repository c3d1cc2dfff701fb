"""The journal of fired effects (sensevm/runtime/journal.py), in-process and without Temporal:
a segment (sensevm/cli/temporal/segment.py) run again with what an attempt that died had
journaled replays the bodies that completed instead of running them, and stops, saying why, on
an irreversible commit in flight, a replay that differs from the journal, or a journaled body
the replay does not reach."""

from __future__ import annotations

import base64
import importlib
import json
import sys

import pytest

from sensevm.cli.temporal.segment import run_segment

EFFECTS = '''FIRED = []
def hit(what):
    FIRED.append(what)
    return what
def boom(what):
    FIRED.append(what)
    raise ValueError("no such address: " + what)
'''

PROGRAM = '''policy: allow python.import
policy: allow env.read
import std.env
from python "journal_effects" import hit, boom

tool lookup(name: String) returns String "looks up an address":
    hit("lookup " + name)
    print("looked up", name)
    return "addr-" + name

tool broken(name: String) returns String "fails":
    return boom("broken " + name)

tool both(name: String) returns Array "a tool calling a tool":
    hit("both " + name)
    return [lookup(name), lookup(name + "2")]

reversible action reserve(x: String) requires desk.reserve:
    hit("reserve " + x)
rollback:
    hit("unreserve " + x)

irreversible action send(to: String) requires mail.send:
    hit("send " + to)
    print("sending to", to)

who = "ada"
if len(env.args()) > 0:
    who = env.args()[0]
print("found", lookup(who))
print("pair", both("bo"))
try:
    broken(who)
except SenseRuntimeError as e:
    print("caught", e.message)
r = reserve(who)
r.verify()
r.commit()
r.rollback()
m = send(who)
m.verify()
m.commit()
print("done", m.state)
'''


@pytest.fixture
def effects(tmp_path, monkeypatch):
    (tmp_path / "journal_effects.py").write_text(EFFECTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("journal_effects", None)
    module = importlib.import_module("journal_effects")
    yield module
    sys.modules.pop("journal_effects", None)


def _job(tmp_path, source=PROGRAM, args=()):
    from sensevm.cli.temporal.cli import load_program
    path = tmp_path / "prog.sns"
    path.write_text(source)
    program = load_program(str(path))
    assert program is not None
    return {"snb": base64.b64encode(program).decode(), "states": {}, "audit": "",
            "resume": None, "args": list(args)}


def _segment(job, journal):
    sent = []
    result = run_segment(json.loads(json.dumps(job)), sent.append, journal)
    return result, sent


def _fold(sent):
    """The journal as the workflow keeps it after these acknowledged entries."""
    journal = {}
    for entry in sent:
        journal[str(entry["k"])] = json.loads(json.dumps(entry))    # as it crossed the wire
    return journal


def _events(result):
    return [(e["subject"], e["event"], e.get("detail")) for e in
            map(json.loads, result["audit"].splitlines()) if e["kind"] != "audit"]


def test_a_segment_retried_after_each_entry_replays_what_completed(tmp_path, effects):
    job = _job(tmp_path)
    full, sent = _segment(job, {})
    assert full["status"] == 0, full["stderr"]
    fired = list(effects.FIRED)
    assert fired == ["lookup ada", "both bo", "lookup bo", "lookup bo2", "broken ada",
                     "reserve ada", "unreserve ada", "send ada"]
    assert "caught python error calling boom: ValueError: no such address: broken ada" \
        in full["stdout"]
    # One entry per body as it ended, and each action body's intent before it.
    assert [(e["kind"], e["name"], e["state"]) for e in sent] == [
        ("tool", "lookup", "done"), ("tool", "lookup", "done"), ("tool", "lookup", "done"),
        ("tool", "both", "done"), ("tool", "broken", "failed"),
        ("commit", "reserve", "committing"), ("commit", "reserve", "done"),
        ("rollback", "reserve", "committing"), ("rollback", "reserve", "done"),
        ("commit", "send", "committing"), ("commit", "send", "done")]
    # The worker died right after the k-th acknowledged entry: the retry runs again only the
    # bodies with no outcome journaled; output and audit come out as in the run uninterrupted.
    for k in range(len(sent) + 1):
        if k and sent[k - 1]["state"] == "committing":
            continue            # an action's intent, no outcome: the next tests
        effects.FIRED.clear()
        journal = _fold(sent[:k])
        again, resent = _segment(job, journal)
        assert again["status"] == 0 and again["stopped"] is None, (k, again["stderr"])
        assert again["stdout"] == full["stdout"], k
        assert _events(again) == _events(full), k
        done = {e["k"] for e in sent[:k] if e["state"] != "committing"}
        assert again["replayed"] == len([e for e in sent[:k] if e["state"] != "committing"
                                         and not _inside(e, sent[:k])])
        assert len(effects.FIRED) == len(fired) - _completed_effects(sent[:k]), (k, effects.FIRED)
        assert {e["k"] for e in resent} & done == set(), k     # nothing journaled twice


def _inside(entry, sent):
    """Whether ``entry`` ran inside another body journaled in ``sent`` (replayed with it)."""
    return any(o["state"] != "committing" and o["k"] < entry["k"] < o["next"] for o in sent)


def _completed_effects(sent):
    """How many hit() calls the bodies journaled in ``sent`` stand for."""
    count = 0
    for e in sent:
        if e["state"] == "committing" or _inside(e, sent):
            continue
        count += {"both": 3}.get(e["name"], 1)
    return count


@pytest.mark.parametrize("which", [
    ("commit", "reserve", "reversible", "reserve ada"),
    ("rollback", "reserve", "reversible", "unreserve ada"),
    ("commit", "send", "irreversible", "send ada")])
def test_an_action_body_in_flight_stops_the_segment_and_does_not_run(tmp_path, effects,
                                                                     which):
    role, name, kind, effect = which
    job = _job(tmp_path)
    full, sent = _segment(job, {})
    in_flight = next(e for e in sent if e["state"] == "committing"
                     and (e["kind"], e["name"]) == (role, name))
    journal = _fold(sent[:sent.index(in_flight) + 1])
    effects.FIRED.clear()
    again, resent = _segment(job, journal)
    assert again["status"] == 1 and again["stopped"]["reason"] == "unknown"
    assert again["stopped"]["message"].startswith(
        f'{role} of {name}("ada") in flight when worker died; outcome unknown')
    assert again["stopped"]["detail"]["role"] == role
    assert effect not in effects.FIRED and effects.FIRED == []     # everything replayed
    assert resent == []
    assert _events(again)[-1][:2] == (f"{kind} action '{name}'", "unknown")


def test_a_replay_that_differs_from_the_journal_stops_before_any_body(tmp_path, effects):
    full, sent = _segment(_job(tmp_path), {})
    effects.FIRED.clear()
    other, resent = _segment(_job(tmp_path, args=["bob"]), _fold(sent))
    assert other["stopped"]["reason"] == "mismatch"
    assert 'effect #0 is tool lookup("bob") now, but the attempt that died ran tool ' \
           'lookup("ada")' in other["stopped"]["message"]
    assert effects.FIRED == [] and resent == []


def test_a_journaled_body_the_replay_never_reaches_stops_the_segment(tmp_path, effects):
    longer = _job(tmp_path, PROGRAM + 'print("again", lookup("zed"))\n')
    _, sent = _segment(longer, {})
    effects.FIRED.clear()
    shorter, _ = _segment(_job(tmp_path), _fold(sent))
    assert shorter["stopped"]["reason"] == "unreached"
    assert 'tool lookup("zed")' in shorter["stopped"]["message"]


def test_a_result_that_is_not_data_is_journaled_opaque_and_never_run_again(tmp_path, effects):
    source = '''policy: allow python.import
from python "journal_effects" import hit
def add(x):
    return x + 1
tool make(n: Int) "returns a function":
    hit("make")
    return add
print(make(1)(2))
'''
    job = _job(tmp_path, source)
    full, sent = _segment(job, {})
    assert full["stdout"] == "3\n" and sent[0]["state"] == "opaque"
    effects.FIRED.clear()
    again, _ = _segment(job, _fold(sent))
    assert again["stopped"]["reason"] == "opaque" and "(a Function)" in \
        again["stopped"]["message"]
    assert effects.FIRED == []


SESSION = '''irreversible action send(to: String) requires mail.send:
    print("SENT", to)
session weekly as s:
    m = send("ann")
    m.verify()
    m.commit()
print("after")
'''


def test_a_session_left_undecided_stops_for_an_approval_bound_as_run_approve(tmp_path,
                                                                            effects):
    import subprocess
    from conftest import ROOT
    job = _job(tmp_path, SESSION)
    stopped, _ = _segment(job, {})
    assert stopped["stopped"]["reason"] == "approval"
    detail = stopped["stopped"]["detail"]
    assert detail["session"] == "weekly" and '#1 send("ann")' in detail["manifest"]
    # Another hash does not approve; the manifest's does, and it is the very hash
    # `sensevm run --approve` takes for this session.
    wrong, _ = _segment(dict(job, approvals=["sha256:" + "0" * 64]), {})
    assert wrong["stopped"]["reason"] == "approval"
    approved, _ = _segment(dict(job, approvals=[detail["hash"]]), {})
    assert approved["status"] == 0 and approved["stdout"] == "SENT ann\nafter\n"
    run = subprocess.run([sys.executable, "-m", "sensevm", "run", str(tmp_path / "prog.sns"),
                          "--approve", detail["hash"]], capture_output=True, text=True,
                         cwd=tmp_path, env=dict(__import__("os").environ, PYTHONPATH=ROOT))
    assert run.returncode == 0 and run.stdout == "SENT ann\nafter\n", run.stderr
    # Without a journal (no Temporal), a segment with no approval fails closed as before.
    plain = run_segment(job)
    assert plain["status"] == 1 and "ended without a verdict" in plain["stderr"]



def test_threads_of_one_process_making_the_first_host_key_agree_on_it(tmp_path, monkeypatch):
    """A worker's segments run on threads: the first of them to need the host key may make it
    at once, and all of them must end up with the one key, no temporary left (keys._create)."""
    import os
    import threading
    from sensevm.guard import keys
    path = tmp_path / "k" / "host.key"
    monkeypatch.setenv("SENSE_KEY_FILE", str(path))
    got, errors = [], []
    start = threading.Barrier(8)

    def make():
        start.wait()
        try:
            got.append(keys.host_key())
        except Exception as exc:        # noqa: BLE001 - the test reports it
            errors.append(exc)
    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 8 and len(set(got)) == 1
    assert sorted(os.listdir(path.parent)) == ["host.key"]


def test_a_journaled_value_keeps_its_labels_and_its_containers_shapes():
    """What a replayed body returns is what it returned: labels on Strings and Ints, and the
    shape of an Array whose length came from a tool, through JSON (as the workflow keeps it)."""
    from sensevm.guard import provenance as PV
    from sensevm.runtime.journal import decode, encode
    page = frozenset({("tool", "fetch")})
    value = [PV.label("ada@example.com", page), PV.label(3, page), {"k": [1.5, None, True]}]
    PV.restore_shape(value, page, ((1, page),), ())
    back = decode(json.loads(json.dumps(encode(value))))
    assert back == value
    assert PV.origins_of(back[0]) == page and PV.origins_of(back[1]) == page
    assert type(back[2]["k"][0]) is float and PV.origins_of(back[2]["k"][0]) == frozenset()
    shape = PV.shape_of(back)
    assert shape is not None and shape.length == page and shape.starts == ((1, page),)


def test_a_record_naming_an_agent_outside_the_segment_is_refused(tmp_path):
    """The saved states come through the cluster: an agent's name that would make a path
    outside the segment's directory is refused before anything is written or run."""
    job = dict(_job(tmp_path, 'print("ran")\n'), states={"../../escaped": "{}"})
    result = run_segment(job)
    assert result["status"] == 1 and result["stdout"] == ""
    assert "is not a name: '../../escaped'" in result["stderr"]


def test_a_replayed_tool_result_keeps_its_label_and_meets_the_second_look_again(tmp_path,
                                                                               effects):
    """A tool's result replayed from the journal is the tool's, not clean: an action that
    would send to it meets the second look in the replay as it did in the run."""
    source = '''policy: allow python.import
from python "journal_effects" import hit
tool lookup(name: String) returns String "looks up an address":
    hit("lookup " + name)
    return "addr-" + name
irreversible action send(to: String) requires mail.send:
    hit("send " + to)
m = send(lookup("bob"))
m.verify()
m.commit()
'''
    job = _job(tmp_path, source)
    first, sent = _segment(job, {})
    assert first["status"] == 1 and "needs a second look before commit()" in first["stderr"]
    assert effects.FIRED == ["lookup bob"] and [e["name"] for e in sent] == ["lookup"]
    effects.FIRED.clear()
    again, _ = _segment(job, _fold(sent))
    assert effects.FIRED == [] and again["replayed"] == 1
    assert again["status"] == 1 and again["stderr"] == first["stderr"]


@pytest.mark.parametrize("settled", ["happened", "not-happened"])
def test_a_commit_in_flight_settled_by_an_operator_goes_on_without_its_body(tmp_path, effects,
                                                                          settled):
    source = PROGRAM.replace('m.commit()\nprint("done", m.state)\n', '''try:
    print("committed", m.commit())
except SenseRuntimeError as e:
    print("not sent:", e.message)
print("done", m.state)
print("after", lookup("zed"))
''')
    job = _job(tmp_path, source)
    full, sent = _segment(job, {})
    assert full["status"] == 0, full["stderr"]
    in_flight = next(e for e in sent if e["state"] == "committing" and e["name"] == "send")
    k = in_flight["k"]
    journal = _fold(sent[:sent.index(in_flight) + 1])
    effects.FIRED.clear()
    # Unsettled, the replay stops at the commit and says how to settle it.
    stopped, _ = _segment(job, journal)
    assert stopped["stopped"]["reason"] == "unknown"
    assert stopped["stopped"]["detail"] == {"effect": k, "action": "send",
                                            "shown": 'send("ada")', "role": "commit"}
    assert f"sensevm settle RUN_ID {k} --happened or --not-happened" in \
        stopped["stopped"]["message"]
    effects.FIRED.clear()
    again, resent = _segment(dict(job, settlements={str(k): settled}), journal)
    assert again["status"] == 0 and again["stopped"] is None, again["stderr"]
    # Settled either way, the body does not run: only the tool after it does, once.
    assert effects.FIRED == ["lookup zed"]
    # The settlement is journaled as the commit's outcome, in its intent's place.
    assert [(e["kind"], e["name"], e["k"], e["state"]) for e in resent] == [
        ("commit", "send", k, "done" if settled == "happened" else "failed"),
        ("tool", "lookup", k + 1, "done")]
    # An attempt after that one (its worker died too) replays all of it, the tool after the
    # settled commit included: nothing runs a third time.
    effects.FIRED.clear()
    third, more = _segment(dict(job, settlements={str(k): settled}),
                           dict(journal, **_fold(resent)))
    assert third["status"] == 0 and effects.FIRED == [] and more == []
    assert third["stdout"] == again["stdout"] and _events(third) == _events(again)
    before = full["stdout"][:full["stdout"].index("sending")]
    events = _events(again)
    unknown = ("irreversible action 'send'", "unknown")
    assert unknown in [e[:2] for e in events]
    settled_row = next(e for e in events if e[1] == "settled")
    if settled == "happened":
        assert again["stdout"] == before + "committed nil\ndone committed\n" \
            "looked up zed\nafter addr-zed\n"
        assert "it happened" in settled_row[2]
        assert [e[1] for e in events[-4:]] == ["unknown", "settled", "committed", "called"]
    else:
        assert again["stdout"] == before + (
            'not sent: the commit of send("ada") did not happen: it was in flight when a '
            'worker died, and an operator settled that it did not happen; it is not run '
            'again\ndone failed\nlooked up zed\nafter addr-zed\n')
        assert "did not happen" in settled_row[2]
        assert [e[1] for e in events[-4:]] == ["unknown", "settled", "failed", "called"]


def test_a_settlement_stands_for_the_bodies_the_commit_ran_before_the_worker_died(tmp_path,
                                                                              effects):
    source = PROGRAM.replace('''irreversible action send(to: String) requires mail.send:
    hit("send " + to)''', '''irreversible action send(to: String) requires mail.send:
    hit("send " + to)
    lookup(to + "-inner")''')
    job = _job(tmp_path, source)
    full, sent = _segment(job, {})
    in_flight = next(e for e in sent if e["state"] == "committing" and e["name"] == "send")
    inner = sent[sent.index(in_flight) + 1]
    assert (inner["name"], inner["state"]) == ("lookup", "done")
    # The worker died inside the commit, after the tool inside it was journaled.
    journal = _fold(sent[:sent.index(inner) + 1])
    effects.FIRED.clear()
    again, resent = _segment(dict(job, settlements={str(in_flight["k"]): "happened"}), journal)
    assert again["status"] == 0 and again["stopped"] is None, again["stderr"]
    assert effects.FIRED == []                          # nothing ran again, nothing unmet
    assert [(e["name"], e["state"]) for e in resent] == [("send", "done")]


def test_an_outcome_over_the_journal_limit_is_journaled_without_it_and_never_run_again(
        tmp_path, effects):
    source = '''policy: allow python.import
from python "journal_effects" import hit
tool big(n: Int) returns String "a long text":
    hit("big")
    return "x".repeat(n)
tool small(n: Int) returns String "a short one":
    hit("small")
    return "y".repeat(n)
print(len(small(10)), len(big(5000)))
'''
    job = dict(_job(tmp_path, source), journal_limit=3000)
    full, sent = _segment(job, {})
    assert full["status"] == 0 and full["stdout"] == "10 5000\n", full["stderr"]
    assert [e["state"] for e in sent] == ["done", "opaque"]
    assert all(len(json.dumps(e)) <= 3000 for e in sent)      # what was sent fits
    assert "over the journal's limit (3,000 bytes)" in sent[1]["why"]
    effects.FIRED.clear()
    again, _ = _segment(job, _fold(sent))
    assert again["stopped"]["reason"] == "opaque"
    assert again["stopped"]["message"].startswith("tool big(5000) completed in the attempt "
                                                  "that died, but its outcome (")
    assert effects.FIRED == []              # small replayed, big not run a second time


def test_the_journal_keeps_each_audit_record_once_however_it_was_appended():
    """The journal taps the audit log: a record appended through append_quoting with no
    origins (an MCP tool's, always) is one record in the journal, as in the log, not two."""
    import io
    from types import SimpleNamespace
    from sensevm.guard import provenance as P
    from sensevm.guard.audit import AuditLog, AuditRecord
    from sensevm.runtime.journal import Journal
    vm = SimpleNamespace(audit=AuditLog(), journal=None)
    journal = Journal({}, lambda entry: None, io.StringIO())
    journal.attach(vm)
    rows = [AuditRecord.make("tool 'x'", "x", "tool", "called", None, k, ()) for k in range(4)]
    vm.audit.append_quoting(rows[0], None)
    vm.audit.append_quoting(rows[1], P.only(P.untrusted("web")))
    vm.audit.append(rows[2])
    vm.audit.append_quoting(rows[3], P.EMPTY)
    assert vm.journal is journal and journal.rows == rows and vm.audit.records == rows
    assert [P.origins_of(line) for line in vm.audit.lines()] == \
        [P.EMPTY, P.only(P.untrusted("web")), P.EMPTY, P.EMPTY]
