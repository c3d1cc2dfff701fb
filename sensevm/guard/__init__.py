"""sensevm.guard: the guarantees, as rules that know nothing of the machine obeying them.

Capability policy, the action lifecycle, provenance, the second look and its matching rules,
the audit trail, the host key, the session commit protocol and its write-ahead log.

Imports only sensevm.bytecode and sensevm.base: these rules know nothing of the machine that
obeys them, so a reader can check them on their own."""
