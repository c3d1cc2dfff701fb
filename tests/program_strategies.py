"""Hypothesis strategies that write valid, terminating Sense programs across the grammar.

In the spirit of hypothesmith: programs are built statement by statement from a context that
knows which names are bound and with what kind of value, so most programs run far instead of
dying at the first NameError; a few ill-typed operations are mixed in on purpose so error paths
are exercised too. Every loop is bounded (counters, ranges, literal arrays), no function can call
itself, and nothing generated touches a deliberate difference of spec section 21 (bools inside
arrays, policy below the top level, break/continue across bodies, approvals, recursion depth,
calls into functions from action and tool bodies), so the reference interpreter and this VM must
agree on every program: same stdout, same exit status, same error text.
"""

from __future__ import annotations

from hypothesis import strategies as st

KINDS = ("int", "str", "arr", "bool", "float")
_WORDS = ["a", "b", "xy", "hello", "Sense", "", " ", "42", "ok!"]


class Ctx:
    """What the statement being generated may use: bound names by kind, callables, loop depth."""

    def __init__(self):
        self.vars: dict[str, str] = {}
        self.functions: list[tuple[str, int]] = []      # (name, arity); each returns an Int
        self.tools: list[str] = []                      # Int -> Int
        self.actions: list[tuple[str, str, bool]] = []  # (name, capability, reversible)
        self.prepared: list[str] = []                   # variables holding prepared actions
        self.counter = 0
        self.loop = 0
        self.in_function = False
        self.in_body = False                            # an action or tool body: no user calls
        self.depth = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def names(self, kind: str) -> list[str]:
        return sorted(n for n, k in self.vars.items() if k == kind)


# ----------------------------------------------------------------------------- expressions

def expr(draw, ctx: Ctx, kind: str, depth: int = 0) -> str:
    names = ctx.names(kind)
    leaf = depth >= 3 or draw(st.integers(0, 9)) < 4
    if leaf:
        if names and draw(st.booleans()):
            return draw(st.sampled_from(names))
        return literal(draw, kind)
    return draw(st.sampled_from(_BUILDERS[kind]))(draw, ctx, depth + 1)


def literal(draw, kind: str) -> str:
    if kind == "int":
        return str(draw(st.integers(-5, 60)))
    if kind == "float":
        return draw(st.sampled_from(["0.5", "1.25", "2.0", "-3.5", "10.0", "0.1"]))
    if kind == "str":
        return '"' + draw(st.sampled_from(_WORDS)) + '"'
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    items = draw(st.lists(st.integers(-3, 9), max_size=4))
    return "[" + ", ".join(map(str, items)) + "]"


def _int_binary(draw, ctx, d):
    op = draw(st.sampled_from(["+", "-", "*", "%"]))
    right = expr(draw, ctx, "int", d)
    if op == "%":
        right = draw(st.sampled_from(["3", "7", "-4", right]))     # sometimes % 0
    return f"({expr(draw, ctx, 'int', d)} {op} {right})"


def _int_len(draw, ctx, d):
    return f"len({expr(draw, ctx, draw(st.sampled_from(['str', 'arr'])), d)})"


def _int_call(draw, ctx, d):
    if ctx.in_body:
        return _int_binary(draw, ctx, d)
    callables = [(n, a) for n, a in ctx.functions] + [(t, 1) for t in ctx.tools]
    if not callables:
        return _int_binary(draw, ctx, d)
    name, arity = draw(st.sampled_from(callables))
    return f"{name}({', '.join(expr(draw, ctx, 'int', d) for _ in range(arity))})"


def _int_index(draw, ctx, d):
    return f"{expr(draw, ctx, 'arr', d)}[{draw(st.integers(-1, 3))}]"


def _int_conv(draw, ctx, d):
    return draw(st.sampled_from([
        f"int({expr(draw, ctx, 'float', d)})", f"int(str({expr(draw, ctx, 'int', d)}))",
        f"-{expr(draw, ctx, 'int', d)}"]))


def _float_div(draw, ctx, d):
    return f"({expr(draw, ctx, 'int', d)} / {draw(st.sampled_from(['2', '4', '-8', '3']))})"


def _float_mix(draw, ctx, d):
    op = draw(st.sampled_from(["+", "-", "*"]))
    return f"({expr(draw, ctx, 'float', d)} {op} {expr(draw, ctx, draw(st.sampled_from(['int', 'float'])), d)})"


def _str_concat(draw, ctx, d):
    return f"({expr(draw, ctx, 'str', d)} + {expr(draw, ctx, 'str', d)})"


def _str_of(draw, ctx, d):
    return f"str({expr(draw, ctx, draw(st.sampled_from(KINDS)), d)})"


def _str_index(draw, ctx, d):
    return f"{expr(draw, ctx, 'str', d)}[{draw(st.integers(0, 2))}]"


def _str_type(draw, ctx, d):
    return f"type_of({expr(draw, ctx, draw(st.sampled_from(KINDS)), d)})"


