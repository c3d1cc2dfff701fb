"""Slices, `in` / `not in`, compound assignment and f-strings (EXTENSIONS.md E3) through the
whole toolchain: where their errors are reported, the verifier's checks of their instructions,
Python's slicing on both tiers, their labels, `sensec fmt`, `sensec dis` and highlighting.
(The corpus programs are tests/programs/slices_and_fstrings/.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sensec.fmt import format_source
from sensec.grammar import parse
from sensevm.base.errors import SenseSyntaxError, VerifyError
from sensevm.bytecode.opcodes import Op
from sensevm.bytecode.verify import verify
from sensevm.guard import provenance as PV
from sensevm.runtime import values as V
from test_tiers import _run_source
from test_verify import CONSTANTS, program, rejects

TIERS = ("1", "2")


def run(tmp_path, source, tier="1"):
    out, error, *_ = _run_source(tmp_path, source, tier)
    return out, error


def syntax_error(source):
    with pytest.raises(SenseSyntaxError) as info:
        parse(source, "t.sns")
    return info.value.message, (info.value.pos.line, info.value.pos.col)


# ----------------------------------------------------------------------------- positions

@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("source, message, pos", [
    # inside an f-string, at the expression's own line and column
    ('n = 0\nprint(f"ratio: {10 / n}")\n', "division by zero", (2, 20)),
    ('print(f"a {nobody} b")\n', "undefined variable 'nobody'", (1, 12)),
    ('xs = [1]\ns = f"""one\n  two {xs[0]}\n    {xs[3]}"""\n', "index 3 out of bounds", (4, 8)),
    ('print(f"{1} {[1][0:true]}")\n', "slice bounds must be Int, got Bool", (1, 17)),
    # slices, `in`, compound assignment: at the '[', the operator
    ('s = "abc"\nprint(s[1.5:])\n', "slice bounds must be Int, got Float", (2, 8)),
    ('x = 5\nprint(x[:1])\n', "cannot slice type Int", (2, 8)),
    ('print(1   in   2)\n', "'in' needs an Array, String or Map on the right, got Int", (1, 11)),
    ('print(1 not in nil)\n', "'in' needs an Array, String or Map on the right, got Nil", (1, 9)),
    ('print([1] in "ab")\n', "'in' on a String needs a String on the left, got Array", (1, 11)),
    ('s = "a"\n  \ns  -=  1\n', "'-' requires numeric operands, got String and Int", (3, 4)),
    ('a = [1]\na[3] += 1\n', "index 3 out of bounds", (2, 2)),
    ('y  +=  1\n', "undefined variable 'y'", (1, 1)),
])
def test_run_time_errors_are_positioned(tmp_path, tier, source, message, pos):
    out, error = run(tmp_path, source, tier)
    assert error is not None, out
    kind, text, at, *_ = error
    assert text.endswith(message) and (at.line, at.col) == pos, error


@pytest.mark.parametrize("source, message, pos", [
    ('x = f"total {1 + 2"\n', "unclosed '{' in an f-string -- write '{{' for a brace", (1, 13)),
    ('x = 1\ny = f"a } b"\n', "single '}' in an f-string -- write '}}' for a brace", (2, 9)),
    ('y = f"a {  } b"\n', "empty expression in an f-string's braces -- write '{{}}' for braces",
     (1, 9)),
    ('y = f"{a b}"\n', "expected '}' after the expression in the f-string (got IDENT 'b')",
     (1, 10)),
    ('y = f"""\n  {a +\n  }"""\n', "unexpected token RBRACE '}'", (3, 3)),
    ('y = f"{x ; y}"\n', "semicolons aren't used in Sense \u2014 start a new line instead", (1, 10)),
    ('y = f"{"s"}"\n', 'unclosed \'{\' in an f-string -- an expression in an f"..." string cannot '
                       'hold a "..." string (use f"""...""" around it)', (1, 7)),
    ('y = f"""{1 # c\n}"""\n', "a comment cannot stand inside an f-string's braces", (1, 12)),
    ('y = f"abc\n', "unterminated string literal -- the 'f\"' opened here is never closed "
     "(the file ends at line 2, column 1)", (1, 5)),
    ('f() += 1\n', "invalid assignment target", (1, 5)),
    ('a[1:2] *= 2\n', "invalid assignment target", (1, 8)),
    ('a[1:2] = 2\n', "invalid assignment target", (1, 8)),
    ('x = a[1:2 3]\n', "expected ']' after the slice (got INT '3')", (1, 11)),
    ('x = a[1::2]\n', "unexpected token COLON ':'", (1, 9)),
    ('x = a not b\n', "expected 'in' after 'not' (for 'not in') (got IDENT 'b')", (1, 11)),
])
def test_malformed_forms_are_positioned_syntax_errors(source, message, pos):
    assert syntax_error(source) == (message, pos)


