"""A saved agent's state is untrusted input: every tampering issue 20 reproduced is refused, by
the MAC for anyone, and by the named structural check for a holder of the key (persist.py)."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT
from saved_state import read_state, write_state

PROGRAM = '''irreversible action pay(to: String, amount: Int) requires payment.send:
    print("PAID " + str(amount) + " to " + to)
tool fetch() returns String requires web.fetch:
    return "mallory@evil.example"
irreversible action send(to: String) requires email.send:
    print("SENT " + to)
policy:
    deny python.import
def never():
    import python "os"
    return os
agent clerk:
    policy:
        deny payment.send
    m = pay("landlord@example.com", 1200)
    who = fetch()
    answer = ask_human("pay the rent?")
    print("heard", answer)
    for k in [1]:
        test "the payment":
            m.verify()
            m.commit()
    s = send(who)
    s.verify()
    test "the mail":
        s.commit()
    print("states", m.state, s.state)
start(clerk)
'''

# What the untouched state prints when resumed with "no": the payment is denied, the mail's
# recipient came from the page, so the second look holds it.
UNTOUCHED = ["heard no", "states denied verified"]


def sensevm(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A state directory holding the paused clerk (made once; each test copies it)."""
    base = tmp_path_factory.mktemp("saved")
    (base / "clerk.sns").write_text(PROGRAM)
    proc = sensevm("run", "clerk.sns", "--state-dir", "state", cwd=base)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    return base / "state"


@pytest.fixture
def state_dir(saved, tmp_path):
    target = tmp_path / "state"
    shutil.copytree(saved, target)
    return target


def resume(directory, answer="no"):
    """Resume in this process, as `sensevm resume DIR clerk ANSWER`: (status, stdout, stderr)."""
    from sensevm.cli.commands import resume_agent
    out, err = io.StringIO(), io.StringIO()
    code = resume_agent(str(directory), "clerk", answer, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_untouched_state_resumes(state_dir):
    code, out, err = resume(state_dir)
    assert (code, out.splitlines()) == (0, UNTOUCHED), err


# ----------------------------------------------------------------------------- the attacks

def _objects(state, kind):
    return [o for o in state["objects"] if o["type"] == kind]


def _frame(state):
    (agent,) = [o for o in state["objects"] if o["type"] == "agent"]
    return agent["frames"][0]


def run_body_directly(state, vm_program):
    """Point the agent's frame at the payment's body, at its first instruction."""
    body = vm_program.actions[0].body
    frame = _frame(state)
    frame["code"], frame["ip"], frame["stack"] = body, 0, []


def rebind_print_to_os(state, _):
    state["objects"].append({"type": "python", "module": "os", "attrs": [], "function": False})
    for o in _objects(state, "scope"):
        parent = o["parent"]
        if isinstance(parent, dict) and "builtins" in parent:
            parent["vars"]["print"] = {"ref": len(state["objects"]) - 1}


def deny_to_allow(state, _):
    for o in _objects(state, "scope"):
        if o["policy"] and o["policy"].get("payment.send") == "deny":
            o["policy"]["payment.send"] = "allow"


def wash_the_page(state, _):
    for o in state["objects"]:
        for k, v in list(o.get("vars", {}).items()):
            if isinstance(v, dict) and "lstr" in v:
                o["vars"][k] = v["lstr"]


def own_parent(state, _):
    for i, o in enumerate(state["objects"]):
        if o["type"] == "scope" and o["tag"] == "module":
            o["parent"] = {"ref": i}


def negative_ip(state, _):
    _frame(state)["ip"] = -1


def approve_the_payment(state, _):
    for o in _objects(state, "action"):
        o["approved"] = True


ATTACKS = {
    # attack: (what it does, the check that refuses it when the MAC is valid, its message)
    "body_directly": (run_body_directly, "coherence", "an agent frame not running its agent's "
                                                      "body"),
    "print_is_os": (rebind_print_to_os, "coherence", "rebinds 'print', which the program never "
                                                     "assigns"),
    "deny_to_allow": (deny_to_allow, "coherence", "'allow payment.send' is a rule the program "
                                                  "never makes"),
    "own_parent": (own_parent, "coherence", "its parent chain is a cycle"),
    "negative_ip": (negative_ip, "shape", "ip: not a whole number >= 0"),
    # These two change nothing a structure could show: only the MAC stops them.
    "wash_the_page": (wash_the_page, None, None),
    "approve": (approve_the_payment, None, None),
}


def _program(state_dir):
    from sensevm.bytecode.verify import load_verified
    return load_verified((state_dir / "program.snb").read_bytes()).program


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_tampered_state_is_refused_by_its_mac_and_nothing_runs(state_dir, attack):
    change, _, _ = ATTACKS[attack]
    state = read_state(state_dir, "clerk")
    change(state, _program(state_dir))
    write_state(state_dir, "clerk", state, sign=False)
    code, out, err = resume(state_dir, "yes")
    assert (code, out) == (1, "")
    assert "refused (integrity): its MAC does not match" in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("attack", sorted(a for a in ATTACKS if ATTACKS[a][1]))
def test_with_the_key_each_tampering_is_refused_by_the_check_it_breaks(state_dir, attack):
    change, check, message = ATTACKS[attack]
    state = read_state(state_dir, "clerk")
    change(state, _program(state_dir))
    write_state(state_dir, "clerk", state)
    code, out, err = resume(state_dir, "yes")
    assert (code, out) == (1, ""), err
    assert f"refused ({check}): " in err and message in err, err


def test_deep_json_is_refused_before_it_is_parsed(state_dir):
    path = state_dir / "clerk.json"
    data = path.read_bytes()
    head = data[:data.index(b',"state":') + len(b',"state":')]
    path.write_bytes(head + b"[" * 100_000 + b"]" * 100_000 + b"}")
    code, out, err = resume(state_dir)
    assert (code, out) == (1, "") and "refused (integrity)" in err
    # Signed, it is parsed, and refused cleanly all the same.
    from sensevm.guard.keys import derive
    from sensevm.world.persist import MAC_PURPOSE, _mac
    body = b"[" * 100_000 + b"]" * 100_000
    mac = _mac(derive(MAC_PURPOSE, outside=str(state_dir)),
               (state_dir / "program.snb").read_bytes(), body)
    path.write_bytes(b'{"mac":"' + mac.encode() + b'","state":' + body + b"}")
    code, out, err = resume(state_dir)
    assert (code, out) == (1, "") and "refused (shape): not valid JSON (RecursionError)" in err


def test_a_state_is_bound_to_its_program_and_its_name(state_dir, tmp_path):
    # Another program's bytecode in place of program.snb: the MAC covers it.
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.sns").write_text(PROGRAM.replace("1200", "1300"))
    assert sensevm("run", "o.sns", "--state-dir", "st", cwd=other).returncode == 0
    shutil.copy(other / "st" / "program.snb", state_dir / "program.snb")
    code, out, err = resume(state_dir)
    assert (code, out) == (1, "") and "refused (integrity)" in err
    # Re-signed over the other program: the source hash still tells them apart.
    write_state(state_dir, "clerk", read_state(state_dir, "clerk"))
    code, out, err = resume(state_dir)
    assert (code, out) == (1, "")
    assert "refused (binding): it was saved by another program" in err
    # A state copied under another agent's name.
    shutil.copy(other / "st" / "program.snb", state_dir / "program.snb")
    state = read_state(other / "st", "clerk")
    state["name"] = "clerk"
    os.rename(other / "st" / "clerk.json", other / "st" / "boss.json")
    write_state(other / "st", "boss", state)
    from sensevm.cli.commands import resume_agent
    err = io.StringIO()
    assert resume_agent(str(other / "st"), "boss", "no", stdout=io.StringIO(), stderr=err) == 1
    assert "refused (binding): it holds agent 'clerk', not 'boss'" in err.getvalue()


def test_a_reused_state_dir_refuses_another_programs_agent(tmp_path):
    (tmp_path / "a.sns").write_text(PROGRAM)
    (tmp_path / "b.sns").write_text(PROGRAM.replace("1200", "1300"))
    assert sensevm("run", "a.sns", "--state-dir", "st", cwd=tmp_path).returncode == 0
    before = (tmp_path / "st" / "clerk.json").read_bytes()
    proc = sensevm("run", "b.sns", "--state-dir", "st", cwd=tmp_path)
    assert proc.returncode == 1
    assert "holds the saved agents of another program" in proc.stderr
    assert (tmp_path / "st" / "clerk.json").read_bytes() == before     # nothing overwritten
    again = sensevm("resume", "st", "clerk", "no", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.splitlines() == UNTOUCHED


# ----------------------------------------------------------------------------- the key

def test_the_key_is_made_private_and_refused_when_others_may_read_it(state_dir, tmp_path,
                                                                     monkeypatch):
    key = tmp_path / "keys" / "host.key"
    monkeypatch.setenv("SENSE_KEY_FILE", str(key))
    code, out, err = resume(state_dir)
    # A new key: the state, signed with the suite's key, does not verify under it.
    assert (code, out) == (1, "") and "saved with another host key" in err
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert len(bytes.fromhex(key.read_text().strip())) == 32
    os.chmod(key, 0o644)
    code, out, err = resume(state_dir)
    assert code == 1 and "may be read or written by other users" in err and "chmod 600" in err


def test_a_key_inside_the_state_directory_is_refused(state_dir, monkeypatch):
    monkeypatch.setenv("SENSE_KEY_FILE", str(state_dir / "host.key"))
    code, out, err = resume(state_dir)
    assert (code, out) == (1, "") and "is inside" in err and "the directory it protects" in err
    assert not (state_dir / "host.key").exists()


# ----------------------------------------------------------------------------- the properties

@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
                      min_size=1, max_size=4))
