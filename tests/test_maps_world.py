"""Maps where they meet the world (EXTENSIONS.md E1): Python interop, persistent memory, a
session's manifest, the inspect console's arguments."""

from __future__ import annotations

import pytest

from test_tiers import _run_source


def run(tmp_path, source, tier="1"):
    out, error, *_ = _run_source(tmp_path, source, tier)
    return out.splitlines(), error


def test_a_map_goes_to_python_as_a_dict_and_a_dict_comes_back_wrapped(tmp_path):
    lines, error = run(tmp_path, '''policy: allow python.import
from python "json" import dumps, loads
m = {"a": [1, {"b": nil}], "n": 2}
m["self"] = [m]
print(dumps({"a": [1, {"b": nil}], 7: true}))
back = loads("{\\"x\\": 1}")
print(type_of(back), back["x"])
import python "copy"
print(type_of(copy.copy(m)))
''')
    assert error is None, error
    assert lines == ['{"a": [1, {"b": null}], "7": true}', "Python 1", "Python"]


def test_persistent_memory_keeps_maps_with_string_keys(tmp_path):
    db = tmp_path / "notes.db"
    source = f'''persistent memory notes: "{db}"
notes.remember("m", {{"a": [1, {{"b": 2}}], "c": "d"}})
print(notes.recall("m"), type_of(notes.recall("m")), notes.recall("m")["a"][1]["b"])
'''
    assert run(tmp_path, source) == (["{a: [1, {b: 2}], c: d} Map 2"], None)
    lines, error = run(tmp_path, f'persistent memory notes: "{db}"\nprint(notes.recall("m"))\n'
                                 'notes.remember("bad", [{"ok": {3: 1}}])\n')
    assert lines == ["{a: [1, {b: 2}], c: d}"]
    assert error[1] == ("[line 3] persistent memory can only store Maps whose keys are Strings "
                          "(JSON has no Int keys): got the key 3")


def test_a_manifest_shows_a_map_argument_and_hashes_its_entries(tmp_path):
    from sensevm.guard.session import canonical
    from sensevm.runtime.values import to_str
    shown = canonical([{"to": "a@x.example", 2: [1.5]}], to_str)
    assert shown == [{"value": "Map", "text": "{to: a@x.example, 2: [1.5]}",
                      "entries": [["to", "a@x.example"],
                                  [2, [{"float": (1.5).hex(), "text": "1.5"}]]]}]
    lines, error = run(tmp_path, '''irreversible action send(who: Map) requires mail.send:
    print("sent", who)
session weekly as s:
    a = send({"to": "a@x.example", "cc": ["b@x.example"]})
    a.verify()
    a.commit()
    print(s.manifest().entries)
    s.abort()
''')
    assert error is None, error
    assert lines == ['[#1 send({to: a@x.example, cc: [b@x.example]}) requires mail.send]']


def test_the_console_takes_maps_as_arguments():
    from sensevm.cli.console import ConsoleError, _Literals, from_json
    assert _Literals('{"a": [1, {2: nil}], 3: true}, 5').items("") == [
        {"a": [1, {2: None}], 3: True}, 5]
    assert from_json({"a": [1, {"b": None}]}, "args") == {"a": [1, {"b": None}]}
    for bad in ("{true: 1}", "{1 2}", "{[1]: 2}", '{"a": 1'):
        with pytest.raises(ConsoleError):
            _Literals(bad).items("")
