"""The answers to an editor's requests (hover, definition, references, completion, outline, folds, formatting), from a Workspace's analyses, as lsprotocol values.

Every function here answers for any text, parsed or not: a position with nothing to say gives
None or an empty list, never an error. Columns arrive and leave in UTF-16 code units (the
protocol's default) and are code points inside.
"""

from __future__ import annotations

import os
import re

from lsprotocol import types as t

from sensevm.base import builtins as table
from sensevm.base.keywords import KEYWORDS

from .. import nodes as n
from .index import Analysis, Span
from .workspace import Workspace


# ------------------------------------------------------------------------------ positions

def _utf16(line: str, col: int) -> int:
    if line.isascii():
        return col
    return len(line[:col].encode("utf-16-le")) // 2


def code_point_col(line: str, utf16_col: int) -> int:
    """The code-point column of a UTF-16 column of ``line``."""
    if line.isascii():
        return utf16_col
    units = 0
    for i, ch in enumerate(line):
        if units >= utf16_col:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def _line(lines, i: int) -> str:
    return lines[i] if 0 <= i < len(lines) else ""


def to_range(lines, span: Span) -> t.Range:
    return t.Range(t.Position(span.line, _utf16(_line(lines, span.line), span.col)),
                   t.Position(span.end_line, _utf16(_line(lines, span.end_line), span.end_col)))


def uri_of(path: str) -> str:
    from pygls.uris import from_fs_path
    return from_fs_path(path)


def _location(ws: Workspace, path: str, span: Span) -> t.Location:
    a = ws.cached(path) or ws.analysis(path)
    lines = a.lines if a is not None else []
    return t.Location(uri_of(path), to_range(lines, span))


# ------------------------------------------------------------------------------ describing

def _params(params) -> str:
    return ", ".join(p.name + (f": {p.type.text}" if p.type is not None else "")
                     for p in params)


def signature(sym) -> str:
    """The declaration's header as written (normalised), for hover and completion details."""
    node = sym.node
    if sym.kind == "function":
        ret = f" -> {node.returns.text}" if node.returns is not None else ""
        return f"def {node.name}({_params(node.params)}){ret}"
    if sym.kind == "action":
        reqs = [r for r in (node.capability, "approval" if node.approval else None) if r]
        req = f" requires {', '.join(reqs)}" if reqs else ""
        return f"{node.kind} action {node.name}({_params(node.params)}){req}"
    if sym.kind == "tool":
        head = ("async " if node.is_async else "") + ("trusted " if node.trusted else "")
        ret = f" returns {node.returns.text}" if node.returns is not None else ""
        req = f" requires {node.capability}" if node.capability else ""
        desc = f' "{node.description}"' if node.description is not None else ""
        return f"{head}tool {node.name}({_params(node.params)}){ret}{req}{desc}"
    if sym.kind == "agent":
        return ("async " if node.is_async else "") + f"agent {node.name}"
    if sym.kind == "memory":
        return ("persistent " if node.persistent else "") + f"memory {node.name}"
    if sym.kind == "model":
        return f"model {node.name}"
    if sym.kind == "module":
        return f"import {sym.target.ref.text}" + (f" as {sym.name}" if sym.name != sym.target.binding else "")
    if sym.kind == "parameter" and node.type is not None:
        return f"{sym.name}: {node.type.text}"
    if sym.type:
        return f"{sym.name}: {sym.type}"
    return sym.name


def _facts(sym) -> list:
    node = sym.node
    if sym.kind == "action":
        return [f"kind: {node.kind}",
                f"capability: {node.capability or 'none'}",
                f"approval: {'required before commit' if node.approval else 'not required'}",
                "rollback: " + ("declared" if node.rollback is not None else "none")]
    if sym.kind == "tool":
        return [f"capability: {node.capability or 'none'}",
                f"description: {node.description if node.description is not None else 'none'}",
                "trusted: " + ("yes (its results are records)" if node.trusted
                               else "no (its results are untrusted content)")]
    if sym.kind == "agent":
        return ["async: yes" if node.is_async else "async: no"]
    if sym.kind == "memory" and node.hint:
        return [("path" if node.persistent else "hint") + f": {node.hint}"]
    return []


_KIND_WORD = {"function": "function", "action": "action", "tool": "tool", "agent": "agent",
              "variable": "variable", "parameter": "parameter", "module": "module",
              "memory": "memory", "model": "model", "imported": "imported name",
              "session": "session handle"}