def test_sensec_check_reports_each_malformed_f_string():
    from sensec.grammar import parse_all_errors
    errors = parse_all_errors('a = f"{"\nb = f"}"\nc = f"{}"\nd = f"{x y}"\n', "t.sns")
    assert [(e.pos.line, e.pos.col) for e in errors] == [(1, 7), (2, 7), (3, 7), (4, 10)]


# ----------------------------------------------------------------------------- the grammar

def test_for_keeps_its_in_and_in_parses_inside_the_iterable():
    body = parse('for x in [a in b, c not in d]:\n    print(x)\nfor y in xs:\n    y\n').body
    assert type(body[0]).__name__ == "For" and body[0].var == "x"
    items = body[0].iterable.items
    assert [(i.op, i.left.name, i.right.name) for i in items] == [("in", "a", "b"),
                                                                 ("not in", "c", "d")]
    assert body[1].iterable.name == "xs"


@pytest.mark.parametrize("source, shape", [
    ("a in b == c", "((a in b) == c)"),
    ("a == b in c", "(a == (b in c))"),
    ("a < b in c", "((a < b) in c)"),
    ("a in b < c", "((a in b) < c)"),
    ("a + b in c", "((a + b) in c)"),
    ("not a in b", "((not a) in b)"),
    ("a in b and c not in d", "((a in b) and (c not in d))"),
    ("a not in b not in c", "((a not in b) not in c)"),
    ("x += y = 2", "(x += (y = 2))"),
    ("x = y -= 2", "(x = (y -= 2))"),
])
def test_precedence(source, shape):
    def show(e):
        name = type(e).__name__
        if name in ("Binary", "Logical"):
            return f"({show(e.left)} {e.op} {show(e.right)})"
        if name == "Unary":
            return f"({e.op} {show(e.operand)})"
        if name == "Assign":
            return f"({show(e.target)} = {show(e.value)})"
        if name == "CompoundAssign":
            return f"({show(e.target)} {e.op}= {show(e.value)})"
        if name == "IntLit":
            return str(e.value)
        return e.name
    assert show(parse(source + "\n").body[0].expr) == shape


def test_the_grammar_keeps_its_conflicts():
    from sensec.grammar import EXPECTED_CONFLICTS, Parser
    assert Parser.conflicts() == (len(EXPECTED_CONFLICTS), 0)
    assert Parser.build_messages() == []


# ----------------------------------------------------------------------------- the verifier

