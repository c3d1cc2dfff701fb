"""The standard library's natives: each name's kind and the exact capability it requires.

The native bridge (docs/stdlib.md, EXTENSIONS.md E5). What a ``std.`` module must do on the
host it does through a *native*: a Python function the VM provides, named by the NATIVE
instruction (``NATIVE a=constants[a], the native's name; b=argc``). The registry of natives
maps each name to

    (kind, capability, Python function)

where kind is one of ``tool``, ``reversible``, ``irreversible`` (an action of that kind) or
``pure``. This module holds the first two columns (the contract that the compiler, the
verifier and the VM share); the functions are the world layer's
(``sensevm/world/stdlib_native.py``), registered with the runtime by ``sensevm.world.install``,
and a test checks that both tables name the same natives with the same kinds and capabilities.

The guarantee. Only files of the installed ``stdlib/`` directory may write a native call
(``native::name(args)``; the compiler refuses it anywhere else). A hand-made .snb can hold any
instruction, so the compiler's refusal guarantees nothing; what does is the NATIVE handler
(``SenseVM.op_NATIVE``, the one handler both tiers run: tier 2 leaves code holding NATIVE to
tier 1). Before it calls a non-pure native it checks that the frame executing the instruction
is the body of a declaration whose kind matches the native's (a tool's body for a tool native;
an action's commit body or rollback block for an action native, reversible for a reversible
one, irreversible for an irreversible one) and whose declared capability equals the native's
capability exactly. Such a body runs only through the checked paths: a tool's capability is
checked (and audited) at every call, an action's body runs only inside commit, after verify
(and approval where required), never under ``--dry-run``, queued in a session. So a forged file
reaches a host effect only through the same checks as the library's own declarations. The
verifier refuses beforehand a NATIVE naming no native, and a non-pure one outside a body of
the right kind and capability.
"""

from __future__ import annotations

PURE = "pure"
TOOL = "tool"
REVERSIBLE = "reversible"
IRREVERSIBLE = "irreversible"
KINDS = (PURE, TOOL, REVERSIBLE, IRREVERSIBLE)

# name -> (kind, capability or None); the order is the documentation's.
SPECS: dict = {
    # std.math
    "math_number": (PURE, None),        # (function name, x): x, or an error naming the function
    "math_floor": (PURE, None),
    "math_ceil": (PURE, None),
    "math_round": (PURE, None),
    "math_sqrt": (PURE, None),
    "math_pow": (PURE, None),
    "math_log": (PURE, None),
    "math_exp": (PURE, None),
    "math_min": (PURE, None),
    "math_max": (PURE, None),
    "math_is_nan": (PURE, None),
    "math_inf": (PURE, None),
    # std.fs
    "fs_read_text": (TOOL, "fs.read"),
    "fs_list_dir": (TOOL, "fs.read"),
    "fs_exists": (TOOL, "fs.read"),
    "fs_write_text": (REVERSIBLE, "fs.write"),      # -> the previous state (see stdlib_native)
    "fs_append_text": (REVERSIBLE, "fs.write"),     # -> the previous state
    "fs_restore": (REVERSIBLE, "fs.write"),         # (path, previous state)
    "fs_make_dir": (REVERSIBLE, "fs.write"),        # -> whether it made the directory
    "fs_unmake_dir": (REVERSIBLE, "fs.write"),      # (path, made)
    "fs_remove": (IRREVERSIBLE, "fs.delete"),
    # std.http, std.email, std.shell (the functions: sensevm/world/std_net.py)
    "http_get": (TOOL, "net.fetch"),
    "http_get_json": (TOOL, "net.fetch"),
    "http_post": (IRREVERSIBLE, "http.post"),
    "http_post_json": (IRREVERSIBLE, "http.post"),
    "email_send": (IRREVERSIBLE, "email.send"),
    "shell_run": (IRREVERSIBLE, "shell.exec"),
    # std.json, std.re, std.time, std.env
    "json_parse": (PURE, None),
    "json_format": (PURE, None),
    "json_pretty": (PURE, None),
    "re_matches": (PURE, None),
    "re_find": (PURE, None),
    "re_find_all": (PURE, None),
    "re_replace": (PURE, None),
    "re_split": (PURE, None),
    "time_now": (PURE, None),
    "time_monotonic": (PURE, None),
    "time_sleep": (PURE, None),
    "time_iso": (PURE, None),
    "time_today": (PURE, None),
    "env_args": (PURE, None),
    "env_get": (TOOL, "env.read"),
}


def describe(name: str) -> str:
    kind, cap = SPECS[name]
    if kind == PURE:
        return f"native '{name}' (pure)"
    return f"native '{name}' ({kind if kind == TOOL else kind + ' action'}, requires {cap})"
