"""SHA-256 for the start-up path, without importing hashlib (same digests).

hashlib loads OpenSSL before anything else, and that alone costs more than the rest of a small
``sensevm run``. The opcode-table fingerprint is hashed on every start and a .snb's sibling source
on most, so they use CPython's own small SHA-256 module when it exists; hashlib otherwise.
"""

try:
    from _sha256 import sha256              # CPython 3.11
except ImportError:
    try:
        from _sha2 import sha256            # CPython 3.12+
    except ImportError:
        from hashlib import sha256

__all__ = ["sha256"]