@pytest.mark.parametrize("name, items, message", [
    ("slice operand past its bounds", [(Op.LOAD_CONST, 1), (Op.LOAD_NIL,), (Op.LOAD_NIL,),
                                       (Op.SLICE, 4)],
     "SLICE operand 4 is not a set of bounds (0 to 3: 1 lower, 2 upper)"),
    ("slice underflow", [(Op.LOAD_CONST, 1), (Op.LOAD_NIL,), (Op.SLICE, 3)],
     "stack underflow (needs 3, depth 2)"),
    ("contains underflow", [(Op.LOAD_CONST, 1), (Op.CONTAINS,)],
     "stack underflow (needs 2, depth 1)"),
    ("format underflow", [(Op.FORMAT_VALUE,)], "stack underflow (needs 1, depth 0)"),
    ("build_string underflow", [(Op.LOAD_CONST, 1), (Op.BUILD_STRING, 2)],
     "stack underflow (needs 2, depth 1)"),
    ("dup2 underflow", [(Op.LOAD_CONST, 1), (Op.DUP2,)], "stack underflow (needs 2, depth 1)"),
    ("dup2 past max_stack", [(Op.LOAD_CONST, 1), (Op.LOAD_CONST, 1), (Op.DUP2,)],
     "stack depth 4 exceeds max_stack 3"),
])
def test_forged_uses_of_the_new_instructions_are_refused(name, items, message):
    p = program(*items, (Op.POP,), (Op.LOAD_NIL,), (Op.RETURN,), max_stack=3)
    assert rejects(p)[3] == message


def test_dup2_cannot_copy_an_iterator():
    p = program((Op.LOAD_CONST, 1), (Op.GET_ITER,), (Op.LOAD_NIL,), (Op.DUP2,), (Op.POP,),
                (Op.POP,), (Op.POP,), (Op.POP,), (Op.LOAD_NIL,), (Op.RETURN,), max_stack=4)
    assert "iterator" in rejects(p)[3]


@pytest.mark.parametrize("written", [0, 1, 2, 3])
def test_every_slice_operand_verifies_and_runs(written):
    p = program((Op.LOAD_CONST, 1), (Op.LOAD_CONST, 0), (Op.LOAD_NIL,), (Op.SLICE, written),
                (Op.POP,), (Op.LOAD_NIL,), (Op.RETURN,), max_stack=3)
    assert verify(p)
    assert CONSTANTS[1] == "a test"
    lo, hi = (42 if written & 1 else None), (None if written & 2 else None)
    # written & 2 with a nil upper bound is a run-time error, not a verifier one
    if written & 2:
        with pytest.raises(Exception, match="slice bounds must be Int, got Nil"):
            V.slice_get("a test", 42, None, written)
    else:
        assert V.slice_get("a test", 42, None, written) == "a test"[lo:hi]


def test_a_5_2_file_with_the_new_instructions_round_trips(tmp_path):
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump, load
    path = tmp_path / "p.sns"
    path.write_text('x = [1, 2]\nx[0] += 1\nprint(f"{x[1:]} {2 in x}")\n')
    data = dump(compile_file(str(path)))
    ops = {ins.op for code in verify(load(data)).codes for ins in code.instructions}
    assert {Op.SLICE, Op.CONTAINS, Op.FORMAT_VALUE, Op.BUILD_STRING, Op.DUP2} <= ops


# ----------------------------------------------------------------------------- Python's slicing

_BOUND = st.one_of(st.none(), st.integers(-12, 12))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet="abcé xyz", max_size=9),
       items=st.lists(st.integers(-3, 3), max_size=9),
       bounds=st.lists(st.tuples(_BOUND, _BOUND), min_size=1, max_size=6))
def test_slices_are_pythons_on_both_tiers(tmp_path, text, items, bounds):
    def sl(lo, hi):
        return f"[{'' if lo is None else lo}:{'' if hi is None else hi}]"
    lines, expected = [f"s = {format_source_literal(text)}", f"a = {items}"], []
    for lo, hi in bounds:
        lines.append(f'print(len(s{sl(lo, hi)}), "|" + s{sl(lo, hi)} + "|", a{sl(lo, hi)})')
        part = text[lo:hi]
        expected.append(f"{len(part)} |{part}| [{', '.join(map(str, items[lo:hi]))}]")
    # (looped, so that tier 2 compiles the slices itself as well)
    source = "\n".join(lines) + "\n"
    for tier in TIERS:
        out, error = run(tmp_path, source, tier)
        assert error is None and out.splitlines() == expected


def format_source_literal(text: str) -> str:
    from sensec.fmt import format_string
    return format_string(text)


