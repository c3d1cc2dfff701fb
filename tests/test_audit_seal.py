"""The audit trail detects a cut tail and a re-chained log (issue 21, item 8): every line is MAC'd
under the host key, every run is sealed, checkpoints are signed Merkle tree heads (tlog.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT
from sensevm.guard import audit as A
from sensevm.guard import tlog
from sensevm.guard.audit import AuditFile, AuditRecord, encode_entry, verify_chain

PROGRAM = '''irreversible action pay(to: String) requires payment.send:
    print("PAID " + to)
policy:
    allow payment.send
p = pay("landlord@example.com")
p.verify()
p.commit()
'''


def sh(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "sensevm", *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


@pytest.fixture
def logged(tmp_path):
    """A log of one run of PROGRAM: opened, prepared, verified, committing, committed, sealed."""
    (tmp_path / "p.sns").write_text(PROGRAM)
    proc = sh("run", "p.sns", "--audit-log", "a.jsonl", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "PAID landlord@example.com\n", proc.stderr
    return tmp_path / "a.jsonl"


def lines_of(path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def write(path, lines) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def rechain(lines: list[bytes]) -> list[bytes]:
    """What someone without the key can do: renumber and re-hash the chain."""
    out, prev = [], A.GENESIS
    for seq, line in enumerate(lines, start=1):
        entry = json.loads(line)
        entry["seq"], entry["prev"] = seq, prev
        line = encode_entry(entry)
        out.append(line)
        prev = hashlib.sha256(line).hexdigest()
    return out


def events(path) -> list[str]:
    return [json.loads(line)["event"] for line in lines_of(path)]


def verify(path, *extra):
    return sh("audit", "verify", str(path), *extra, cwd=path.parent)


def test_a_run_is_opened_and_sealed(logged):
    assert events(logged) == ["opened", "prepared", "verified", "committing", "committed",
                              "sealed"]
    proc = verify(logged)
    assert proc.returncode == 0 and proc.stdout.startswith("OK: 6 records")


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_cut_tail_is_found_and_told_apart_from_a_torn_one(logged, cut):
    write(logged, lines_of(logged)[:-cut])
    proc = verify(logged)
    assert proc.returncode == A.VERIFY_UNSEALED == 3
    assert proc.stderr.startswith(f"NOT SEALED: {6 - cut} records") and \
        f"ended without its seal (records 1-{6 - cut})" in proc.stderr
    torn = logged.read_bytes() + b'{"detail":'
    logged.write_bytes(torn)
    proc = verify(logged)
    assert proc.returncode == A.VERIFY_TORN == 2 and "torn final line" in proc.stderr


def test_dropping_the_committed_record_and_rechaining_is_found(logged):
    lines = lines_of(logged)
    dropped = rechain([line for line in lines if json.loads(line)["event"] != "committed"])
    write(logged, dropped)
    proc = verify(logged)
    assert proc.returncode == 1
    assert f"{logged}:5: MAC does not match" in proc.stderr


def test_rewriting_committed_as_denied_and_rechaining_is_found(logged):
    lines = lines_of(logged)
    entry = json.loads(lines[4])
    entry["event"] = "denied"
    entry["text"] = AuditRecord(entry["subject"], entry["name"], entry["kind"], "denied",
                                entry["detail"], entry["line"], tuple(entry["lineage"]),
                                0.0, entry["host_only"]).describe()
    lines[4] = encode_entry(entry)
    write(logged, rechain(lines))
    proc = verify(logged)
    assert proc.returncode == 1 and f"{logged}:5: MAC does not match" in proc.stderr


def test_a_log_rewritten_under_another_key_is_found(logged, tmp_path_factory, monkeypatch):
    """Re-MAC'd and re-chained with a key of the forger's own: the host's key tells."""
    forger = tmp_path_factory.mktemp("forger") / "host.key"
    monkeypatch.setenv("SENSE_KEY_FILE", str(forger))
    key = A.audit_key(logged)
    out, prev = [], A.GENESIS
    for seq, line in enumerate(lines_of(logged)[:4], start=1):
        entry = json.loads(line)
        entry["seq"], entry["prev"] = seq, prev
        entry["mac"] = A.entry_mac(key, entry)
        line = encode_entry(entry)
        out.append(line)
        prev = hashlib.sha256(line).hexdigest()
    write(logged, out)
    monkeypatch.undo()
    proc = verify(logged)
    assert proc.returncode == 1 and f"{logged}:1: MAC does not match" in proc.stderr