def _markdown(code: str, facts=(), doc=None, note=None) -> t.MarkupContent:
    parts = [f"```sense\n{code}\n```"]
    if note:
        parts.append(note)
    if facts:
        parts.append("\n".join(f"- {f}" for f in facts))
    if doc:
        parts.append(doc.strip())
    return t.MarkupContent(t.MarkupKind.Markdown, "\n\n".join(parts))


def _builtin_markdown(b) -> t.MarkupContent:
    note = "builtin" + (" (retired)" if b.retired else "")
    facts = [f"labels: {', '.join(b.labels)}"] if b.labels else ()
    return _markdown(b.signature, facts, b.doc, note)


def _member_markdown(type_name: str, m) -> t.MarkupContent:
    return _markdown(m.signature, (), m.doc, f"{'method' if m.is_method else 'member'} of {type_name}")


def _std_markdown(mod) -> t.MarkupContent:
    names = ", ".join(m.name for m in mod.members)
    return _markdown(f"import {mod.name}", [f"members: {names}"] if names else (), mod.doc,
                     "standard library module")


def describe_symbol(ws: Workspace, sym) -> t.MarkupContent:
    if sym.kind == "imported":
        target = resolve_import_name(ws, sym)
        if target is not None and target is not sym:
            return describe_symbol(ws, target)
        imp, name = sym.target
        return _markdown(f"from {imp.ref.text} import {name}", (), None, "imported name")
    if sym.kind == "module":
        imp = sym.target
        if imp.std:
            mod = table.STD_MODULES.get(imp.std)
            if mod is not None:
                return _std_markdown(mod)
        where = os.path.relpath(imp.path) if imp.path else imp.ref.text
        return _markdown(signature(sym), (), None, f"module `{where}`")
    note = _KIND_WORD.get(sym.kind, sym.kind)
    return _markdown(signature(sym), _facts(sym), sym.doc, note)


# ------------------------------------------------------------------------------ resolving

def module_analysis(ws: Workspace, imp) -> Analysis | None:
    if imp is None or imp.path is None:
        return None
    return ws.index(imp.path) if ws.cached(imp.path) else ws.analysis(imp.path)


def resolve_import_name(ws: Workspace, sym):
    imp, name = sym.target
    a = module_analysis(ws, imp)
    if a is None:
        return None
    return a.module_scope.names.get(name)


def _receiver(ws: Workspace, a: Analysis, obj, scope):
    """What the expression before a '.' is: ('module', Import), ('type', name) or None."""
    if obj.__class__.__name__ == "Import":
        return ("module", obj)
    if isinstance(obj, n.Name):
        sym = scope.lookup(obj.name) if scope is not None else None
        if sym is None:
            return None
        if sym.kind == "imported":
            target = resolve_import_name(ws, sym)
            sym = target if target is not None else sym
        if sym.kind == "module":
            return ("module", sym.target)
        if sym.kind == "agent":
            return ("agent", sym)
        if sym.type:
            return ("type", sym.type)
    return None


def _member_target(ws, a, occ):
    """What a member occurrence names: a Symbol, a (type, MemberDoc) or a std member."""
    recv = _receiver(ws, a, occ.obj, occ.scope)
    if recv is None:
        return None
    kind, what = recv
    if kind == "module":
        if what.std:
            mod = table.STD_MODULES.get(what.std)
            for m in (mod.members if mod else ()):
                if m.name == occ.name:
                    return ("std", what.std, m)
            return None
        ma = module_analysis(ws, what)
        return ma.module_scope.names.get(occ.name) if ma is not None else None
    if kind == "agent":
        for m in table.MEMBERS["Agent"]:
            if m.name == occ.name:
                return ("Agent", m)
        inner = what.body_scope
        return inner.names.get(occ.name) if inner is not None else None
    for m in table.MEMBERS.get(what, ()):
        if m.name == occ.name:
            return (what, m)
    return None


def _at(ws: Workspace, path: str, line: int, utf16_col: int):
    a = ws.index(path)
    if a is None:
        return None, None
    col = code_point_col(_line(a.lines, line), utf16_col)
    return a, a.occurrence_at(line, col)


# ------------------------------------------------------------------------------ requests

