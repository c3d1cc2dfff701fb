"""Saved agents and EXTENSIONS.md E1/E2: a paused agent's Maps, the methods it holds bound to a
value, and a map/filter/reduce/sorted call it paused inside are saved and restored, in another
process, with their labels; a forged state of any of them is refused by a named check
(sensevm/world/persist.py)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT
from saved_state import read_state, write_state

PROGRAM = '''tool fetch() returns String requires web.fetch:
    return "Mallory <mallory@evil.example>"
agent clerk:
    page = fetch()
    book = {"name": "Ada", 7: [1, 2], "page": page}
    book["self"] = book
    book[page] = "keyed by the page"
    upper = page.upper
    pusher = [0].push
    def ask(topic):
        return topic + "=" + ask_human("rate " + topic + "?")
    rated = ["tea", "coffee"].map(ask)
    print("rated", rated, book["name"], book[7], book["self"]["name"], upper(), pusher(1))
    ordered = ["ccc", "a", "bb"].sorted(pause)
    print("ordered", ordered)
    evens = [1, 2, 3, 4].filter(pause)
    print("evens", evens, len(book), book.keys()[4] == page)
start(clerk)
'''

# Resumed with these answers in turn, the agent prints these lines (the same in one process).
ANSWERS = ["5", "3", "2", "1", "3", "", "yes", "", "yes"]
PRINTED = ["rated [tea=5, coffee=3] Ada [1, 2] Ada MALLORY <MALLORY@EVIL.EXAMPLE> [0, 1]",
           "ordered [a, ccc, bb]", "evens [2, 4] 5 true"]


def sensevm(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "sensevm", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A state directory holding the clerk, paused inside its first map() call."""
    base = tmp_path_factory.mktemp("saved_maps")
    (base / "clerk.sns").write_text(PROGRAM)
    proc = sensevm("run", "clerk.sns", "--state-dir", "state", cwd=base)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    return base / "state"


@pytest.fixture
def state_dir(saved, tmp_path):
    target = tmp_path / "state"
    shutil.copytree(saved, target)
    return target