def test_slices_in_a_hot_loop_are_compiled_by_tier_2(tmp_path):
    from sensevm.runtime.tier2 import compile_code
    from test_tiers import _verified
    path = tmp_path / "p.sns"
    path.write_text('def f(s, a):\n    a[0] += 1\n    return f"{s[1:-1]}{s[:1] in a}{a[:]}"\n')
    from sensevm.runtime.vm import VM
    vm = VM(_verified(str(path)), tier="1")
    (fn,) = [c for c in vm.prepared if c.code.name == "f"]
    compiled = compile_code(fn)
    assert compiled is not None and compiled.direct is not None
    for op in ("slice_get", "contains", "str_form", "join_strings"):
        assert op in compiled.source
    for op in (Op.SLICE, Op.CONTAINS, Op.FORMAT_VALUE, Op.BUILD_STRING, Op.DUP2):
        # none of them handed to its tier-1 handler
        assert f"H[{int(op)}]" not in compiled.source


# ----------------------------------------------------------------------------- labels

ORIGINS = [PV.EMPTY, PV.only(PV.untrusted("web")), PV.only(PV.USER),
           PV.only(PV.untrusted("web")) | PV.only(PV.untrusted("mail"))]


def per_char(s) -> list:
    out = []
    for start, end, origins in PV.spans_of(s):
        out.extend(origins for _ in range(start, end))
    return out


_STEP = st.one_of(
    st.tuples(st.just("slice"), _BOUND, _BOUND, st.booleans()),
    st.tuples(st.just("fstring"), st.text("ab{", max_size=2), st.integers(0, 3),
              st.text("xy", min_size=1, max_size=2)),
)


@settings(max_examples=300, deadline=None)
@given(start=st.lists(st.tuples(st.text("pqr", min_size=1, max_size=3), st.integers(0, 3)),
                      min_size=1, max_size=4),
       steps=st.lists(_STEP, max_size=8))
def test_slices_and_f_strings_keep_every_characters_labels(start, steps):
    """Any sequence of slices and f-strings: each character of the result has exactly the
    origins it had where it came from, so none comes out clean (the values both tiers use)."""
    s = ""
    model: list = []
    for text, k in start:
        s = V.add(s, PV.label(text, ORIGINS[k]) if ORIGINS[k] else text)
        model += [ORIGINS[k]] * len(text)
    for step in steps:
        if step[0] == "slice":
            _, lo, hi, labelled_bound = step
            written = (0 if lo is None else 1) | (0 if hi is None else 2)
            lo_v = PV.label(lo, ORIGINS[1]) if labelled_bound and lo is not None else lo
            s = V.slice_get(s, lo_v, hi, written)
            model = model[lo:hi]
            if labelled_bound and lo is not None:
                model = [PV.union(o, ORIGINS[1]) for o in model]
        else:
            _, before, k, after = step
            other = PV.label(after, ORIGINS[k]) if ORIGINS[k] else after
            s = V.join_strings([before, V.str_form(s), V.str_form(other)])
            model = [PV.EMPTY] * len(before) + model + [ORIGINS[k]] * len(after)
        assert per_char(s) == model
        if any(model):
            assert type(s) is PV.LStr


HEAD = '''tool page() returns String requires web.fetch:
    return "mallory@evil.example"
irreversible action send(to: String) requires email.send:
    print("SENT " + to)
def asks(to):
    local s = send(to)
    s.verify()
    return s.second_look != nil
'''


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(
    st.tuples(st.just("slice"), st.one_of(st.none(), st.integers(-20, 4)),
              st.one_of(st.none(), st.integers(-3, 25))),
    st.tuples(st.just("fstring"), st.sampled_from(["<{t}>", "{t}{t}", "to: {t[1:]}!",
                                                   "{{{t}}}"]), st.just(None))),
    max_size=6))