def hover(ws: Workspace, path: str, line: int, col: int):
    a, occ = _at(ws, path, line, col)
    if occ is None:
        return None
    contents = None
    if occ.what in ("name", "decl"):
        if occ.symbol is not None:
            contents = describe_symbol(ws, occ.symbol)
        elif occ.name in table.BY_NAME:
            contents = _builtin_markdown(table.BY_NAME[occ.name])
    elif occ.what == "member":
        target = _member_target(ws, a, occ)
        if target is None:
            pass
        elif isinstance(target, tuple) and target[0] == "std":
            contents = _markdown(target[2].signature, (), target[2].doc, f"member of {target[1]}")
        elif isinstance(target, tuple):
            contents = _member_markdown(*target)
        else:
            contents = describe_symbol(ws, target)
    elif occ.what == "module":
        imp = occ.obj
        if imp.std and imp.std in table.STD_MODULES:
            contents = _std_markdown(table.STD_MODULES[imp.std])
        elif imp.path:
            exists = ws.text_of(imp.path) is not None
            contents = _markdown(f"import {imp.ref.text}", (), None,
                                 f"module `{os.path.relpath(imp.path)}`"
                                 + ("" if exists else " (not found)"))
    elif occ.what == "capability":
        users = sorted({f"{s.kind} {s.name}" for s in a.all_symbols
                        if s.kind in ("action", "tool") and s.node.capability == occ.name})
        rules = sorted({f"{r.effect} (line {r.pos.line})" for s in _policies(a)
                        for r in s.rules if r.capability == occ.name})
        facts = ([f"required by: {', '.join(users)}"] if users else []) + \
                ([f"policy here: {', '.join(rules)}"] if rules else [])
        contents = _markdown(occ.name, facts, None, "capability")
    if contents is None:
        return None
    return t.Hover(contents=contents, range=to_range(a.lines, occ.span))


def _policies(a: Analysis):
    out, stack = [], list(a.symbols)
    while stack:
        s = stack.pop()
        if s.kind == "policy":
            out.append(s.node)
        stack.extend(s.children)
    return out


def _symbol_location(ws, sym):
    if sym.kind == "imported":
        target = resolve_import_name(ws, sym)
        if target is not None:
            return _location(ws, target.path, target.span)
    return _location(ws, sym.path, sym.span)


def _module_location(ws, imp):
    if imp.std:
        mod = table.STD_MODULES.get(imp.std)
        if mod is None or not mod.source:
            return None
        return t.Location(uri_of(mod.source), t.Range(t.Position(0, 0), t.Position(0, 0)))
    if imp.path is None or ws.text_of(imp.path) is None:
        return None
    return t.Location(uri_of(imp.path), t.Range(t.Position(0, 0), t.Position(0, 0)))


def definition(ws: Workspace, path: str, line: int, col: int):
    a, occ = _at(ws, path, line, col)
    if occ is None:
        return None
    if occ.what in ("name", "decl") and occ.symbol is not None:
        sym = occ.symbol
        if sym.kind == "module" and occ.what == "decl":
            return _module_location(ws, sym.target)
        if sym.kind == "imported" and occ.what == "decl" and occ.obj is None:
            return _location(ws, sym.path, sym.span)
        return _symbol_location(ws, sym)
    if occ.what == "module":
        return _module_location(ws, occ.obj)
    if occ.what == "member":
        target = _member_target(ws, a, occ)
        if target is not None and not isinstance(target, tuple):
            return _symbol_location(ws, target)
        if isinstance(target, tuple) and target[0] == "std":
            return _module_location(ws, _StdRef(target[1]))
    return None


class _StdRef:
    def __init__(self, name):
        self.std, self.path = name, None


def references(ws: Workspace, path: str, line: int, col: int, include_declaration=True):
    a, occ = _at(ws, path, line, col)
    if occ is None:
        return []
    sym = occ.symbol
    if occ.what == "member":
        target = _member_target(ws, a, occ)
        sym = target if target is not None and not isinstance(target, tuple) else None
    elif sym is not None and sym.kind == "imported":
        sym = resolve_import_name(ws, sym) or sym
    if sym is None:
        return []
    spans = [(sym.path, s) for s in sym.refs if include_declaration or s != sym.span]
    if sym.scope is not None and sym.scope.kind == "module":
        spans.extend(_uses_elsewhere(ws, sym))
    seen, out = set(), []
    for p, s in spans:
        if (p, s) not in seen:
            seen.add((p, s))
            out.append(_location(ws, p, s))
    return out