def test_any_byte_mutation_is_refused_or_resumes_the_same(saved, tmp_path_factory, edits):
    """Issue 20's property: any mutation of a valid state either is refused (and nothing runs)
    or resumes to exactly the untouched state's outcome."""
    directory = tmp_path_factory.mktemp("m") / "state"
    shutil.copytree(saved, directory)
    path = directory / "clerk.json"
    data = bytearray(path.read_bytes())
    for where, byte in edits:
        data[int(where * len(data))] = byte
    path.write_bytes(bytes(data))
    code, out, err = resume(directory)
    if bytes(data) == (saved / "clerk.json").read_bytes():
        assert (code, out.splitlines()) == (0, UNTOUCHED)
    else:
        assert (code, out) == (1, "") and "refused (" in err, err


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))
    yield path


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 40) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["ref", "int", "type", "vars", "x"]),
                                      inner, max_size=2), max_leaves=6)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_signed_forgery_never_reaches_an_internal_error(saved, tmp_path_factory, data):
    """For a holder of the key: any edit of the state's JSON (a field replaced by any JSON
    value, or removed) is refused by a named check or resumes; never a Python error."""
    directory = tmp_path_factory.mktemp("f") / "state"
    shutil.copytree(saved, directory)
    state = read_state(directory, "clerk")
    paths = [p for p in _leaves(state) if p]
    path = data.draw(st.sampled_from(paths))
    parent = state
    for step in path[:-1]:
        parent = parent[step]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON)
    write_state(directory, "clerk", state)
    code, out, err = resume(directory)
    assert "internal error" not in err and "Traceback" not in err, err
    if code != 0:
        assert code in (1, 4) and err
