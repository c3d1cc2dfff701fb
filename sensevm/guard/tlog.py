"""Merkle tree heads of a log (RFC 6962) and signed checkpoints in the C2SP tlog-checkpoint shape.

A checkpoint commits to the first ``size`` entries of a log: its body is three lines, the log's
origin, the size in decimal and the root hash in base64, and a signature line follows a blank
line, as in a signed note (c2sp.org/tlog-checkpoint, c2sp.org/signed-note)::

    sensevm-audit/5f0c...e1
    1200
    qJt0...=

    — sensevm-audit/5f0c...e1 AbCd...==

The signature is an HMAC-SHA256 of the body under the host key's audit key, prefixed by a 4-byte
key id: a symmetric signature, checked by whoever holds the key (the signed-note format leaves
the algorithm to the key; this one is not a public-key signature, and says so). Keep a
checkpoint anywhere outside the log (``sensevm audit checkpoint``): the log can then be checked
against it, so that cutting records off its end is found even when the cut falls on a seal.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

_SHA256 = hashlib.sha256
DASH = "\u2014"                 # the signed-note signature line starts with an em dash


def leaf_hash(data: bytes) -> bytes:
    return _SHA256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return _SHA256(b"\x01" + left + right).digest()


EMPTY_ROOT = _SHA256(b"").digest()


class MerkleTree:
    """The RFC 6962 tree head of a growing list of entries, kept as the roots of its complete
    subtrees (at most one per bit of the size): appending is amortised O(1), memory O(log n)."""

    __slots__ = ("size", "_peaks")

    def __init__(self):
        self.size = 0
        self._peaks: list = []      # (height, hash), the largest subtree first

    def append(self, entry: bytes) -> None:
        node, height = leaf_hash(entry), 0
        peaks = self._peaks
        while peaks and peaks[-1][0] == height:
            node = node_hash(peaks.pop()[1], node)
            height += 1
        peaks.append((height, node))
        self.size += 1

    def root(self) -> bytes:
        """MTH(D[0:size]): the smaller subtrees fold into the larger ones from the right."""
        if not self._peaks:
            return EMPTY_ROOT
        node = self._peaks[-1][1]
        for _, peak in reversed(self._peaks[:-1]):
            node = node_hash(peak, node)
        return node


def _key_id(name: str, key: bytes) -> bytes:
    return _SHA256(name.encode() + b"\n\xffhmac-sha256\n" + _SHA256(key).digest()).digest()[:4]


def checkpoint(origin: str, size: int, root: bytes, key: bytes) -> str:
    """The signed checkpoint note for a tree of ``size`` entries with head ``root``."""
    body = f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"
    sig = hmac.new(key, body.encode(), hashlib.sha256).digest()
    return f"{body}\n{DASH} {origin} {base64.b64encode(_key_id(origin, key) + sig).decode()}\n"


class CheckpointError(ValueError):
    """A text that is not a checkpoint, or one whose signature does not verify."""


def parse(text: str, key: bytes | None = None) -> tuple[str, int, bytes]:
    """(origin, size, root) of a checkpoint note; with ``key``, its signature must verify."""
    body, sep, signatures = text.partition("\n\n")
    lines = body.split("\n")
    if not sep or len(lines) < 3 or not signatures.endswith("\n"):
        raise CheckpointError("not a checkpoint note (origin, size, root, a blank line, "
                              "signatures)")
    origin, size_text, root_text = lines[0], lines[1], lines[2]
    if not size_text.isdigit() or (size_text != "0" and size_text.startswith("0")):
        raise CheckpointError(f"the size {size_text!r} is not a decimal number")
    try:
        root = base64.b64decode(root_text, validate=True)
    except ValueError:
        root = b""
    if len(root) != 32:
        raise CheckpointError("the root is not a base64 SHA-256 hash")
    if key is not None:
        signed = body + "\n"
        expected = hmac.new(key, signed.encode(), hashlib.sha256).digest()
        wanted = _key_id(origin, key)
        for line in signatures[:-1].split("\n"):
            parts = line.split(" ")
            if len(parts) != 3 or parts[0] != DASH or parts[1] != origin:
                continue
            try:
                blob = base64.b64decode(parts[2], validate=True)
            except ValueError:
                continue
            if blob[:4] == wanted and hmac.compare_digest(blob[4:], expected):
                break
        else:
            raise CheckpointError("no signature on it verifies under this host key")
    return origin, int(size_text), root