def _uses_elsewhere(ws: Workspace, sym):
    """A top-level name's uses in the files that import its module: the open ones (as the
    editor has them) and the other .sns files under the workspace folders (as saved; only
    those whose text names it are analysed)."""
    out = []
    real = os.path.realpath(sym.path)
    opened = list(ws.open)
    others = [p for p in ws.workspace_files() if p not in ws.open]
    for p in opened + others:
        if p == sym.path or os.path.realpath(p) == real:
            continue
        if p in ws.open:
            b = ws.index(p)
        else:
            text = ws.text_of(p)
            b = ws.analysis(p, text) if text is not None and sym.name in text else None
        if b is None:
            continue
        for occ in b.occurrences:
            if occ.name != sym.name:
                continue
            if occ.what == "member" and isinstance(occ.obj, n.Name):
                recv = _receiver(ws, b, occ.obj, occ.scope)
                if recv and recv[0] == "module" and recv[1].path and \
                        os.path.realpath(recv[1].path) == real:
                    out.append((p, occ.span))
            elif occ.what == "member" and occ.obj.__class__.__name__ == "Import":
                if occ.obj.path and os.path.realpath(occ.obj.path) == real:
                    out.append((p, occ.span))
            elif occ.symbol is not None and occ.symbol.kind == "imported":
                imp, name = occ.symbol.target
                if imp.path and os.path.realpath(imp.path) == real and name == sym.name:
                    out.append((p, occ.span))
    return out


# ------------------------------------------------------------------------------ completion

_SYMBOL_KIND = {"function": t.CompletionItemKind.Function, "action": t.CompletionItemKind.Event,
                "tool": t.CompletionItemKind.Method, "agent": t.CompletionItemKind.Class,
                "variable": t.CompletionItemKind.Variable,
                "parameter": t.CompletionItemKind.Variable,
                "module": t.CompletionItemKind.Module, "memory": t.CompletionItemKind.Struct,
                "model": t.CompletionItemKind.Struct, "imported": t.CompletionItemKind.Reference,
                "session": t.CompletionItemKind.Variable}

_KEYWORD_ITEMS = [t.CompletionItem(k, kind=t.CompletionItemKind.Keyword) for k in KEYWORDS]
_BUILTIN_ITEMS = [t.CompletionItem(b.name, kind=t.CompletionItemKind.Function,
                                   detail=b.signature, documentation=b.doc)
                  for b in table.BUILTINS if not b.retired]

_REQUIRES = re.compile(r"\brequires\s+(?:[\w.]+\s*,\s*)*([\w.]*)$")
_RULE = re.compile(r"^\s*(?:policy\s*:\s*)?(allow|deny)\s+([\w.]*)$")
_MEMBER = re.compile(r"((?:[^\W\d]\w*\.)*[^\W\d]\w*)\.(\w*)$")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:python\s+)?([\w.]*)$")
_WORD_BEFORE = re.compile(r"\w*$")


def _in_string_or_comment(prefix: str) -> bool:
    quote = False
    i = 0
    while i < len(prefix):
        ch = prefix[i]
        if ch == "\\" and quote:
            i += 2
            continue
        if ch == '"':
            quote = not quote
        elif ch == "#" and not quote:
            return True
        i += 1
    return quote


def _in_policy_block(lines, line: int) -> bool:
    """Whether ``line`` is a rule line of a ``policy:`` block (the nearest less indented
    line above it is ``policy:``)."""
    text = _line(lines, line)
    indent = len(text) - len(text.lstrip(" "))
    for i in range(line - 1, max(line - 200, -1), -1):
        above = lines[i]
        if not above.strip() or above.lstrip().startswith("#"):
            continue
        depth = len(above) - len(above.lstrip(" "))
        if depth < indent or (depth == indent and not text.strip()):
            return above.strip() == "policy:"
        if depth == indent and not re.match(r"\s*(allow|deny)\b", above):
            return False
    return False


def _items_for_symbols(symbols) -> list:
    return [t.CompletionItem(s.name, kind=_SYMBOL_KIND.get(s.kind, t.CompletionItemKind.Text),
                             detail=signature(s) if s.node is not None else None)
            for s in symbols]