def test_the_second_look_still_asks_after_slices_and_f_strings(tmp_path, steps):
    """Text made from a page by slices and f-strings, sent: the second look asks whenever a
    character of the page is in it (checked on both tiers, in a loop tier 2 compiles)."""
    lines, text = ["t = page()"], "mallory@evil.example"
    from_page = [True] * len(text)
    for kind, a, b in steps:
        if kind == "slice":
            lines.append(f"t = t[{'' if a is None else a}:{'' if b is None else b}]")
            text, from_page = text[a:b], from_page[a:b]
        else:
            lines.append(f't = f"{a}"')
            head, tail = a.split("{t", 1)
            rest = tail.split("}", 1)
            inner = text[1:] if rest[0] == "[1:]" else text
            inner_marks = from_page[1:] if rest[0] == "[1:]" else from_page
            head = head.replace("{{", "{")
            after = rest[1]
            if "{t}" in after:          # "{t}{t}"
                text, from_page = inner + inner, inner_marks + inner_marks
            else:
                after = after.replace("}}", "}")
                text = head + inner + after
                from_page = [False] * len(head) + inner_marks + [False] * len(after)
    body = "\n".join(lines) + "\nprint(t)\nprint(asks(t))\n"
    for tier in TIERS:
        out, error = run(tmp_path, HEAD + body, tier)
        assert error is None, error
        printed = out.splitlines()
        assert printed[0] == text
        if any(from_page):
            assert printed[-1] == "true", (body, text)


@pytest.mark.parametrize("tier", TIERS)
def test_in_on_labelled_data_gives_a_labelled_bool(tmp_path, tier):
    """`in` on labelled data is labelled like `==`: deciding a branch on it labels what the
    branch stores, so the address rebuilt under `if c in page` is asked about."""
    out, error = run(tmp_path, HEAD + '''p = page()
letters = ["a", "e", "i", "l", "m", "o", "r", "v", "x", "y", "@", ".", "p"]
out = ""
for i in range(20):
    for k in letters:
        if p[i] in [k]:
            out = out + k
print(out, asks(out))
out = ""
for i in range(20):
    for k in letters:
        if k in p[i]:
            out = out + k
print(asks(out))
hits = []
for k in letters:
    if k not in p:
        hits = hits
    else:
        push(hits, k)
w = ""
for h in hits:
    w = w + h
print(asks(w))
q = "bob@good.example"
print(asks(q), "good" in q)
''', tier)
    assert error is None, error
    assert out.splitlines() == ["mallory@evil.example true", "true", "true", "false true"]
    page = PV.label("abc", ORIGINS[1])
    for result in (V.contains("b", page), V.contains(V.slice_get(page, 0, 1, 3), "xa"),
                   V.contains(PV.label(1, ORIGINS[1]), [0, 1]),
                   V.contains("z", [PV.label("a", ORIGINS[1])])):
        assert type(result) is PV.LBool and result.origins == ORIGINS[1]
    assert V.contains("b", "abc") is True and V.contains(2, [1, 2]) is True


@pytest.mark.parametrize("tier", TIERS)
def test_compound_assignment_labels_like_its_operator(tmp_path, tier):
    out, error = run(tmp_path, HEAD + '''t = "to: "
t += page()
print(asks(t))
parts = ["x"]
parts[0] += page()[7:]
print(parts[0], asks(parts[0]))
''', tier)
    assert error is None, error
    assert out.splitlines() == ["true", "x@evil.example true"]


def test_slices_keep_exactly_the_labels_of_the_characters_kept():
    s = V.add(V.add("ab", PV.label("cd", ORIGINS[1])), "ef")
    assert V.slice_get(s, 0, 2, 3) == "ab" and type(V.slice_get(s, 0, 2, 3)) is str
    part = V.slice_get(s, 1, -1, 3)
    assert str(part) == "bcde" and part.spans == ((0, 1, PV.EMPTY), (1, 3, ORIGINS[1]),
                                                  (3, 4, PV.EMPTY))
    assert V.slice_get(s, 3, None, 1).spans == ((0, 1, ORIGINS[1]), (1, 3, PV.EMPTY))
    assert type(V.slice_get(s, 9, None, 1)) is str
    # a labelled bound labels what it chose
    chosen = V.slice_get("abc", PV.label(1, ORIGINS[2]), None, 1)
    assert chosen == "bc" and PV.origins_of(chosen) == ORIGINS[2]