def resume(directory, answer):
    from sensevm.cli.commands import resume_agent
    out, err = io.StringIO(), io.StringIO()
    code = resume_agent(str(directory), "clerk", answer, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_state_holds_maps_methods_and_the_callback_frame(saved):
    state = read_state(saved, "clerk")
    kinds = [o["type"] for o in state["objects"]]
    assert "map" in kinds and "method" in kinds and "callback" in kinds
    (agent,) = [o for o in state["objects"] if o["type"] == "agent"]
    # Innermost first: ask's frame, the map() call's callback frame, the agent's body.
    frames = agent["frames"]
    assert [("callback" in f) for f in frames] == [False, True, False]
    (book,) = [o for o in state["objects"] if o["type"] == "map" and len(o["items"]) == 5]
    keys = [k for k, _ in book["items"]]
    assert keys[:2] == ["name", {"int": "7"}] and "lstr" in keys[4]      # labelled key kept
    assert book["items"][3][1] == {"ref": state["objects"].index(book)}  # the cycle


def test_every_pause_resumes_in_a_new_process_as_one_process_runs_it(state_dir, tmp_path):
    printed = []
    for answer in ANSWERS:
        proc = sensevm("resume", str(state_dir), "clerk", answer, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        printed += proc.stdout.splitlines()
    assert printed == PRINTED
    # The same program, in one process, with the same answers.
    (tmp_path / "one.sns").write_text(PROGRAM + "".join(f"resume(clerk, {json.dumps(a)})\n"
                                                        for a in ANSWERS))
    proc = sensevm("run", "one.sns", cwd=tmp_path)
    assert (proc.returncode, proc.stdout.splitlines()) == (0, PRINTED), proc.stderr


def test_labels_in_a_map_survive_the_resume(state_dir):
    """The page stays the page's, inside the map, as a key too, through the restored state."""
    from sensevm.guard import provenance as PV
    from sensevm.runtime.vm import VM
    from sensevm.world.persist import load_agent, read_saved
    verified, state = read_saved(str(state_dir), "clerk")
    vm = VM(verified, stdout=io.StringIO())
    agent = load_agent(vm, state)
    book = agent.scope.vars["book"]
    assert PV.is_influenced(PV.origins_of(book["page"]))
    page_key = list(book)[4]
    assert type(page_key) is PV.LStr and PV.is_influenced(PV.origins_of(page_key))
    assert book["self"] is book
    upper = agent.scope.vars["upper"]
    assert upper.name == "String.upper" and PV.is_influenced(PV.origins_of(upper.receiver))


# ----------------------------------------------------------------------------- forgeries

def _objects(state, kind):
    return [o for o in state["objects"] if o["type"] == kind]


def _book(state):
    return next(o for o in _objects(state, "map") if len(o["items"]) == 5)


def duplicate_key(state):
    _book(state)["items"][1][0] = "name"


def bool_key(state):
    _book(state)["items"][0][0] = True


def float_key(state):
    _book(state)["items"][0][0] = {"float": (1.5).hex()}


def unknown_method(state):
    _objects(state, "method")[0]["name"] = "String.os_system"


def method_on_the_wrong_kind(state):
    for o in _objects(state, "method"):
        if o["name"] == "Array.push":
            o["name"] = "Map.keys"


def callback_kind(state):
    _objects(state, "callback")[0]["kind"] = "exec"


def callback_out_of_range(state):
    _objects(state, "callback")[0]["i"] = 99


def callback_results_do_not_add_up(state):
    cb = _objects(state, "callback")[0]
    out = state["objects"][cb["out"]["ref"]]
    out["items"].append("forged result")


def callback_frame_as_the_base(state):
    (agent,) = _objects(state, "agent")
    agent["frames"] = agent["frames"][:2]


def callback_frame_label_elsewhere(state):
    (agent,) = _objects(state, "agent")
    agent["frames"][1]["pc"] = [[3, [["untrusted", "fetch"]], 0]]


def callback_frame_with_a_code(state):
    (agent,) = _objects(state, "agent")
    agent["frames"][1]["code"] = 0


FORGERIES = {
    "duplicate_key": (duplicate_key, "shape", "a map key given twice"),
    "bool_key": (bool_key, "shape", "a map key that is not a String or an Int"),
    "float_key": (float_key, "shape", "a map key that is not a String or an Int"),
    "unknown_method": (unknown_method, "shape",
                       "names no method of a String, Array or Map: 'String.os_system'"),
    "method_kind": (method_on_the_wrong_kind, "shape", "refers to a array, not map"),
    "callback_kind": (callback_kind, "shape", "not a method that calls back: 'exec'"),
    "callback_i": (callback_out_of_range, "coherence",
                   "99 is not the position of a call out over 2 items"),
    "callback_out": (callback_results_do_not_add_up, "coherence", "1 results for 0 calls made"),
    "callback_base": (callback_frame_as_the_base, "coherence",
                      "its outermost frame is not its own body"),
    "callback_pc": (callback_frame_label_elsewhere, "coherence",
                    "a branch label outside its frame"),
    "callback_code": (callback_frame_with_a_code, "shape", "unexpected code"),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_signed_forgery_is_refused_by_the_check_it_breaks(state_dir, forgery):
    change, check, message = FORGERIES[forgery]
    state = read_state(state_dir, "clerk")
    change(state)
    write_state(state_dir, "clerk", state)
    code, out, err = resume(state_dir, "5")
    assert (code, out) == (1, ""), err
    assert f"refused ({check}): " in err and message in err, err


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_an_unsigned_forgery_is_refused_by_its_mac(state_dir, forgery):
    change, _, _ = FORGERIES[forgery]
    state = read_state(state_dir, "clerk")
    change(state)
    write_state(state_dir, "clerk", state, sign=False)
    code, out, err = resume(state_dir, "5")
    assert (code, out) == (1, "") and "refused (integrity)" in err, err


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
                    | st.dictionaries(st.sampled_from(["ref", "int", "type", "items", "i",
                                                       "kind", "callback", "pc"]),
                                      inner, max_size=2), max_leaves=6)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_signed_edit_is_refused_or_resumes_never_an_internal_error(saved, tmp_path_factory,
                                                                       data):
    """Any field of the maps, methods and callback frame replaced by any JSON value, or
    removed: a named refusal, or a resume; never a Python error."""
    directory = tmp_path_factory.mktemp("f") / "state"
    shutil.copytree(saved, directory)
    state = read_state(directory, "clerk")
    targets = [i for i, o in enumerate(state["objects"])
               if o["type"] in ("map", "method", "callback", "agent")]
    paths = [("objects", i) + p for i in targets for p in _leaves(state["objects"][i]) if p]
    path = data.draw(st.sampled_from(paths))
    parent = state
    for step in path[:-1]:
        parent = parent[step]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON)
    write_state(directory, "clerk", state)
    code, out, err = resume(directory, "5")
    assert "internal error" not in err and "Traceback" not in err, err
    if code != 0:
        assert code in (1, 4) and err