def test_without_the_key_nothing_is_vouched_for(logged, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("elsewhere")
    env = dict(os.environ, PYTHONPATH=ROOT, SENSE_KEY_FILE=str(tmp_path / "none" / "k"))
    proc = subprocess.run([sys.executable, "-m", "sensevm", "audit", "verify", str(logged)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "cannot check its MACs: there is no host key at" in proc.stderr
    assert not (tmp_path / "none").exists()          # verifying never makes a key


def test_a_run_that_died_is_reported_and_the_next_run_appends(logged):
    lines = lines_of(logged)
    write(logged, lines[:-1])                        # as a crash before the seal leaves it
    proc = sh("run", "p.sns", "--audit-log", "a.jsonl", cwd=logged.parent)
    assert proc.returncode == 0, proc.stderr
    proc = verify(logged)
    assert proc.returncode == 3
    assert "1 run ended without its seal (records 1-5)" in proc.stderr
    assert events(logged)[5:] == ["opened", "prepared", "verified", "committing", "committed",
                                  "sealed"]


def test_a_checkpoint_kept_elsewhere_finds_a_cut_on_an_earlier_seal(logged):
    """Two runs; the second is removed whole, so the log ends on the first run's seal and reads
    sealed. The checkpoint taken after the second run, kept outside, finds the cut."""
    first = lines_of(logged)
    assert sh("run", "p.sns", "--audit-log", "a.jsonl", cwd=logged.parent).returncode == 0
    proc = sh("audit", "checkpoint", "a.jsonl", cwd=logged.parent)
    assert proc.returncode == 0
    note = proc.stdout
    origin, size, root = tlog.parse(note, A.audit_key(logged))
    assert size == 11 and origin.startswith("sensevm-audit/")
    (logged.parent / "kept.txt").write_text(note)
    assert verify(logged, "--checkpoint", str(logged.parent / "kept.txt")).returncode == 0
    write(logged, first)
    assert verify(logged).returncode == 0            # alone, a whole run's removal is silent
    proc = verify(logged, "--checkpoint", str(logged.parent / "kept.txt"))
    assert proc.returncode == 1 and "fewer than the 11 of the checkpoint" in proc.stderr
    # A forged checkpoint is refused as such.
    forged = note.replace("\n11\n", "\n6\n")
    (logged.parent / "forged.txt").write_text(forged)
    proc = verify(logged, "--checkpoint", str(logged.parent / "forged.txt"))
    assert proc.returncode == 1 and "no signature on it verifies" in proc.stderr


def test_checkpoints_every_n_records_are_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(A, "CHECKPOINT_EVERY", 3)
    path = tmp_path / "a.jsonl"
    with AuditFile(path, fsync=False) as sink:
        for i in range(7):
            sink.write(AuditRecord("tool 't'", "t", "tool", "called", None, i, ()))
    assert events(path).count("checkpoint") == 2
    result = verify_chain(path)
    assert result.sealed and result.checkpoints == 3
    # A checkpoint whose root is another log's: refused, though its MAC is re-made.
    lines = lines_of(path)
    at = events(path).index("checkpoint")
    entry = json.loads(lines[at])
    origin, size, _ = tlog.parse(entry["detail"])
    entry["detail"] = tlog.checkpoint(origin, size, b"\x07" * 32, A.audit_key(path))
    entry["text"] = AuditRecord(entry["subject"], entry["name"], entry["kind"], entry["event"],
                                entry["detail"], None, (), 0.0, True).describe()
    entry["mac"] = A.entry_mac(A.audit_key(path), entry)
    lines[at] = encode_entry(entry)
    write(path, rechain(lines[:at + 1]) + lines[at + 1:])
    result = verify_chain(path)
    assert not result.ok and result.line == at + 1
    assert "its checkpoint does not match the" in result.problem


def test_a_session_approval_carries_the_checkpoint_it_was_given_at(tmp_path):
    (tmp_path / "s.sns").write_text('''irreversible action send(to: String) requires email.send:
    print("SENT " + to)
session weekly as s:
    m = send("a@x.example")
    m.verify()
    m.commit()
    s.commit(s.manifest().hash)
''')
    proc = sh("run", "s.sns", "--audit-log", "a.jsonl", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "SENT a@x.example\n", proc.stderr
    wal = [json.loads(line) for line in (tmp_path / ".sense" / "sessions.wal").read_bytes()
           .split(b"\n")[:-1]]
    (approved,) = [r for r in wal if r["rec"] == "approved"]
    log = tmp_path / "a.jsonl"
    _, size, root = tlog.parse(approved["checkpoint"], A.audit_key(log))
    # It is the checkpoint record in the log, which names every line before it.
    at = events(log).index("checkpoint")
    assert size == at and json.loads(lines_of(log)[at])["detail"] == approved["checkpoint"]
    (tmp_path / "c.txt").write_text(approved["checkpoint"])
    assert verify(log, "--checkpoint", str(tmp_path / "c.txt")).returncode == 0


# ----------------------------------------------------------------------------- the tree

def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962, section 2.1, written as the RFC writes it."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=8), max_size=70))
def test_the_tree_head_is_rfc_6962s_at_every_size(leaves):
    tree = tlog.MerkleTree()
    assert tree.root() == _mth([])
    for i, leaf in enumerate(leaves, start=1):
        tree.append(leaf)
        assert tree.size == i and tree.root() == _mth(leaves[:i])


def test_known_tree_heads():
    assert tlog.MerkleTree().root().hex() == ("e3b0c44298fc1c149afbf4c8996fb924"
                                              "27ae41e4649b934ca495991b7852b855")
    tree = tlog.MerkleTree()
    tree.append(b"")
    # RFC 6962's leaf hash of the empty entry: SHA-256 of the single byte 0x00.
    assert tree.root().hex() == ("6e340b9cffb37a989ca544e6bb780a2c"
                                 "78901d3fb33738768511a30617afa01d")


def test_a_checkpoint_note_round_trips_and_binds_every_line():
    key = b"k" * 32
    note = tlog.checkpoint("sensevm-audit/x", 12, b"\x01" * 32, key)
    body, sig = note.split("\n\n")
    assert body.split("\n") == ["sensevm-audit/x", "12", base64.b64encode(b"\x01" * 32).decode()]
    assert sig.startswith("\u2014 sensevm-audit/x ") and sig.endswith("\n")
    assert tlog.parse(note, key) == ("sensevm-audit/x", 12, b"\x01" * 32)
    for forged in (note.replace("\n12\n", "\n13\n"), note.replace("audit/x\n", "audit/y\n", 1)):
        with pytest.raises(tlog.CheckpointError):
            tlog.parse(forged, key)
    with pytest.raises(tlog.CheckpointError):
        tlog.parse(note, b"j" * 32)
