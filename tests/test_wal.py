"""The session write-ahead log: chain and CRC, torn tails, refused damage, verdicts, idempotent recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from sensevm.guard.wal import SessionLog, WalError, recover, scan, verdicts

S = "5e55104"


def write(path, records):
    with SessionLog(str(path), fsync=False) as log:
        for kind, fields in records:
            log.append(kind, fields.pop("session", S), **fields)


HEADER = ("header", {"name": "weekly", "program": "ab" * 32, "policy": "cd" * 32, "version": 1})


def queued(n, action="send_report", args=("boss",)):
    return ("queued", {"n": n, "action": action, "args": list(args), "capability": "email.send",
                       "key": f"k{n}"})


def test_records_round_trip_with_a_chain_and_crc(tmp_path):
    path = tmp_path / "s.wal"
    write(path, [HEADER, queued(1), ("approved", {"hash": "h", "entries": [1],
                                                  "approver": "flag", "checkpoint": None})])
    found = scan(str(path))
    assert found.problem is None and not found.torn
    assert [r["rec"] for r in found.records] == ["header", "queued", "approved"]
    assert [r["seq"] for r in found.records] == [1, 2, 3]
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[1])["prev"] != json.loads(lines[0])["prev"]
    # Appending later continues the same chain.
    write(path, [("attempt", {"n": 1, "key": "k1"})])
    assert scan(str(path)).records[-1]["seq"] == 4


def test_a_record_must_carry_exactly_its_fields(tmp_path):
    with SessionLog(str(tmp_path / "s.wal"), fsync=False) as log:
        with pytest.raises(ValueError):
            log.append("queued", S, n=1)


def test_a_torn_last_line_at_every_byte_offset_is_tolerated(tmp_path):
    path = tmp_path / "s.wal"
    write(path, [HEADER, queued(1), ("approved", {"hash": "h", "entries": [1],
                                                  "approver": "flag", "checkpoint": None})])
    whole = path.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    for cut in range(last_start + 1, len(whole)):        # every partial last line
        path.write_bytes(whole[:cut])
        found = scan(str(path))
        assert found.problem is None and found.torn, cut
        assert [r["rec"] for r in found.records] == ["header", "queued"]
        # Without the approval the session rolls back; recovery truncates the torn tail.
        (v,) = recover(str(path), fsync=False)
        assert v.verdict == "rolled back" and v.dropped == ["#1 send_report(\"boss\")"]
        assert scan(str(path)).torn is False
        before = path.read_bytes()
        recover(str(path), fsync=False)
        assert path.read_bytes() == before                 # the second run is a no-op


@pytest.mark.parametrize("damage", ["flip", "drop", "swap", "garbage"])
def test_damage_before_the_end_is_refused_and_nothing_is_written(tmp_path, damage):
    path = tmp_path / "s.wal"
    write(path, [HEADER, queued(1), queued(2), ("approved", {"hash": "h", "entries": [1, 2],
                                                             "approver": "flag", "checkpoint": None})])
    lines = path.read_bytes().split(b"\n")[:-1]
    if damage == "flip":
        lines[1] = lines[1].replace(b"boss", b"bozs")
    elif damage == "drop":
        del lines[1]
    elif damage == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    else:
        lines[2] = b"not json at all"
    path.write_bytes(b"\n".join(lines) + b"\n")
    before = path.read_bytes()
    found = scan(str(path))
    assert found.problem is not None and found.line == 2 + (damage == "garbage")
    with pytest.raises(WalError, match="cannot be trusted"):
        recover(str(path), fsync=False)
    with pytest.raises(WalError, match="refusing to append"):
        SessionLog(str(path), fsync=False)
    assert path.read_bytes() == before


def test_a_flipped_digit_in_the_last_line_is_caught_by_its_crc(tmp_path):
    path = tmp_path / "s.wal"
    write(path, [HEADER, ("approved", {"hash": "h", "entries": [7], "approver": "flag",
                                       "checkpoint": None})])
    data = path.read_bytes()
    path.write_bytes(data.replace(b"[7]", b"[8]"))
    assert "CRC" in scan(str(path)).problem


def test_the_log_is_locked_while_open(tmp_path):
    path = str(tmp_path / "s.wal")
    with SessionLog(path, fsync=False):
        with pytest.raises(WalError, match="in use by another process"):
            SessionLog(path, fsync=False)


def test_a_failed_write_stops_every_later_write(tmp_path, monkeypatch):
    log = SessionLog(str(tmp_path / "s.wal"))
    log.append(*HEADER[:1], S, **HEADER[1])

    def broken(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(WalError, match="nothing more may fire"):
        log.append("queued", S, **queued(1)[1])
    monkeypatch.undo()
    with pytest.raises(WalError, match="nothing more may fire"):
        log.append("queued", S, **queued(2)[1])
    log.close()


def approved(*ns):
    return ("approved", {"hash": "h", "entries": list(ns), "approver": "terminal",
                         "checkpoint": None})


@pytest.mark.parametrize("records, verdict, expected", [
    # Crash mid-session (or after the manifest was shown): nothing was approved.
    ([HEADER, queued(1), queued(2)], "rolled back",
     {"dropped": ["#1 send_report(\"boss\")", "#2 send_report(\"boss\")"], "clean": True}),
    # Crash after the approval was durable, before any fire: owed, never re-fired.
    ([HEADER, queued(1), queued(2), approved(1, 2)], "committed",
     {"owed": ["#1 send_report(\"boss\")", "#2 send_report(\"boss\")"], "clean": False}),
    # Crash between an attempt and its outcome: unknown, not "not attempted".
    ([HEADER, queued(1), queued(2), approved(1, 2), ("attempt", {"n": 1, "key": "k1"}),
      ("flushed", {"n": 1}), ("attempt", {"n": 2, "key": "k2"})], "committed",
     {"fired": ["#1 send_report(\"boss\")"], "unknown": ["#2 send_report(\"boss\")"], "clean": False}),
    # A fire that failed is residue; the rest of the queue went on.
    ([HEADER, queued(1), queued(2), approved(1, 2), ("attempt", {"n": 1, "key": "k1"}),
      ("residue", {"n": 1, "error": "smtp down"}), ("attempt", {"n": 2, "key": "k2"}),
      ("flushed", {"n": 2}), ("discharge", {}), ("complete", {})], "committed",
     {"failed": ["#1 send_report(\"boss\"): smtp down"], "fired": ["#2 send_report(\"boss\")"],
      "clean": False}),
    # An entry enqueued after the approval is not covered by it.
    ([HEADER, queued(1), approved(1), queued(2)], "committed",
     {"owed": ["#1 send_report(\"boss\")"], "dropped": ["#2 send_report(\"boss\")"]}),
    # Abort: witnessed effects rolled back, queue dropped, immediate ones stand.
    ([HEADER, ("witnessed", {"n": 1, "action": "archive", "args": [2025]}),
      ("fired", {"n": 2, "action": "charge", "args": [5]}), queued(3),
      ("rollback", {"n": 1}), ("aborted", {"replayed": [1]})], "rolled back",
     {"clean": True, "immediate": ["#2 charge(5)"], "dropped": ["#3 send_report(\"boss\")"]}),
    # Crash mid-session after a witnessed effect: its rollback is owed.
    ([HEADER, ("witnessed", {"n": 1, "action": "archive", "args": [2025]})], "rolled back",
     {"rollbacks_owed": ["#1 archive(2025)"], "clean": False}),
])
def test_verdicts(tmp_path, records, verdict, expected):
    path = tmp_path / "s.wal"
    write(path, records)
    (v,) = verdicts(scan(str(path)).records)
    assert v.verdict == verdict
    got = v.as_json()
    for key, value in expected.items():
        assert got[key] == value, key


def test_recover_records_its_verdict_once(tmp_path):
    path = tmp_path / "s.wal"
    write(path, [HEADER, queued(1), approved(1)])
    first = recover(str(path), fsync=False)
    assert [r["rec"] for r in scan(str(path)).records][-2:] == ["discharge", "recovered"]
    after_first = path.read_bytes()
    second = recover(str(path), fsync=False)
    assert path.read_bytes() == after_first
    assert [v.as_json() for v in first] == [v.as_json() for v in second]


def test_sessions_are_judged_separately(tmp_path):
    path = tmp_path / "s.wal"
    write(path, [HEADER, queued(1), ("header", {"session": "other", "name": "daily",
                                                "program": "0" * 64, "policy": "1" * 64,
                                                "version": 1}),
                 ("complete", {"session": "other"}), approved(1)])
    got = {v.name: v.verdict for v in verdicts(scan(str(path)).records)}
    assert got == {"weekly": "committed", "daily": "rolled back"}


CRASHER = """
import sys
from sensevm.guard.wal import SessionLog, crash_point
log = SessionLog(sys.argv[1])
log.append("header", "s1", name="n", program="0" * 64, policy="0" * 64, version=1)
for n in (1, 2):
    log.append("queued", "s1", n=n, action="a", args=[n], capability="c", key=f"k{n}")