def _member_items(ws, a, chain: str, scope) -> list:
    head, *rest = chain.split(".")
    if head == "std" and not rest or chain.startswith("std."):
        prefix = chain + "."
        names = sorted({m[len(prefix):].split(".")[0] for m in table.STD_MODULES
                        if m.startswith(prefix)})
        items = [t.CompletionItem(x, kind=t.CompletionItemKind.Module) for x in names]
        mod = table.STD_MODULES.get(chain)
        if mod is not None:
            items += [t.CompletionItem(m.name, kind=t.CompletionItemKind.Function,
                                       detail=m.signature, documentation=m.doc)
                      for m in mod.members]
        if items:
            return items
    if rest:
        return []          # a member of a member: its type is not known
    recv = _receiver(ws, a, n.Name(None, head), scope)
    if recv is None:
        sym = scope.lookup(head)
        if sym is None and head not in table.BY_NAME:
            # Not a name this file binds: perhaps one typed a moment ago; every method.
            pass
        return [t.CompletionItem(m.name, kind=t.CompletionItemKind.Method, detail=m.signature,
                                 documentation=f"{type_name}: {m.doc}")
                for type_name, members in table.MEMBERS.items() for m in members
                if m.is_method]
    kind, what = recv
    if kind == "module":
        if what.std:
            mod = table.STD_MODULES.get(what.std)
            return [t.CompletionItem(m.name, kind=t.CompletionItemKind.Function,
                                     detail=m.signature, documentation=m.doc)
                    for m in (mod.members if mod else ())]
        ma = module_analysis(ws, what)
        return _items_for_symbols(ma.module_scope.names.values()) if ma is not None else []
    type_name = "Agent" if kind == "agent" else what
    items = [t.CompletionItem(m.name, kind=t.CompletionItemKind.Method if m.is_method
                              else t.CompletionItemKind.Field, detail=m.signature,
                              documentation=m.doc)
             for m in table.MEMBERS.get(type_name, ())]
    if kind == "agent" and what.body_scope is not None:
        items += _items_for_symbols(what.body_scope.names.values())
    return items


def _module_items(ws, path: str, typed: str) -> list:
    """Modules ``import`` could name here: .sns files beside the file (dotted), std. ones."""
    items = [t.CompletionItem(name, kind=t.CompletionItemKind.Module, documentation=m.doc)
             for name, m in table.STD_MODULES.items()]
    base = os.path.dirname(os.path.abspath(path))
    sub = typed.rsplit(".", 1)[0].replace(".", os.sep) if "." in typed else ""
    try:
        entries = sorted(os.listdir(os.path.join(base, sub)))
    except OSError:
        entries = []
    prefix = typed.rsplit(".", 1)[0] + "." if "." in typed else ""
    for e in entries:
        full = os.path.join(base, sub, e)
        if e.endswith(".sns") and os.path.join(base, sub, e) != os.path.abspath(path):
            items.append(t.CompletionItem(prefix + e[:-4], kind=t.CompletionItemKind.File))
        elif os.path.isdir(full) and not e.startswith("."):
            items.append(t.CompletionItem(prefix + e, kind=t.CompletionItemKind.Folder))
    return items


def completion(ws: Workspace, path: str, text: str, line: int, col: int):
    """Completions at (line, col) of ``text`` (the editor's current text): the context is
    read from the text itself, names from the latest index (which may be a few edits old:
    analysing a large file takes longer than a keystroke)."""
    ws = _NoParse(ws)
    lines = text.split("\n")
    current = _line(lines, line)
    col = code_point_col(current, col)
    prefix = current[:col]
    if _in_string_or_comment(prefix):
        return t.CompletionList(is_incomplete=False, items=[])
    a = ws.index(path)
    m = _REQUIRES.search(prefix)
    if m:
        items = [t.CompletionItem(c, kind=t.CompletionItemKind.EnumMember)
                 for c in sorted(ws.capabilities())]
        items.append(t.CompletionItem("approval", kind=t.CompletionItemKind.Keyword))
        return t.CompletionList(is_incomplete=False, items=items)
    m = _RULE.match(prefix)
    if m and (prefix.lstrip().startswith("policy") or _in_policy_block(lines, line)):
        return t.CompletionList(is_incomplete=False, items=[
            t.CompletionItem(c, kind=t.CompletionItemKind.EnumMember)
            for c in sorted(ws.capabilities())])
    if _in_policy_block(lines, line) and re.fullmatch(r"\s*\w*", prefix):
        return t.CompletionList(is_incomplete=False, items=[
            t.CompletionItem(w, kind=t.CompletionItemKind.Keyword) for w in ("allow", "deny")])
    m = _IMPORT.match(prefix)
    if m:
        return t.CompletionList(is_incomplete=False, items=_module_items(ws, path, m.group(1)))
    scope = a.scope_at(line) if a is not None else None
    m = _MEMBER.search(prefix)
    if m:
        if a is None:
            return t.CompletionList(is_incomplete=False, items=[])
        return t.CompletionList(is_incomplete=False,
                                items=_member_items(ws, a, m.group(1), scope))
    if prefix.rstrip().endswith(".") or re.search(r"\d\.?\w*$", prefix) and \
            not re.search(r"[^\W\d]\w*$", prefix):
        return t.CompletionList(is_incomplete=False, items=[])
    items = list(_KEYWORD_ITEMS) + list(_BUILTIN_ITEMS)
    seen = set(KEYWORDS) | {i.label for i in _BUILTIN_ITEMS}
    while scope is not None:
        for sym in scope.names.values():
            if sym.name not in seen:
                seen.add(sym.name)
                items.append(_item_of(a, sym))
        scope = scope.parent
    return t.CompletionList(is_incomplete=False, items=items)