def test_an_f_string_labels_each_value_where_it_stands():
    page = PV.label("evil", ORIGINS[1])
    n = PV.label(7, ORIGINS[2])
    joined = V.join_strings(["to ", V.str_form(page), " x", V.str_form(n)])
    assert joined == "to evil x7"
    assert joined.spans == ((0, 3, PV.EMPTY), (3, 7, ORIGINS[1]), (7, 9, PV.EMPTY),
                            (9, 10, ORIGINS[2]))
    assert type(V.join_strings(["a", V.str_form([1, 2])])) is str


# ----------------------------------------------------------------------------- sensec fmt, dis, highlighting

FMT_CASES = [
    ("x = s[ 1 : 2 ]  # c\n", "x = s[1:2]  # c\n"),
    ("x = s[ : ]\ny = s[a+1 :]\nz = s[: -1]\n", "x = s[:]\ny = s[a + 1:]\nz = s[:-1]\n"),
    ("if a  not  in b or c in(d):\n    t  +=  1\n", "if a not in b or c in d:\n    t += 1\n"),
    ("t[i]-=1\nt*=2\nt/=3\nt%=4\n", "t[i] -= 1\nt *= 2\nt /= 3\nt %= 4\n"),
    ("m = f\"Dear {name  }, {{x}} {total*2}\"   # kept\n",
     "m = f\"Dear {name  }, {{x}} {total*2}\"  # kept\n"),
    ('q = f"""a\n  {b\n +c} d"""\n', 'q = f"""a\n  {b\n +c} d"""\n'),
    ("x = (a in b) in c\ny = a in (b in c)\nz = (a += 1) * 2\n",
     "x = a in b in c\ny = a in (b in c)\nz = (a += 1) * 2\n"),
    ("x = (s[1:])[0]\ny = -s[1:]\n", "x = s[1:][0]\ny = -s[1:]\n"),
]


@pytest.mark.parametrize("source, expected", FMT_CASES)
def test_fmt_prints_the_canonical_form(source, expected):
    assert format_source(source) == expected
    assert format_source(expected) == expected


def test_dis_shows_the_new_instructions(tmp_path):
    from sensec.driver import compile_file
    from sensevm.bytecode.disasm import disassemble
    path = tmp_path / "p.sns"
    path.write_text('s = "abc"\nprint(s[1:], s[:2], s[:], s[0:1], f"{s} {1 in [1]}")\n'
                    'a = [1]\na[0] += 1\n')
    text = disassemble(compile_file(str(path)))
    for shown in ("SLICE                    1 (lo:)", "SLICE                    2 (:hi)",
                  "SLICE                    0 (:)", "SLICE                    3 (lo:hi)",
                  "CONTAINS", "FORMAT_VALUE", "BUILD_STRING             3", "DUP2"):
        assert shown in text, shown


def test_highlighting_shows_an_f_strings_expressions_as_code():
    from pygments.token import Error, Name, Number, Operator, String
    from sensevm.cli.highlight import SenseLexer
    source = 'x = f"Dear {name.title}, {{x}} {total * 2}"\ny += 1\nq = f"""a {"}"} b"""\n'
    toks = [(t, v) for t, v in SenseLexer().get_tokens(source) if v.strip()]
    assert (Name, "name") in toks and (Number.Integer, "2") in toks
    assert (Operator, "*") in toks and (Operator, "+=") in toks
    assert (String.Interpol, "{") in toks and (String.Escape, "{{") in toks
    assert (String.Double, "}") in toks             # the string in the expression
    assert not [v for t, v in toks if t in Error]
    assert "".join(v for _, v in SenseLexer().get_tokens(source)) == source