def _bool_compare(draw, ctx, d):
    kind = draw(st.sampled_from(["int", "int", "str", "float"]))
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="] if kind != "str" else ["==", "!="]))
    return f"({expr(draw, ctx, kind, d)} {op} {expr(draw, ctx, kind, d)})"


def _bool_logic(draw, ctx, d):
    op = draw(st.sampled_from(["and", "or"]))
    return f"({expr(draw, ctx, 'bool', d)} {op} {expr(draw, ctx, 'bool', d)})"


def _bool_not(draw, ctx, d):
    return f"(not {expr(draw, ctx, 'bool', d)})"


def _bool_array_eq(draw, ctx, d):
    return f"({expr(draw, ctx, 'arr', d)} == {expr(draw, ctx, 'arr', d)})"


def _arr_build(draw, ctx, d):
    n = draw(st.integers(0, 3))
    return "[" + ", ".join(expr(draw, ctx, "int", d) for _ in range(n)) + "]"


def _arr_range(draw, ctx, d):
    return f"range({draw(st.integers(0, 5))})"


def _ill_typed(draw, ctx, d):
    # A small share of programs end in a type error; both implementations must agree on it.
    return draw(st.sampled_from([f"({expr(draw, ctx, 'int', d)} + {expr(draw, ctx, 'str', d)})",
                                 f"(-{expr(draw, ctx, 'str', d)})",
                                 f"len({expr(draw, ctx, 'int', d)})"]))


_BUILDERS = {
    "int": [_int_binary, _int_binary, _int_len, _int_call, _int_call, _int_index, _int_conv],
    "float": [_float_div, _float_mix],
    "str": [_str_concat, _str_of, _str_index, _str_type],
    "bool": [_bool_compare, _bool_compare, _bool_logic, _bool_not, _bool_array_eq],
    "arr": [_arr_build, _arr_range],
}


# ----------------------------------------------------------------------------- statements

def block(draw, ctx: Ctx, indent: int, n_max: int = 4) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, n_max))):
        lines += statement(draw, ctx, indent)
    return lines


def statement(draw, ctx: Ctx, indent: int) -> list[str]:
    pad = "    " * indent
    choices = ["assign", "assign", "print", "print", "if", "push"]
    if ctx.depth < 2:
        choices += ["while", "for"]
    if ctx.loop:
        choices += ["break", "continue"]
    if ctx.in_function:
        choices += ["return", "local"]
    if not ctx.in_body and ctx.prepared:
        choices += ["lifecycle"]
    if draw(st.integers(0, 30)) == 0:
        choices += ["ill_typed"]
    what = draw(st.sampled_from(choices))
    if what == "assign":
        kind = draw(st.sampled_from(KINDS))
        existing = ctx.names(kind)
        name = draw(st.sampled_from(existing)) if existing and draw(st.booleans()) else ctx.fresh("v")
        value = expr(draw, ctx, kind)
        ctx.vars[name] = kind
        if draw(st.integers(0, 4)) == 0 and kind in ("int", "str"):
            return [f"{pad}{name}: {'Int' if kind == 'int' else 'String'} = {value}"]
        return [f"{pad}{name} = {value}"]
    if what == "local":
        name = ctx.fresh("l")
        kind = draw(st.sampled_from(KINDS))
        line = f"{pad}local {name} = {expr(draw, ctx, kind)}"
        ctx.vars[name] = kind
        return [line]
    if what == "print":
        n = draw(st.integers(1, 3))
        return [f"{pad}print({', '.join(expr(draw, ctx, draw(st.sampled_from(KINDS))) for _ in range(n))})"]
    if what == "push":
        arrays = ctx.names("arr")
        if not arrays:
            return [f"{pad}print({expr(draw, ctx, 'arr')})"]
        return [f"{pad}push({draw(st.sampled_from(arrays))}, {expr(draw, ctx, 'int')})"]
    if what == "ill_typed":
        return [f"{pad}print({_ill_typed(draw, ctx, 1)})"]
    if what == "break":
        return [f"{pad}if {expr(draw, ctx, 'bool')}:", f"{pad}    break"]
    if what == "continue":
        return [f"{pad}if {expr(draw, ctx, 'bool')}:", f"{pad}    continue"]
    if what == "return":
        return [f"{pad}return {expr(draw, ctx, 'int')}"]
    if what == "lifecycle":
        p = draw(st.sampled_from(ctx.prepared))
        method = draw(st.sampled_from(["verify", "commit", "rollback", "state"]))
        if method == "state":
            return [f"{pad}print({p}.state)"]
        return [f"{pad}{p}.{method}()"]
    ctx.depth += 1
    try:
        return _compound(draw, ctx, what, pad, indent)
    finally:
        ctx.depth -= 1