class _NoParse:
    """A Workspace that answers from what is analysed already and never parses (completion
    runs beside the analysing thread, and must answer at once)."""

    def __init__(self, ws):
        self._ws = ws

    def __getattr__(self, name):
        return getattr(self._ws, name)

    def analysis(self, path, text=None):
        return self._ws.index(path)


def _item_of(a: Analysis, sym):
    # One item per symbol, made once per analysis: a large module has thousands of names,
    # and a completion must answer within a keystroke.
    cache = a.__dict__.setdefault("_items", {})
    item = cache.get(id(sym))
    if item is None:
        item = cache[id(sym)] = t.CompletionItem(
            sym.name, kind=_SYMBOL_KIND.get(sym.kind, t.CompletionItemKind.Text),
            detail=signature(sym) if sym.node is not None else None)
    return item


# ------------------------------------------------------------------------------ outline, folds

_OUTLINE_KIND = {"function": t.SymbolKind.Function, "action": t.SymbolKind.Event,
                 "tool": t.SymbolKind.Method, "agent": t.SymbolKind.Class,
                 "policy": t.SymbolKind.Namespace, "test": t.SymbolKind.Module}


def document_symbols(ws: Workspace, path: str) -> list:
    a = ws.index(path)
    if a is None:
        return []

    def make(sym):
        children = [make(c) for c in sym.children if c.kind in _OUTLINE_KIND]
        name = sym.name if sym.kind != "test" else f'test "{sym.name}"'
        detail = signature(sym) if sym.kind in ("function", "action", "tool", "agent") \
            else sym.doc if sym.kind == "policy" else None
        extent = to_range(a.lines, sym.extent)
        sel = to_range(a.lines, sym.span)
        # The protocol wants the name inside the whole (a stale index could break that).
        if (sel.start.line, sel.start.character) < (extent.start.line, extent.start.character) \
                or (sel.end.line, sel.end.character) > (extent.end.line, extent.end.character):
            sel = extent
        return t.DocumentSymbol(name=name or "?", kind=_OUTLINE_KIND[sym.kind], range=extent,
                                selection_range=sel, detail=detail, children=children)

    return [make(s) for s in a.symbols if s.kind in _OUTLINE_KIND]


def folding_ranges(ws: Workspace, path: str) -> list:
    a = ws.index(path)
    if a is None:
        return []
    out = [t.FoldingRange(start_line=s, end_line=e) for s, e in a.folds]
    # Runs of comment lines fold too (a file's header, a block of notes).
    run = None
    for i, text in enumerate(a.lines + [""]):
        if text.lstrip().startswith("#"):
            run = i if run is None else run
            continue
        if run is not None and i - 1 > run:
            out.append(t.FoldingRange(start_line=run, end_line=i - 1,
                                      kind=t.FoldingRangeKind.Comment))
        run = None
    return out


def formatting(text: str, path: str):
    """One edit replacing the whole text by ``sensec fmt``'s form, [] if it is already
    formatted, None if it does not parse (there is nothing to format then)."""
    from sensevm.base.errors import SenseError
    from ..fmt import format_source
    try:
        new = format_source(text, path)
    except SenseError:
        return None
    if new == text:
        return []
    lines = text.split("\n")
    end = t.Position(len(lines) - 1, _utf16(lines[-1], len(lines[-1])))
    return [t.TextEdit(range=t.Range(t.Position(0, 0), end), new_text=new)]
