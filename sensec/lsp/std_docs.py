"""The ``std.`` modules as the language server shows them: read from the library's own source.

Hover, completion and go-to-definition for ``import std.fs`` and ``fs.read_text`` need each
module's members with a signature and a line of documentation. They are taken from the
installed ``stdlib/*.sns`` files themselves (their top-level functions, tools, actions and
constants, and the comment block above each), so the editor can never describe a library other
than the one the VM runs. The rows go into ``sensevm.base.builtins.STD_MODULES``, the table the
features read.
"""

from __future__ import annotations

import os

from sensevm.base import builtins as table
from sensevm.base.stdlib_dir import modules, stdlib_dir

from .. import nodes as n


def _comment_above(lines: list, line: int) -> str:
    """The comment block ending just above source line ``line`` (1-based), as one line."""
    out = []
    k = line - 2
    while k >= 0 and lines[k].lstrip().startswith("#"):
        out.append(lines[k].lstrip()[1:].strip())
        k -= 1
    return " ".join(reversed(out))


def _header(lines: list) -> str:
    """The module's first comment block, as one line."""
    out = []
    for text in lines:
        if not text.startswith("#"):
            break
        out.append(text[1:].strip())
    return " ".join(out)


def _params(params) -> str:
    return ", ".join(p.name if p.type is None else f"{p.name}: {p.type.text}" for p in params)


def _member(stmt, lines: list):
    doc = _comment_above(lines, stmt.pos.line)
    if isinstance(stmt, n.FunctionDef):
        returns = stmt.returns.text if stmt.returns is not None else "Any"
        return table.BuiltinDoc(stmt.name, _params(stmt.params), len(stmt.params), returns, doc)
    if isinstance(stmt, n.ToolDef):
        returns = stmt.returns.text if stmt.returns is not None else "Any"
        where = f"tool, requires {stmt.capability}" if stmt.capability else "tool"
        return table.BuiltinDoc(stmt.name, _params(stmt.params), len(stmt.params), returns,
                                f"{doc} ({where}; checked and audited at every call)".strip())
    if isinstance(stmt, n.ActionDef):
        what = f"{stmt.kind} action" + (f", requires {stmt.capability}" if stmt.capability
                                        else "")
        return table.BuiltinDoc(stmt.name, _params(stmt.params), len(stmt.params), "Action",
                                f"{doc} ({what}: prepared by the call, then .verify() and "
                                ".commit())".strip())
    if (isinstance(stmt, n.ExprStmt) and isinstance(stmt.expr, n.Assign)
            and isinstance(stmt.expr.target, n.Name)):
        return table.MemberDoc(stmt.expr.target.name, None, "Number", doc)
    return None


def load(name: str):
    """The StdModule for ``std.NAME`` from its source, or None if it cannot be read."""
    from ..grammar import parse
    path = os.path.join(stdlib_dir(), name + ".sns")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        tree = parse(text, path)
    except (OSError, UnicodeDecodeError, Exception):        # (a library that fails to parse
        return None                                         # is the build's problem, not here)
    lines = text.split("\n")
    members, seen = [], set()
    for stmt in tree.body:
        member = _member(stmt, lines)
        if member is not None and member.name not in seen:
            seen.add(member.name)
            members.append(member)
    return table.StdModule(f"std.{name}", _header(lines), tuple(members), path)


def fill() -> dict:
    """Fill STD_MODULES from the library once (the first caller does it); return it."""
    if not table.STD_MODULES:
        for name in modules():
            mod = load(name)
            if mod is not None:
                table.STD_MODULES[mod.name] = mod
    return table.STD_MODULES