crash_point("before-approved")
log.append("approved", "s1", hash="h", entries=[1, 2], approver="flag", checkpoint=None)
for n in (1, 2):
    log.append("attempt", "s1", n=n, key=f"k{n}")
    crash_point("after-attempt", n)
    log.append("flushed", "s1", n=n)
log.append("complete", "s1")
"""


@pytest.mark.parametrize("point, verdict, fired, unknown, owed", [
    ("before-approved", "rolled back", [], [], []),
    ("after-attempt:1", "committed", [], ["#1 a(1)"], ["#2 a(2)"]),
    ("after-attempt:2", "committed", ["#1 a(1)"], ["#2 a(2)"], []),
    ("nowhere", "committed", ["#1 a(1)", "#2 a(2)"], [], []),
])
def test_a_process_killed_at_each_window_recovers_to_its_verdict(tmp_path, point, verdict,
                                                                 fired, unknown, owed):
    path = str(tmp_path / "s.wal")
    env = dict(os.environ, PYTHONPATH=ROOT, SENSE_CRASH_AT=point)
    proc = subprocess.run([sys.executable, "-c", CRASHER, path], env=env, capture_output=True)
    assert proc.returncode == (0 if point == "nowhere" else 137), proc.stderr
    (v,) = recover(path, fsync=False)
    assert (v.verdict, v.fired, v.unknown, v.owed) == (verdict, fired, unknown, owed)
    before = open(path, "rb").read()
    recover(path, fsync=False)
    assert open(path, "rb").read() == before
