"""Protocol sessions in the VM: routed commits, the handle's verbs, the host's verdict, dry runs, the WAL."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT
from sensevm.base.errors import SenseApprovalError, SenseError, SenseSessionError, SenseSyntaxError

DECLS = '''reversible action archive(year: Int) requires files.archive:
    print("archiving", year)
rollback:
    print("restoring", year)
irreversible action send(to: String) requires email.send:
    print("SENT", to)
irreversible action report(to: String) requires email.send, approval:
    print("REPORTED", to)
irreversible immediate action charge(cents: Int) requires payment.send:
    print("CHARGED", cents)
def run(a):
    a.verify()
    return a.commit()
'''


def execute(source, tmp_path, *, approver=None, dry_run=False, wal=None):
    from sensec.driver import compile_source
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    verified = load_verified(dump(compile_source(DECLS + source, str(tmp_path / "main.sns"))))
    out = io.StringIO()
    vm = VM(verified, stdout=out, dry_run=dry_run)
    vm.session_approver = approver
    vm.session_log_path = wal
    try:
        vm.run()
    except SenseError as err:
        return out.getvalue(), err
    return out.getvalue(), None


def test_deferred_fire_only_at_the_confirm_in_order(tmp_path):
    out, err = execute('''session weekly as s:
    run(send("a@x.example"))
    run(archive(2025))
    run(send("b@x.example"))
    print("before confirm")
    m = s.manifest()
    print(m.entries)
    s.commit(m.hash)
    print(s.state)
''', tmp_path)
    assert err is None, err
    assert out.splitlines() == [
        "archiving 2025", "before confirm",
        "[#1 send(\"a@x.example\") requires email.send, #3 send(\"b@x.example\") requires email.send]",
        "SENT a@x.example", "SENT b@x.example", "committed"]


def test_abort_undoes_newest_first_drops_the_queue_and_immediates_stand(tmp_path):
    out, err = execute('''session weekly as s:
    a = archive(2024)
    run(a)
    d = send("a@x.example")
    run(d)
    c = charge(100)
    c.verify()
    c.approve()
    c.commit()
    b = archive(2025)
    run(b)
    s.abort()
    print(s.state, a.state, d.state, c.state, b.state)
''', tmp_path)
    assert err is None, err
    assert out.splitlines() == ["archiving 2024", "CHARGED 100", "archiving 2025",
                                "restoring 2025", "restoring 2024",
                                "aborted rolled_back dropped committed rolled_back"]


@pytest.mark.parametrize("change", [
    'run(send("late@x.example"))', "run(archive(1))", "policy:\n        deny sms.send"])
def test_a_manifest_made_stale_is_refused_and_nothing_fires(tmp_path, change):
    out, err = execute(f'''session weekly as s:
    run(send("a@x.example"))
    m = s.manifest()
    {change}
    test "stale":
        s.commit(m.hash)
    s.abort()
''', tmp_path)
    assert err is None, err
    assert "SENT" not in out


def test_stale_hash_error_and_state_errors(tmp_path):
    out, err = execute('''session weekly as s:
    run(send("a@x.example"))
    m = s.manifest()
    run(send("b@x.example"))
    s.commit(m.hash)
''', tmp_path)
    assert isinstance(err, SenseSessionError) and "does not match" in err.message
    assert "SENT" not in out
    for verbs in ("s.commit(m.hash)\n    s.commit(m.hash)", "s.abort()\n    s.commit(m.hash)",
                  "s.commit(m.hash)\n    run(send(\"x\"))"):
        out, err = execute(f'''session weekly as s:
    run(send("a@x.example"))
    m = s.manifest()
    {verbs}
''', tmp_path)
        assert isinstance(err, SenseSessionError), verbs
        assert out.count("SENT") == (1 if verbs.startswith("s.commit") else 0)


def test_a_failed_fire_is_residue_and_the_queue_goes_on(tmp_path):
    out, err = execute('''irreversible action boom(n: Int) requires email.send:
    print(1 / n)
session weekly as s:
    b = boom(0)
    run(b)
    run(send("after@x.example"))
    m = s.manifest()
    try:
        s.commit(m.hash)
    except SenseSessionError as e:
        print(e.message)
    print(b.state, s.state)
''', tmp_path)
    assert err is None, err
    # What fired stands and the run is told what did not: never a quiet "committed".
    assert out.splitlines() == [
        "SENT after@x.example",
        "session 'weekly' committed, but not all of it: 1 of 2 queued actions did not run — "
        f"#1 boom (failed: [line {2 + DECLS.count(chr(10))}] division by zero); fired: #2 send; "
        "nothing was rolled back "
        "(what fired cannot be undone, the reversible actions stand): `sensevm recover` "
        "reports the same",
        "failed incomplete"]


def test_an_incomplete_commit_left_unhandled_ends_the_run(tmp_path):
    out, err = execute('''irreversible action boom(n: Int) requires email.send:
    print(1 / n)
session weekly as s:
    run(boom(0))
    run(send("after@x.example"))
    s.commit(s.manifest().hash)
    print("not reached")
''', tmp_path)
    assert isinstance(err, SenseSessionError) and err.pos.line == 6 + DECLS.count("\n")
    assert "1 of 2 queued actions did not run" in err.message
    assert out.splitlines() == ["SENT after@x.example"]


def test_policy_is_checked_again_when_the_queue_fires(tmp_path):
    out, err = execute('''session weekly as s:
    d = send("a@x.example")
    run(d)
    policy:
        deny email.send
    m = s.manifest()
    try:
        s.commit(m.hash)
    except SenseSessionError as e:
        print(e.message.split(" — ")[1].split(";")[0])
    print(d.state)
''', tmp_path)
    assert err is None, err
    assert out.splitlines() == [
        "#1 send (failed: action 'send' requires capability 'email.send', which is denied by "
        "policy)", "denied"]


def test_the_confirm_stands_for_a_declared_approval(tmp_path):
    out, err = execute('''session weekly as s:
    run(report("boss@x.example"))
    s.commit(s.manifest().hash)
''', tmp_path)
    assert err is None, err
    assert out == "REPORTED boss@x.example\n"


def test_an_immediate_action_needs_its_own_approval(tmp_path):
    out, err = execute('''session weekly as s:
    run(charge(5))
''', tmp_path)
    assert isinstance(err, SenseApprovalError)
    assert "needs its own approval" in err.message
    assert "CHARGED" not in out


def test_an_error_leaving_the_block_aborts_it(tmp_path):
    out, err = execute('''test "inside":
    session weekly as s:
        run(archive(2025))
        d = send("a@x.example")
        run(d)
        print(1 / 0)
print("after", d.state)
''', tmp_path)
    assert isinstance(err, SenseError)          # d is not bound outside the block
    out, err = execute('''d = nil
test "inside":
    session weekly as s:
        run(archive(2025))
        d = send("a@x.example")
        run(d)
        print(1 / 0)
print("after", d.state)
''', tmp_path)
    assert err is None, err
    assert out.splitlines() == ["archiving 2025", "restoring 2025", "after dropped"]


def test_a_commit_in_a_function_called_from_the_block_is_in_the_session(tmp_path):
    out, err = execute('''def notify():
    run(send("fn@x.example"))
session weekly as s:
    notify()
    print("queued, not sent")
    s.abort()
''', tmp_path)
    assert err is None, err
    assert out == "queued, not sent\n"


def test_a_plain_session_is_only_a_scope(tmp_path):
    out, err = execute('session weekly:\n    run(send("a@x.example"))\n', tmp_path)
    assert err is None and out == "SENT a@x.example\n"


UNDECIDED = '''session weekly as s:
    run(archive(2025))
    run(send("a@x.example"))
print("after")
'''


def test_an_undecided_session_asks_the_host(tmp_path):
    shown = []

    def yes(session, manifest, text):
        shown.append(text)
        return manifest.hash
    out, err = execute(UNDECIDED, tmp_path, approver=yes)
    assert err is None, err
    assert out.splitlines() == ["archiving 2025", "SENT a@x.example", "after"]
    assert "#2 send(\"a@x.example\") requires email.send" in shown[0]


@pytest.mark.parametrize("approver", [None, lambda s, m, t: None,
                                      lambda s, m, t: "sha256:" + "0" * 64])
def test_without_the_hosts_yes_it_aborts_and_the_run_fails(tmp_path, approver):
    out, err = execute(UNDECIDED, tmp_path, approver=approver)
    assert isinstance(err, SenseSessionError)
    assert out.splitlines() == ["archiving 2025", "restoring 2025"]


def test_a_dry_run_shows_the_manifest_a_run_will_ask_for(tmp_path):
    asked = []
    out, err = execute(UNDECIDED, tmp_path, dry_run=True)
    assert err is None, err
    assert "SENT" not in out and "archiving" not in out
    dry_hash = [line.split()[1] for line in out.splitlines() if line.strip().startswith("hash ")]
    execute(UNDECIDED, tmp_path, approver=lambda s, m, t: asked.append(m.hash) or m.hash)
    assert dry_hash == asked


def test_jumps_cannot_leave_a_session(tmp_path):
    from sensec.driver import compile_source
    for stmt in ("return 1", "break", "continue"):
        source = ("def f():\n    for i in range(2):\n        session s as h:\n"
                  "            " + stmt + "\n")
        with pytest.raises(SenseSyntaxError, match="cannot leave session 's'"):
            compile_source(source, str(tmp_path / "m.sns"))


def test_the_run_writes_ahead_and_recover_agrees(tmp_path):
    from sensevm.guard.wal import recover, scan
    wal = str(tmp_path / "s.wal")
    out, err = execute('''session weekly as s:
    run(archive(1))
    run(send("a@x.example"))
    s.commit(s.manifest().hash)
''', tmp_path, wal=wal)
    assert err is None, err
    kinds = [r["rec"] for r in scan(wal).records]
    # Every body is written ahead: the reversible one's "begin", the queued one's "attempt".
    assert kinds == ["header", "begin", "witnessed", "queued", "approved", "attempt", "flushed",
                     "discharge", "complete"]
    (v,) = recover(wal)
    assert v.verdict == "committed" and v.clean


def test_sensevm_run_approve_and_recover_from_the_command_line(tmp_path):
    (tmp_path / "p.sns").write_text(DECLS + UNDECIDED)
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")

    def sensevm(*args):
        return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
    refused = sensevm("run", "p.sns")
    assert refused.returncode == 1 and "SENT" not in refused.stdout
    assert "ended without a verdict and was aborted" in refused.stderr
    dry = sensevm("run", "--dry-run", "p.sns")
    digest = next(line.split()[1] for line in dry.stdout.splitlines()
                  if line.strip().startswith("hash "))
    done = sensevm("run", "p.sns", "--approve", digest)
    assert done.returncode == 0, done.stderr
    assert "SENT a@x.example" in done.stdout
    recovered = sensevm("recover", ".sense/sessions.wal")
    assert recovered.returncode == 0
    assert recovered.stdout.count("session weekly") == 2
    assert "committed" in recovered.stdout and "rolled back" in recovered.stdout


# ----------------------------------------------------------------------------- the property

step = st.sampled_from(["r", "d", "i", "m"])


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=8), st.sampled_from(["commit", "abort", "host_yes", "host_no",
                                                     "error"]))
def test_only_what_the_confirmed_manifest_listed_fires(tmp_path_factory, steps, verdict):
    tmp = tmp_path_factory.mktemp("prop")
    lines = ['d_log = []', 'session s1 as s:']
    for k, kind in enumerate(steps):
        if kind == "r":
            lines.append(f"    run(archive({k}))")
        elif kind == "d":
            lines.append(f'    run(send("d{k}"))')
        elif kind == "i":
            lines += [f"    c{k} = charge({k})", f"    c{k}.verify()", f"    c{k}.approve()",
                      f"    c{k}.commit()"]
        else:
            lines.append("    shown = s.manifest()")
    lines.append("    final = s.manifest()")
    lines.append("    print(final.entries)")
    if verdict == "commit":
        lines.append("    s.commit(final.hash)")
    elif verdict == "abort":
        lines.append("    s.abort()")
    elif verdict == "error":
        lines.append("    print(1 / 0)")
    approver = {"host_yes": lambda s, m, t: m.hash}.get(verdict)
    out, err = execute("\n".join(lines) + "\n", tmp, approver=approver)
    listed = [k for k, kind in enumerate(steps) if kind == "d"]
    sent = [int(line.split()[1][1:]) for line in out.splitlines() if line.startswith("SENT")]
    if verdict in ("commit", "host_yes") or not listed and verdict == "host_no":
        assert sent == listed
        assert err is None, err
    else:
        assert sent == []                      # nothing fires after an abort or an error
        restored = [line for line in out.splitlines() if line.startswith("restoring")]
        assert len(restored) == steps.count("r")
    assert out.count("CHARGED") == steps.count("i")   # immediates stand either way


class FakeTerminal:
    """A stdin that says it is a terminal and answers once."""

    def __init__(self, answer):
        self.answer = answer
        self.asked = 0

    def isatty(self):
        return True

    def readline(self):
        self.asked += 1
        return self.answer


@pytest.mark.parametrize("answer, sent", [("yes\n", True), ("no\n", False), ("", False)])
def test_a_terminal_is_shown_the_manifest_and_asked_once(tmp_path, answer, sent):
    from sensevm.cli.running import run_file
    (tmp_path / "p.sns").write_text(DECLS + UNDECIDED)
    out, err, tty = io.StringIO(), io.StringIO(), FakeTerminal(answer)
    code = run_file(str(tmp_path / "p.sns"), stdout=out, stderr=err, stdin=tty,
                    session_log=str(tmp_path / "s.wal"))
    assert tty.asked == 1
    assert "#2 send(\"a@x.example\") requires email.send" in err.getvalue()
    assert "Type yes (or the whole hash) to approve" in err.getvalue()
    if not sent:
        assert "declined" in err.getvalue() and "without a verdict" not in err.getvalue()
    assert ("SENT a@x.example" in out.getvalue()) is sent
    assert code == (0 if sent else 1)


@pytest.mark.parametrize("point, verdict, unknown, owed", [
    ("after-approved", "committed", [], ["#2 send(\"a@x.example\")", "#3 send(\"b@x.example\")"]),
    ("after-attempt:3", "committed", ["#3 send(\"b@x.example\")"], []),
])
def test_a_run_killed_mid_flush_is_recovered_from_its_log(tmp_path, point, verdict, unknown,
                                                          owed):
    from sensevm.guard.wal import recover
    (tmp_path / "p.sns").write_text(DECLS + '''session weekly as s:
    run(archive(2025))
    run(send("a@x.example"))
    run(send("b@x.example"))
    s.commit(s.manifest().hash)
''')
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_CRASH_AT=point)
    proc = subprocess.run([sys.executable, "-m", "sensevm", "run", "p.sns"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 137, proc.stderr
    wal = str(tmp_path / ".sense" / "sessions.wal")
    (v,) = recover(wal)
    assert (v.verdict, v.unknown, v.owed) == (verdict, unknown, owed)
    assert ("SENT a@x.example" in proc.stdout) == (point == "after-attempt:3")
    before = open(wal, "rb").read()
    recover(wal)
    assert open(wal, "rb").read() == before


# ----------------------------------------------------------------------------- who confirms

def test_a_queued_action_fires_under_the_frame_that_confirms_it(tmp_path):
    """s.commit(hash) called from a function that denies the capability fires nothing: the
    queue fires with the confirming call as its caller, so that function's policy is on the
    chain, as for a direct .commit() written there (issue 20, item 3)."""
    out, err = execute('''def locked_down(s, h):
    policy:
        deny email.send
    s.commit(h)
session weekly as s:
    run(send("a@x.example"))
    test "confirmed from a denying function":
        locked_down(s, s.manifest().hash)
    print("state", s.state)
''', tmp_path)
    # The fire was refused by policy: the entry is residue, and the session is over,
    # incomplete (the test block reports the error and goes on).
    assert err is None, err
    assert out.splitlines() == ["state incomplete"]
    out2, err2 = execute('''def open_up(s, h):
    s.commit(h)
session weekly as s:
    d = send("a@x.example")
    run(d)
    open_up(s, s.manifest().hash)
    print(d.state)
''', tmp_path)
    assert err2 is None and out2.splitlines() == ["SENT a@x.example", "committed"]


def test_the_fire_is_refused_with_the_denial_recorded(tmp_path):
    from sensec.driver import compile_source
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.runtime.vm import VM
    verified = load_verified(dump(compile_source(DECLS + '''def locked_down(s, h):
    policy:
        deny email.send
    s.commit(h)
session weekly as s:
    d = send("a@x.example")
    run(d)
    try:
        locked_down(s, s.manifest().hash)
    except SenseSessionError:
        print(d.state, s.state)
''', str(tmp_path / "main.sns"))))
    out = io.StringIO()
    vm = VM(verified, stdout=out)
    try:
        vm.run()
    except SenseError:
        pass
    assert "SENT" not in out.getvalue()
    denied = [r for r in vm.audit.records if r.event == "denied"]
    assert [(r.name, r.detail) for r in denied] == [
        ("send", "capability 'email.send' denied by policy")]
    assert "SENT" not in out.getvalue() and "denied" in out.getvalue()


def test_an_abort_from_a_denying_function_replays_no_rollback(tmp_path):
    """s.abort() from a function whose policy denies the capability: the rollback is refused
    there, exactly as a direct .rollback() written in that function would be."""
    out, err = execute('''def locked_down(s):
    policy:
        deny files.archive
    s.abort()
session weekly as s:
    a = archive(2025)
    run(a)
    locked_down(s)
    print(s.state, a.state)
''', tmp_path)
    assert err is None, err
    assert out.splitlines() == ["archiving 2025", "aborted committed"]
    out, err = execute('''def plain(s):
    s.abort()
session weekly as s:
    a = archive(2025)
    run(a)
    plain(s)
    print(s.state, a.state)
''', tmp_path)
    assert err is None and out.splitlines() == ["archiving 2025", "restoring 2025",
                                                "aborted rolled_back"]


def test_a_dry_run_that_confirms_in_the_program_fires_nothing(tmp_path):
    out, err = execute('''session weekly as s:
    d = send("a@x.example")
    run(d)
    s.commit(s.manifest().hash)
    print(s.state, d.state)
''', tmp_path, dry_run=True)
    assert err is None, err
    lines = out.splitlines()
    assert "committed committed" in lines and "SENT a@x.example" not in lines
    assert "irreversible action 'send' -> committed (dry run — body not executed)" in out


# ----------------------------------------------------------------------------- crash windows

CRASH_PROGRAM = '''session weekly as s:
    run(archive(2025))
    c = charge(100)
    c.verify()
    c.approve()
    c.commit()
    run(send("a@x.example"))
    s.commit(s.manifest().hash)
'''


def _killed_at(tmp_path, point):
    (tmp_path / "p.sns").write_text(DECLS + CRASH_PROGRAM)
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", SENSE_CRASH_AT=point)
    proc = subprocess.run([sys.executable, "-m", "sensevm", "run", "p.sns"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    return proc


@pytest.mark.parametrize("point, printed, unknown, owed, rollbacks, clean", [
    # the reversible (witnessed) body: before it runs, after it ran but before the record
    ("after-begin:1", [], ["#1 archive(2025): reversible body interrupted, rollback may be owed"],
     [], [], False),
    ("before-witnessed:1", ["archiving 2025"],
     ["#1 archive(2025): reversible body interrupted, rollback may be owed"], [], [], False),
    # the immediate body: likewise; the witnessed one before it is owed its rollback
    ("after-begin:2", ["archiving 2025"], ["#2 charge(100): immediate body interrupted"], [],
     ["#1 archive(2025)"], False),
    ("before-fired:2", ["archiving 2025", "CHARGED 100"],
     ["#2 charge(100): immediate body interrupted"], [], ["#1 archive(2025)"], False),
    # the deferred one: queued, approved, attempted, flushed
    ("after-queued:3", ["archiving 2025", "CHARGED 100"], [], [], ["#1 archive(2025)"], False),
    ("after-approved", ["archiving 2025", "CHARGED 100"], [], ["#3 send(\"a@x.example\")"], [],
     False),
    ("after-attempt:3", ["archiving 2025", "CHARGED 100"], ["#3 send(\"a@x.example\")"], [], [],
     False),
    ("after-flushed:3", ["archiving 2025", "CHARGED 100", "SENT a@x.example"], [], [], [], True),
    ("before-discharge", ["archiving 2025", "CHARGED 100", "SENT a@x.example"], [], [], [],
     True),
])
def test_a_crash_in_every_window_of_every_class_gets_an_honest_verdict(
        tmp_path, point, printed, unknown, owed, rollbacks, clean):
    """Killed at each step around every body (reversible, immediate, deferred): `sensevm
    recover` never calls an effect that may have happened "rolled back, clean", and exits
    non-zero whenever something needs a person (issue 20, item 4)."""
    proc = _killed_at(tmp_path, point)
    assert proc.returncode == 137, proc.stderr
    assert proc.stdout.splitlines() == printed
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    wal = str(tmp_path / ".sense" / "sessions.wal")
    rec = subprocess.run([sys.executable, "-m", "sensevm", "recover", wal, "--json"],
                         env=env, capture_output=True, text=True)
    import json
    (v,) = json.loads(rec.stdout)
    assert (v["unknown"], v["owed"], v["rollbacks_owed"], v["clean"]) == (unknown, owed,
                                                                          rollbacks, clean)
    assert rec.returncode == (0 if clean else 3)
    again = subprocess.run([sys.executable, "-m", "sensevm", "recover", wal, "--json"],
                           env=env, capture_output=True, text=True)
    assert json.loads(again.stdout) == [v]


def test_a_failed_body_in_a_session_is_recorded_as_ended(tmp_path):
    from sensevm.guard.wal import recover, scan
    wal = str(tmp_path / "s.wal")
    out, err = execute('''reversible action boom(k: Int) requires files.archive:
    print(1 / 0)
rollback:
    print("never")
session weekly as s:
    test "a failing reversible body":
        run(boom(1))
    run(archive(1))
    s.commit(s.manifest().hash)
''', tmp_path, wal=wal)
    assert err is None, err
    kinds = [(r["rec"], r.get("n")) for r in scan(wal).records]
    assert kinds[:5] == [("header", None), ("begin", 1), ("failed", 1), ("begin", 2),
                         ("witnessed", 2)]
    (v,) = recover(wal)
    assert v.clean and v.unknown == []