def _compound(draw, ctx: Ctx, what: str, pad: str, indent: int) -> list[str]:
    # Names bound inside a block may be unbound after it (block scopes): forget them.
    saved = dict(ctx.vars)
    try:
        if what == "if":
            lines = [f"{pad}if {expr(draw, ctx, 'bool')}:"] + block(draw, ctx, indent + 1)
            ctx.vars = dict(saved)
            if draw(st.booleans()):
                lines += [f"{pad}else if {expr(draw, ctx, 'bool')}:"] + block(draw, ctx, indent + 1)
                ctx.vars = dict(saved)
            if draw(st.booleans()):
                lines += [f"{pad}else:"] + block(draw, ctx, indent + 1)
            return lines
        if what == "while":
            counter = ctx.fresh("c")
            limit = draw(st.integers(0, 4))
            ctx.vars[counter] = "int_counter"          # never assigned by generated code
            ctx.loop += 1
            body = block(draw, ctx, indent + 1)
            ctx.loop -= 1
            return [f"{pad}{counter} = 0", f"{pad}while {counter} < {limit}:",
                    f"{pad}    {counter} = {counter} + 1"] + body
        # for
        var = ctx.fresh("i")
        source = draw(st.sampled_from([f"range({draw(st.integers(0, 4))})",
                                       literal(draw, "arr"), '"' + draw(st.sampled_from(_WORDS)) + '"']))
        ctx.vars[var] = "str" if source.startswith('"') else "int"
        ctx.loop += 1
        body = block(draw, ctx, indent + 1)
        ctx.loop -= 1
        return [f"{pad}for {var} in {source}:"] + body
    finally:
        ctx.vars = saved


def function(draw, ctx: Ctx) -> list[str]:
    name = ctx.fresh("f")
    params = [ctx.fresh("p") for _ in range(draw(st.integers(0, 2)))]
    saved = dict(ctx.vars)
    for p in params:
        ctx.vars[p] = "int"
    ctx.in_function = True
    body = block(draw, ctx, 1)
    ctx.in_function = False
    ctx.vars = saved
    typed = draw(st.booleans())
    head = ", ".join(f"{p}: Int" if typed else p for p in params)
    lines = [f"def {name}({head}):"] + body + [f"    return {expr(draw, ctx, 'int')}"]
    ctx.functions.append((name, len(params)))
    return lines


def action(draw, ctx: Ctx) -> list[str]:
    name = ctx.fresh("act")
    cap = draw(st.sampled_from(["mail.send", "db.write", "fs.delete"]))
    reversible = draw(st.booleans())
    saved = dict(ctx.vars)
    ctx.vars = {"n": "int"}
    ctx.in_body = True
    body = block(draw, ctx, 1, n_max=2)
    ctx.in_body = False
    ctx.vars = saved
    kind = "reversible" if reversible else "irreversible"
    lines = [f"{kind} action {name}(n: Int) requires {cap}:"] + body
    if reversible:
        lines += ["rollback:", f'    print("undo {name}", n)']
    ctx.actions.append((name, cap, reversible))
    return lines


def tool(draw, ctx: Ctx) -> list[str]:
    name = ctx.fresh("t")
    cap = draw(st.sampled_from(["calc.run", "db.write", "net.get"]))
    ctx.tools.append(name)
    return [f'tool {name}(x: Int) returns Int requires {cap} "computes":',
            f"    print(\"{name}\", x)", f"    return x * 2 + {draw(st.integers(0, 5))}"]


def prepare(draw, ctx: Ctx) -> list[str]:
    name, _, _ = draw(st.sampled_from(ctx.actions))
    var = ctx.fresh("a")
    ctx.prepared.append(var)
    return [f"{var} = {name}({expr(draw, ctx, 'int')})"]


@st.composite
def programs(draw) -> str:
    """A whole program: declarations, top-level policy and statements, sometimes the audit log."""
    ctx = Ctx()
    lines: list[str] = []
    for _ in range(draw(st.integers(3, 12))):
        what = draw(st.sampled_from(["stmt", "stmt", "stmt", "def", "action", "tool", "prepare",
                                     "policy", "test"]))
        if what == "def":
            lines += function(draw, ctx)
        elif what == "action":
            lines += action(draw, ctx)
        elif what == "tool":
            lines += tool(draw, ctx)
        elif what == "prepare" and ctx.actions:
            lines += prepare(draw, ctx)
        elif what == "policy":
            rules = draw(st.lists(st.tuples(st.sampled_from(["allow", "deny"]), st.sampled_from(
                ["mail.send", "db.write", "fs.delete", "calc.run", "net.get"])), min_size=1,
                max_size=3))
            lines += ["policy:"] + [f"    {effect} {cap}" for effect, cap in rules]
        elif what == "test":
            saved = dict(ctx.vars)
            lines += [f'test "t{ctx.fresh("")}":'] + block(draw, ctx, 1, n_max=3)
            ctx.vars = saved
        else:
            lines += statement(draw, ctx, 0)
    # Show the final state: every top-level binding, and often the audit log.
    shown = sorted(n for n, k in ctx.vars.items() if k in KINDS)
    if shown:
        lines.append(f"print({', '.join(shown)})")
    for var in ctx.prepared:
        lines.append(f"print({var}.state)")
    if draw(st.booleans()):
        lines += ["for e in audit_log():", "    print(e)"]
    return "\n".join(lines) + "\n"
