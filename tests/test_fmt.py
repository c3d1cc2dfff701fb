"""`sensec fmt`: exact canonical output, literals that read back, the command line, properties."""

from __future__ import annotations

import dataclasses
import glob
import io
import os
import subprocess
import sys
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT, TESTS
from sensec.fmt import format_float, format_source, format_string, run
from sensec.lexer import Lexer
from sensevm.base.errors import SenseError, SenseSyntaxError


def fmt(source: str) -> str:
    return format_source(source, "<test>")


def lex_one(text: str):
    """The value of the single literal token ``text``."""
    tokens = [t for t in Lexer("<test>").tokenize(text) if t.type != "NEWLINE"]
    assert len(tokens) == 1, tokens
    return tokens[0].type, tokens[0].value


# ----------------------------------------------------------------------------- every statement form

ALL_FORMS_IN = '''\
# leading comment


import "lib/util.sns"
import a.b as c
import python "math" as m
import python os.path
from "lib/x.sns" import f as g, h
from python "math" import sqrt as root
from a.b import c   # trailing on from
x   =   1   # trailing
y : Int = ( 1 + 2 ) * 3
local   z: Array<Int> = [1,2,  3]
local w = nil
def f(a: Int, b) -> Int:
  # inside


  return a+b
  # end of f body
# before if
if x: print(1)
else if y:
    print(2)
    # end of else-if body
# before else
else:  # else comment
    print(3)
if a:
    nil
else:
    if b: nil
while (n = n + 1) < 4: print(n)
for i in range(3):
    if i == 1: continue
    break
reversible action send(to: String) requires approval, payment.execute:   # action
    print(to)
# before rollback
rollback:
    print("undo")
irreversible action go() requires approval: nil
irreversible action cap() requires net.send: return
tool search(q: String) returns String requires web.search "Search the web":
    return q
async tool t2(): nil
agent bot: print(1)
async agent bot2:
    nil
policy: allow web.search
policy:   # one rule in a block
    deny model.anthropic
policy:
    deny payment.execute   # no payments
    # between rules
    allow web
session s1:
    nil
test "adds \\"one\\"":
    assert(1 + 1 == 2)
memory notes
memory notes2 : "hint"
persistent memory pm: "h"
model m1 = inference("mock")
set delegation = m1
result = foo(1,   # first arg
             2)   # second arg
values = [
    # a list
    1,
    2]
'''

ALL_FORMS_OUT = '''\
# leading comment

import "lib/util.sns"
import a.b as c
import python "math" as m
import python os.path
from "lib/x.sns" import f as g, h
from python "math" import sqrt as root
from a.b import c  # trailing on from
x = 1  # trailing
y: Int = (1 + 2) * 3
local z: Array<Int> = [1, 2, 3]
local w = nil
def f(a: Int, b) -> Int:
    # inside

    return a + b
    # end of f body
# before if
if x:
    print(1)
else if y:
    print(2)
    # end of else-if body
# before else
else:  # else comment
    print(3)
if a:
    nil
else:
    if b:
        nil
while (n = n + 1) < 4:
    print(n)
for i in range(3):
    if i == 1:
        continue
    break
reversible action send(to: String) requires payment.execute, approval:  # action
    print(to)
# before rollback
rollback:
    print("undo")
irreversible action go() requires approval:
    nil
irreversible action cap() requires net.send:
    return
tool search(q: String) returns String requires web.search "Search the web":
    return q
async tool t2():
    nil
agent bot:
    print(1)
async agent bot2:
    nil
policy: allow web.search
policy: deny model.anthropic  # one rule in a block
policy:
    deny payment.execute  # no payments
    # between rules
    allow web
session s1:
    nil
test "adds \\"one\\"":
    assert(1 + 1 == 2)
memory notes
memory notes2: "hint"
persistent memory pm: "h"
model m1 = inference("mock")
set delegation = m1
result = foo(1, 2)  # first arg
# second arg
values = [
    # a list
    1,
    2
]
'''


def test_every_statement_form():
    assert fmt(ALL_FORMS_IN) == ALL_FORMS_OUT
    assert fmt(ALL_FORMS_OUT) == ALL_FORMS_OUT


# ----------------------------------------------------------------------------- small cases

CASES = [
    # precedence: parentheses only where the tree needs them
    ("print((1 + 2) * 3, 1 + (2 * 3), (1 * 2) + 3)\n",
     "print((1 + 2) * 3, 1 + 2 * 3, 1 * 2 + 3)\n"),
    ("x = a - (b - c)\ny = (a - b) - c\n", "x = a - (b - c)\ny = a - b - c\n"),
    ("x = a / (b * c) % d\n", "x = a / (b * c) % d\n"),
    ("x = (a == b) == c\ny = a == (b == c)\n", "x = a == b == c\ny = a == (b == c)\n"),
    ("x = (a < b) < c\ny = a < (b < c)\n", "x = a < b < c\ny = a < (b < c)\n"),
    ("x = (a or b) and c\ny = a or (b and c)\n", "x = (a or b) and c\ny = a or b and c\n"),
    ("x = a or (b or c)\ny = (a and b) and c\n", "x = a or (b or c)\ny = a and b and c\n"),
    ("x = (a < b) == (c < d)\n", "x = a < b == c < d\n"),
    ("x = a < (b == c)\n", "x = a < (b == c)\n"),
    # 'not' binds tighter than comparisons (spec 3.2)
    ("x = (not a) == b\ny = not (a == b)\n", "x = not a == b\ny = not (a == b)\n"),
    ("x = not (a and b)\ny = (not a) and b\n", "x = not (a and b)\ny = not a and b\n"),
    ("x = not (not a)\ny = -(-a)\nz = - - a\n", "x = not not a\ny = - -a\nz = - -a\n"),
    ("x = -(a + b)\ny = (-a) + b\nz = a * (-b)\n", "x = -(a + b)\ny = -a + b\nz = a * -b\n"),
    ("x = -(a.b)\ny = (-a).b\nz = -(a[0])\n", "x = -a.b\ny = (-a).b\nz = -a[0]\n"),
    ("x = (a + b)(c)\ny = (a)(b)[c].d\n", "x = (a + b)(c)\ny = a(b)[c].d\n"),
    ("x = (-1).x\ny = (1).x\nz = (1.5)[0]\n", "x = (-1).x\ny = 1.x\nz = 1.5[0]\n"),
    # assignment is an expression, right-associative
    ("a = (b = c)\n", "a = b = c\n"),
    ("arr[0] = arr[1] = 5\n", "arr[0] = arr[1] = 5\n"),
    ("print((c = 3) * 2)\n", "print((c = 3) * 2)\n"),
    ("x = (a = b).c\ny = not (a = b)\nz = [a = 1]\nf(a = 1)\n",
     "x = (a = b).c\ny = not (a = b)\nz = [a = 1]\nf(a = 1)\n"),
    ("(x) = 1\n", "x = 1\n"),
    ("print(inference(\"q\",system:m, temperature : 0.5))\n",
     "print(inference(\"q\", system: m, temperature: 0.5))\n"),
    # blank lines: runs collapse, none at the start or end of the file
    ("\n\n\nx = 1\n\n\n\ny = 2\n\n\n", "x = 1\n\ny = 2\n"),
    ("if a:\n\n\n    x = 1\n\n\n\nelse:\n    y = 2\n", "if a:\n\n    x = 1\nelse:\n    y = 2\n"),
    ("", ""),
    ("\n\n", ""),
    ("# only a comment", "# only a comment\n"),
    ("#a   \n\n\n#   b\n", "#a\n\n#   b\n"),
    # comments keep their block
    ("if a:\n    x = 1\n    # still in the if\n# back at the top\ny = 2\n",
     "if a:\n    x = 1\n    # still in the if\n# back at the top\ny = 2\n"),
    ("while a:\n  if b:\n      x = 1\n      # inner\n    # outer body\n# top\n",
     "while a:\n    if b:\n        x = 1\n        # inner\n    # outer body\n# top\n"),
    ("def f():\n# under-indented, before the first statement\n    return 1\n",
     "def f():\n    # under-indented, before the first statement\n    return 1\n"),
    ("if a: x = 1  # on the inline\n    # deeper than the if\nz = 2\n",
     "if a:  # on the inline\n    x = 1\n    # deeper than the if\nz = 2\n"),
    ('x = "has # no comment"  # but this is\n', 'x = "has # no comment"  # but this is\n'),
    ("x = 1 # a # b\n", "x = 1  # a # b\n"),
    ("x = 1\r\ny = 2\r\n", "x = 1\ny = 2\n"),
    ("policy: deny a.b\n\n\n# last\n", "policy: deny a.b\n\n# last\n"),
    # capability paths may use reserved words
    ("irreversible action a() requires model.anthropic, approval: nil\n",
     "irreversible action a() requires model.anthropic, approval:\n    nil\n"),
    ("reversible action r(x: Array<Int>): nil\nrollback: nil\n",
     "reversible action r(x: Array<Int>):\n    nil\nrollback:\n    nil\n"),
    # the second look's clauses are kept (`untrusted tool` is a plain tool; `secret` is
    # `credential`)
    ("irreversible action a(to, n) sends(recipient: to, secret: n) requires x.y: nil\n",
     "irreversible action a(to, n) sends(recipient: to, credential: n) requires x.y:\n    nil\n"),
    ("irreversible action a(to) sends: nil\n", "irreversible action a(to) sends:\n    nil\n"),
    ("trusted async tool t(x): return x\nuntrusted tool u(): return 1\n",
     "trusted async tool t(x):\n    return x\ntool u():\n    return 1\n"),
    # 'rollback' is an ordinary name elsewhere
    ("rollback: Int = 1\nrollback = rollback + 1\n",
     "rollback: Int = 1\nrollback = rollback + 1\n"),
    # map literals (EXTENSIONS.md E1): as the author laid them out; over lines, one entry per
    # line with a trailing comma, each comment beside or above its entry (blank lines inside
    # go); on one line, no trailing comma
    ('m = {\n    "a": 1,  # one\n    2: [3],\n\n    "n": {},\n}\nprint(m)\n',
     'm = {\n    "a": 1,  # one\n    2: [3],\n    "n": {},\n}\nprint(m)\n'),
    ('m = {"a": 1,\n     # why\n     "b": [1,\n  2]}  # m\n',
     'm = {\n    "a": 1,\n    # why\n    "b": [\n        1,\n        2\n    ],\n}  # m\n'),
    ('xs = [  # first\n    1, 2,\n    3\n]\n', 'xs = [\n    # first\n    1,\n    2,\n    3\n]\n'),
    ('xs = [1, 2,\n]\n' if False else 'xs = ["""a\nb""", 2]\nys = [1, 2\n]\n',
     'xs = ["""a\nb""", 2]\nys = [1, 2]\n'),
    ('if x:\n    f({\n        "k": 1,  # c\n    })\n',
     'if x:\n    f({\n        "k": 1,  # c\n    })\n'),
    ("x = {a:b,c :d}\ny = {  }\nz = {1: {2: {3: 4}}}\n",
     "x = {a: b, c: d}\ny = {}\nz = {1: {2: {3: 4}}}\n"),
    ("x = {(a = 1): (b = 2)}\ny = {k: v}.keys()[0]\n",
     "x = {a = 1: b = 2}\ny = {k: v}.keys()[0]\n"),
    # the dangling else belongs to the inner if
    ("if a: if b: x\nelse: y\n", "if a:\n    if b:\n        x\n    else:\n        y\n"),
    ("if a:\n    x\nelse: if b: y\n", "if a:\n    x\nelse:\n    if b:\n        y\n"),
    ("if a:\n    x\nelse if b: y\nelse if c: z\nelse: w\n",
     "if a:\n    x\nelse if b:\n    y\nelse if c:\n    z\nelse:\n    w\n"),
    # errors a program handles (EXTENSIONS.md E4): every clause, comments kept in place
    ("try:  # t\n  x()\nexcept SenseTypeError as e:  # c\n  # inside\n  raise e\n"
     "except SensePolicyError:\n  raise\nexcept:\n    raise \"no\"\nfinally:  # f\n  y()\n",
     "try:  # t\n    x()\nexcept SenseTypeError as e:  # c\n    # inside\n    raise e\n"
     "except SensePolicyError:\n    raise\nexcept:\n    raise \"no\"\nfinally:  # f\n    y()\n"),
    ("try: a()\nfinally: b()\n", "try:\n    a()\nfinally:\n    b()\n"),
    ("def f():\n  try:\n    return 1\n  except: return 2\n",
     "def f():\n    try:\n        return 1\n    except:\n        return 2\n"),
    # ... and their words are ordinary names elsewhere
    ("try = 1\nraise = try\nraise\nexcept: Int = 2\nfinally = raise(3)\n",
     "try = 1\nraise = try\nraise\nexcept: Int = 2\nfinally = raise(3)\n"),
]


@pytest.mark.parametrize("source, expected", CASES)
def test_canonical_form(source, expected):
    assert fmt(source) == expected
    assert fmt(expected) == expected


# ----------------------------------------------------------------------------- literals

FLOATS = [
    (1e16, "10000000000000000.0"),
    (5e-06, "0.000005"),
    (0.1, "0.1"),
    (123.0, "123.0"),
    (0.0, "0.0"),
    (1e300, "1" + "0" * 300 + ".0"),
    (1e-05, "0.00001"),
    (1.5e-10, "0.00000000015"),
    (2.5e20, "250000000000000000000.0"),
    (1.7976931348623157e308, "17976931348623157" + "0" * 292 + ".0"),
    (5e-324, "0." + "0" * 323 + "5"),
    (float("inf"), "1" + "0" * 309 + ".0"),
]


def test_the_second_look_clauses_keep_the_manifest():
    """`sends(...)` and `trusted` were dropped, and fmt then refused the file with an internal
    AssertionError (the formatted text parsed to another program)."""
    check_properties("trusted tool t(x) requires a.b: return x\n"
                     "irreversible action a(to, n, k) sends(recipient: to, amount: n, secret: k)"
                     " requires x.y: nil\nirreversible action b(w) sends: nil\n")
    with open(os.path.join(ROOT, "examples", "second_look.sns"), encoding="utf-8") as fh:
        check_properties(fh.read())


@pytest.mark.parametrize("value, text", FLOATS)
def test_float_literals_read_back(value, text):
    assert format_float(value) == text
    kind, back = lex_one(text)
    assert kind == "FLOAT" and back == value and repr(back) == repr(value)


def test_float_in_source():
    assert fmt("x = 10000000000000000.000\n") == "x = 10000000000000000.0\n"
    assert fmt("x = 0.0000050\n") == "x = 0.000005\n"
    assert fmt("x = 007.50 + 007\n") == "x = 7.5 + 7\n"
    assert fmt("x = -0.5\n") == "x = -0.5\n"


def test_negative_literals_print_as_unary_minus():
    from sensec import nodes as n
    from sensec.fmt import format_expr
    from sensevm.base.errors import Pos
    p = Pos(1, 1)
    assert format_expr(n.Member(p, n.IntLit(p, -3), "x")) == "(-3).x"
    assert format_expr(n.Binary(p, "-", n.Name(p, "a"), n.FloatLit(p, -0.0))) == "a - -0.0"
    assert format_expr(n.Unary(p, "-", n.IntLit(p, -3))) == "- -3"


STRINGS = [
    ("plain", '"plain"'),
    ("", '""'),
    ("line1\nline2", '"""line1\nline2"""'),
    ('say "hi"\nthere', '"""say "hi"\nthere"""'),
    ('a"b\nc"', '"a\\"b\\nc\\""'),                       # ends in a quote
    ('x\n"""y', '"x\\n\\"\\"\\"y"'),                      # holds """
    ('"\nx', '""""\nx"""'),                               # starts with a quote
    ('back\\slash', '"back\\\\slash"'),
    ('back\\\nslash', '"""back\\\\\nslash"""'),
    ('tab\there', '"tab\\there"'),
    ('cr\rhere', '"cr\\rhere"'),
    ('cr\r\nlf', '"""cr\\r\nlf"""'),
    ('q"uote', '"q\\"uote"'),
    ('\\', '"\\\\"'),
    ('\\\n', '"""\\\\\n"""'),
    ('é✓ 😀 #', '"é✓ 😀 #"'),
    ('""\n', '"""""\n"""'),
]


@pytest.mark.parametrize("value, text", STRINGS)
def test_string_literals_read_back(value, text):
    assert format_string(value) == text
    assert lex_one(text) == ("STRING", value)


def test_reference_string_defect_fixed():
    # The reference prints this as an unterminated """ literal (spec 20.15).
    assert fmt('t = "a\\"b\nc\\""\n') == 't = "a\\"b\\nc\\""\n'
    assert fmt('s = "line1\nline2"\n') == 's = """line1\nline2"""\n'
    assert fmt('s = "a\\qb"\n') == 's = "aqb"\n'


def test_huge_int():
    digits = "9" * 5000
    assert fmt(f"x = {digits}\n") == f"x = {digits}\n"


def test_strings_in_declarations():
    source = ('test "multi\nline":\n    nil\ntool t() "say \\"x\\"": nil\n'
              'memory m: "a\\\\b"\nimport "dir\\\\x.sns"\n')
    assert fmt(source) == ('test """multi\nline""":\n    nil\ntool t() "say \\"x\\"":\n    nil\n'
                           'memory m: "a\\\\b"\nimport "dir\\\\x.sns"\n')


def test_syntax_error_is_raised():
    with pytest.raises(SenseSyntaxError) as info:
        format_source("x = (1\n", "bad.sns")
    assert info.value.path == "bad.sns"
    with pytest.raises(SenseSyntaxError):
        format_source('x = "never ends\n', "bad.sns")


# ----------------------------------------------------------------------------- command line

def call(path, **flags):
    out, err = io.StringIO(), io.StringIO()
    status = run(str(path), stdout=out, stderr=err, **flags)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.sns").write_text("x  =  1\n", encoding="utf-8")
    (tmp_path / "a.sns").write_text("z = 3\n", encoding="utf-8")
    (tmp_path / "sub" / "c.sns").write_text("if a: b\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("x  =  1\n", encoding="utf-8")
    return tmp_path


def test_cli_single_file_prints(tree):
    assert call(tree / "b.sns") == (0, "x = 1\n", "")
    assert (tree / "b.sns").read_text(encoding="utf-8") == "x  =  1\n"


def test_cli_directory_headers(tree):
    status, out, _ = call(tree)
    assert status == 0
    assert out == (f"# ----- {tree / 'a.sns'} -----\nz = 3\n"
                   f"# ----- {tree / 'b.sns'} -----\nx = 1\n"
                   f"# ----- {tree / 'sub' / 'c.sns'} -----\nif a:\n    b\n")
    # One file under the directory: no header.
    assert call(tree / "sub") == (0, "if a:\n    b\n", "")


def test_cli_check(tree):
    status, out, err = call(tree, check=True)
    assert (status, err) == (1, "")
    assert out.splitlines() == [str(tree / "b.sns"), str(tree / "sub" / "c.sns")]
    assert (tree / "b.sns").read_text(encoding="utf-8") == "x  =  1\n"
    assert call(tree / "a.sns", check=True) == (0, "", "")
    # --check wins over --write: nothing is written.
    assert call(tree, check=True, write=True)[0] == 1
    assert (tree / "b.sns").read_text(encoding="utf-8") == "x  =  1\n"


def test_cli_write_rewrites_only_changed_files(tree):
    before = os.stat(tree / "a.sns").st_mtime_ns
    os.utime(tree / "a.sns", ns=(before - 10**9, before - 10**9))
    status, out, _ = call(tree, write=True)
    assert status == 0
    assert out.splitlines() == [str(tree / "b.sns"), str(tree / "sub" / "c.sns")]
    assert (tree / "b.sns").read_text(encoding="utf-8") == "x = 1\n"
    assert (tree / "sub" / "c.sns").read_text(encoding="utf-8") == "if a:\n    b\n"
    assert os.stat(tree / "a.sns").st_mtime_ns == before - 10**9
    assert (tree / "notes.txt").read_text(encoding="utf-8") == "x  =  1\n"
    assert call(tree, check=True) == (0, "", "")
    assert not [p for p in os.listdir(tree) if p.endswith(".tmp")]


def test_cli_crlf_counts_as_a_change(tmp_path):
    p = tmp_path / "w.sns"
    p.write_bytes(b"x = 1\r\n")
    assert call(p, check=True)[0] == 1
    assert call(p, write=True)[0] == 0
    assert p.read_bytes() == b"x = 1\n"


def test_cli_syntax_error_writes_nothing(tree):
    bad = tree / "bad.sns"
    bad.write_text("x  =  (1\n", encoding="utf-8")
    status, out, err = call(tree, write=True)
    assert status == 1
    assert bad.read_text(encoding="utf-8") == "x  =  (1\n"
    assert err.startswith(f"{bad}:") and ": SenseSyntaxError: " in err
    # The other files were still formatted.
    assert (tree / "b.sns").read_text(encoding="utf-8") == "x = 1\n"
    assert str(bad) not in out


def test_cli_missing_path(tmp_path):
    status, out, err = call(tmp_path / "nope.sns")
    assert status == 1 and out == ""
    assert "no such file or directory" in err


def sensec(*args):
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "sensec", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env)


def test_sensec_fmt_command(tree):
    proc = sensec("fmt", "--check", str(tree))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [str(tree / "b.sns"), str(tree / "sub" / "c.sns")]
    proc = sensec("fmt", "-w", str(tree / "b.sns"))
    assert (proc.returncode, proc.stdout) == (0, f"{tree / 'b.sns'}\n")
    bad = tree / "bad.sns"
    bad.write_text("print(1\n", encoding="utf-8")
    proc = sensec("fmt", "--write", str(bad))
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"{bad}:")
    assert "SenseSyntaxError" in proc.stderr and "Traceback" not in proc.stderr
    assert bad.read_text(encoding="utf-8") == "print(1\n"


# ----------------------------------------------------------------------------- properties

def compiled(source: str, path: str):
    """Everything of the compiled program except positions and source text.

    Every field of Program counts (a table added later is compared too) but the source files
    and their hash; in code objects, all but the line table and the source index.
    """
    from sensec.driver import compile_source
    program = compile_source(source, path)
    out = []
    for f in dataclasses.fields(program):
        value = getattr(program, f.name)
        if f.name in ("sources", "source_hash"):
            continue
        if f.name == "codes":
            value = tuple(
                tuple((g.name, getattr(code, g.name)) for g in dataclasses.fields(code)
                      if g.name not in ("positions", "source"))
                for code in value)
        elif f.name == "constants":
            # 1 == 1.0 == True, and 0.0 == -0.0: the type and the repr tell them apart.
            value = tuple((type(c), repr(c)) for c in value)
        out.append((f.name, value))
    return tuple(out)


def compile_outcome(source: str, path: str = "<fmt>"):
    try:
        return compiled(source, path)
    except SenseError as err:
        return ("error", type(err).__name__,
                tuple(e.message for e in getattr(err, "errors", None) or [err]))


def check_properties(source: str) -> str:
    once = fmt(source)
    assert fmt(once) == once
    assert compile_outcome(once) == compile_outcome(source)
    return once


NAMES = ["a", "b", "x", "total", "_tmp", "été", "n2", "ñame", "rollback_ok", "x_y"]
CAPS = ["web.search", "payment.execute", "model.anthropic", "net", "deny.test.run"]
BINARY_OPS = ["or", "and", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"]
TYPES = ["Int", "Float", "Any", "Array<String>", "Array<Array<Int>>"]

# Literal values come from hypothesis (its edge cases are the point: subnormal and huge floats,
# odd unicode); the shape of the program and its spelling (spacing, parentheses, comments, blank
# lines, inline blocks) come from a seeded Random, which keeps each example cheap to draw.

FLOAT_TEXT = st.one_of(
    st.tuples(st.integers(0, 10**20), st.integers(0, 10**20), st.integers(0, 3)).map(
        lambda t: f"{t[0]}.{'0' * t[2]}{t[1]}"),
    # tiny, down to the subnormals and past them
    st.tuples(st.integers(0, 330), st.integers(1, 10**17)).map(
        lambda t: "0." + "0" * t[0] + str(t[1])),
    # huge, up to infinity
    st.tuples(st.integers(1, 10**17), st.integers(0, 320)).map(
        lambda t: str(t[0]) + "0" * t[1] + ".0"),
    # any double, written with every digit of its exact binary value
    st.floats(min_value=0.0, allow_nan=False, allow_infinity=False).map(
        lambda f: format(Decimal(f), "f")).map(lambda s: s if "." in s else s + ".0"),
)

STRING_VALUE = st.text(st.one_of(
    st.sampled_from(['"', '"', "\\", "\n", "\t", "\r", "#", "'", "a", " ", "n", "é", "😀"]),
    st.characters(blacklist_categories=("Cs",))), max_size=10)

COMMENT_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                       max_size=12).map(lambda body: "#" + body)


def spell_string(rnd, value: str) -> str:
    """A literal for ``value``, spelt in one of the ways the lexer accepts."""
    if '"""' not in value and not value.endswith('"') and rnd.random() < 0.5:
        spelled = {"\\": ["\\\\"], "\r": ["\\r"], '"': ['"', '\\"'], "\n": ["\n", "\\n"],
                   "\t": ["\t", "\\t"]}
        return '"""' + "".join(rnd.choice(spelled.get(ch, [ch])) for ch in value) + '"""'
    # An unknown escape is the character itself: '\a' is 'a'.
    spelled = {"\\": ["\\\\"], '"': ['\\"'], "\r": ["\\r"], "\n": ["\n", "\\n"],
               "\t": ["\t", "\\t"], "a": ["a", "a", "\\a"], "é": ["é", "\\é"]}
    return '"' + "".join(rnd.choice(spelled.get(ch, [ch])) for ch in value) + '"'


class Ctx:
    """Where a statement stands: which of break/continue/return the resolver allows there."""

    def __init__(self, loop=False, function=False):
        self.loop, self.function = loop, function


class Gen:
    """Source text of a random program, from a Random and pools of literal values."""

    def __init__(self, rnd, pools, full):
        self.rnd = rnd
        self.floats, self.strings, self.ints, self.comments = pools
        self.full = full          # also the statements that parse but do not compile yet
        self.unit = rnd.choice([1, 2, 4])

    def chance(self, p):
        return self.rnd.random() < p

    # ------------------------------------------------------------------ expressions

    def atom(self):
        r = self.rnd
        kind = r.randrange(7)
        if kind == 0:
            return r.choice(self.floats)
        if kind == 1:
            return spell_string(r, r.choice(self.strings))
        if kind == 2:
            return str(r.choice(self.ints)) if self.chance(0.9) else "00" + str(r.randrange(10))
        if kind == 3:
            return r.choice(["true", "false", "nil"])
        return r.choice(NAMES)

    def wrap(self, part, force=False):
        text, prec = part
        return f"({text})" if force or self.chance(0.25) else text

    def items(self, parts):
        """Comma-separated, sometimes across lines and with comments (free inside brackets)."""
        out = ""
        for i, text in enumerate(parts):
            if i:
                sep = self.rnd.choice([", ", ", ", ",", " ,  ", ",\n      ", ",  # c\n  "])
                out += sep
            out += text
        return out

    def expr(self, depth=3):
        """(text, precedence level of its top operator, roughly: 1 assignment ... 10 atom)."""
        r = self.rnd
        if depth <= 0 or self.chance(0.3):
            return self.atom(), 10
        kind = r.randrange(9)
        sub = lambda: self.expr(depth - 1)
        if kind <= 2:
            op = r.choice(BINARY_OPS)
            space = " " if op in ("and", "or") else r.choice([" ", " ", "", "  "])
            left, right = sub(), sub()
            # Only an assignment has to be parenthesised to stay an operand; any other missing
            # parentheses just make a different (valid) tree.
            lt, rt = self.wrap(left, left[1] == 1), self.wrap(right, right[1] == 1)
            return f"{lt}{space}{op}{space}{rt}", 5
        if kind == 3:
            operand = sub()
            return r.choice(["-", "not ", "- "]) + self.wrap(operand, operand[1] == 1), 8
        if kind == 4:
            callee = r.choice(NAMES) if self.chance(0.8) else f"({sub()[0]})"
            args = [sub()[0] for _ in range(r.randrange(4))]
            labels = [f"{r.choice(NAMES)}: {sub()[0]}" for _ in range(r.randrange(2))]
            return f"{callee}({self.items(args + labels)})", 9
        if kind == 5:
            obj = sub()
            if self.chance(0.5):
                return f"{self.wrap(obj, obj[1] < 9)}.{r.choice(NAMES)}", 9
            return f"{self.wrap(obj, obj[1] < 9)}[{sub()[0]}]", 9
        if kind == 6:
            return f"[{self.items([sub()[0] for _ in range(r.randrange(4))])}]", 10
        if kind == 7:
            # A map literal (EXTENSIONS.md E1): across lines, comments and a trailing comma.
            entries = [f"{sub()[0]}{r.choice([': ', ':', ' : '])}{sub()[0]}"
                       for _ in range(r.randrange(4))]
            trailing = r.choice(["", ",", ",\n  ", "  # c\n"]) if entries else ""
            return f"{{{r.choice(['', chr(10) + '    '])}{self.items(entries)}{trailing}}}", 10
        target = r.choice(NAMES)
        if self.chance(0.3):
            target += f"[{sub()[0]}]"
        return f"{target} = {sub()[0]}", 1

    def e(self):
        return self.expr()[0]

    # ------------------------------------------------------------------ statements

    def pad(self, level):
        return " " * (self.unit * level)

    def trail(self):
        return "  " + self.rnd.choice(self.comments) if self.comments and self.chance(0.2) else ""

    def decorations(self, level):
        """Blank lines and own-line comments (at any column) before a statement."""
        out = []
        while self.chance(0.25):
            if self.comments and self.chance(0.6):
                col = self.rnd.randrange(self.unit * level + 7)
                out.append(" " * col + self.rnd.choice(self.comments))
            else:
                out.append(self.rnd.choice(["", "  "]))
        return out

    def params(self):
        r = self.rnd
        return ", ".join(r.choice(NAMES) + r.choice(["", ": Int", ": Array<String>"])
                         for _ in range(r.randrange(4)))

    def simple(self, ctx):
        r = self.rnd
        kinds = ["expr", "assign", "typed", "local", "memory"]
        kinds += ["break", "continue"] if ctx.loop else []
        kinds += ["return"] if ctx.function else []
        kinds += ["model", "set", "pyimport"] if self.full else []
        kind = r.choice(kinds)
        if kind == "expr":
            return self.e()
        if kind == "assign":
            return f"{r.choice(NAMES)} = {self.e()}"
        if kind == "typed":
            colon = r.choice([": ", " : ", ":"])
            return f"{r.choice(NAMES)}{colon}{r.choice(TYPES)} = {self.e()}"
        if kind == "local":
            typ = r.choice(["", ": Float", ": Array<Array<Int>>"])
            return f"local {r.choice(NAMES)}{typ} = {self.e()}"
        if kind == "return":
            return r.choice(["return", "return " + self.e()])
        if kind == "memory":
            hint = r.choice(["", ": " + spell_string(r, r.choice(self.strings))])
            return f"{r.choice(['', 'persistent '])}memory {r.choice(NAMES)}{hint}"
        if kind == "model":
            return f"model {r.choice(NAMES)} = {self.e()}"
        if kind == "set":
            return f"set delegation = {self.e()}"
        if kind == "pyimport":
            return r.choice(['import python "math" as m', "import python os.path",
                             "from python os import path, sep as s"])
        return kind

    def body(self, ctx, depth, level, header):
        """``header:`` then its block, which a coin may put on the header's line: one simple
        statement, or the first line of a compound one (``if a: while b:``, dangling elses)."""
        pad = self.pad(level)
        # Not after an action's header: a 'rollback:' line meant for it would attach to an
        # irreversible action ending the inline chain, which is an error.
        if depth > 0 and "action" not in header and self.chance(0.15):
            nested = self.statement(ctx, depth - 1, level, decorate=False)
            return [f"{pad}{header}: {nested[0].lstrip()}"] + nested[1:]
        if depth <= 0 or self.chance(0.35):
            stmt = self.simple(ctx)
            if self.chance(0.5):
                return [f"{pad}{header}: {stmt}{self.trail()}"]
            return [f"{pad}{header}:{self.trail()}", f"{self.pad(level + 1)}{stmt}{self.trail()}"]
        return [f"{pad}{header}:{self.trail()}"] + self.block(ctx, depth - 1, level + 1)

    def block(self, ctx, depth, level):
        out = []
        for _ in range(self.rnd.randint(1, 3)):
            out += self.statement(ctx, depth, level)
        return out

    def statement(self, ctx, depth, level, decorate=True):
        r = self.rnd
        out = self.decorations(level) if decorate else []
        kinds = ["simple"] * 4 + ["if", "while", "for", "def", "action", "policy", "session",
                                  "test", "import", "tool", "agent"]
        kind = r.choice(kinds)
        pad = self.pad(level)
        if kind == "simple" or (depth <= 0 and kind not in ("policy", "import")):
            return out + [pad + self.simple(ctx) + self.trail()]
        if kind == "if":
            out += self.body(ctx, depth, level, f"if {self.e()}")
            for _ in range(r.randrange(3)):
                out += self.decorations(level)
                out += self.body(ctx, depth, level, f"else if {self.e()}")
            if self.chance(0.5):
                out += self.decorations(level)
                out += self.body(ctx, depth, level, "else")
            return out
        if kind == "while":
            return out + self.body(Ctx(True, ctx.function), depth, level, f"while {self.e()}")
        if kind == "for":
            header = f"for {r.choice(NAMES)} in {self.e()}"
            return out + self.body(Ctx(True, ctx.function), depth, level, header)
        if kind == "def":
            returns = r.choice(["", " -> Int", " -> Array<Int>"])
            header = f"def {r.choice(NAMES)}({self.params()}){returns}"
            return out + self.body(Ctx(False, True), depth, level, header)
        if kind == "action":
            reversible = self.chance(0.5)
            reqs = r.choice(["", " requires approval", " requires net.send",
                             " requires approval, pay.x", " requires model.a, approval"])
            header = (f"{'reversible' if reversible else 'irreversible'} action "
                      f"{r.choice(['act', 'send', 'pay'])}({self.params()}){reqs}")
            out += self.body(Ctx(False, True), depth, level, header)
            if reversible:
                out += self.decorations(level)
                out += self.body(Ctx(False, True), depth, level, "rollback")
            return out
        if kind == "policy":
            rules = [f"{r.choice(['allow', 'deny'])} {r.choice(CAPS)}"
                     for _ in range(r.randint(1, 3))]
            if len(rules) == 1 and self.chance(0.5):
                return out + [f"{pad}policy: {rules[0]}{self.trail()}"]
            return out + [f"{pad}policy:{self.trail()}"] + [
                f"{self.pad(level + 1)}{rule}{self.trail()}" for rule in rules]
        if kind == "session":
            return out + self.body(ctx, depth, level, f"session {r.choice(NAMES)}")
        if kind == "test":
            return out + self.body(ctx, depth, level,
                                   f"test {spell_string(r, r.choice(self.strings))}")
        if kind == "import":
            return out + [pad + r.choice([
                'import "lib/util.sns"', "import lib.util as u", "import a.b.c",
                'from "lib/x.sns" import f as g, h', "from lib.y import z"]) + self.trail()]
        if kind == "tool":
            desc = r.choice(["", " " + spell_string(r, r.choice(self.strings))])
            header = (f"{r.choice(['', 'async '])}tool {r.choice(NAMES)}({self.params()})"
                      f"{r.choice(['', ' returns String'])}"
                      f"{r.choice(['', ' requires web.search'])}{desc}")
            return out + self.body(Ctx(False, True), depth, level, header)
        header = f"{r.choice(['', 'async '])}agent {r.choice(NAMES)}"
        return out + self.body(Ctx(False, ctx.function), depth, level, header)

    def program(self):
        lines = self.block(Ctx(), 3, 0) + self.decorations(0)
        return "\n".join(lines) + self.rnd.choice(["\n", "", "\n\n"])


@st.composite
def programs(draw, full=False):
    pools = (draw(st.lists(FLOAT_TEXT, min_size=1, max_size=3)),
             draw(st.lists(STRING_VALUE, min_size=1, max_size=3)),
             draw(st.lists(st.integers(0, 10**30), min_size=1, max_size=3)),
             draw(st.lists(COMMENT_TEXT, max_size=3)))
    return Gen(draw(st.randoms(use_true_random=True)), pools, full).program()


@st.composite
def expressions(draw):
    pools = (draw(st.lists(FLOAT_TEXT, min_size=1, max_size=3)),
             draw(st.lists(STRING_VALUE, min_size=1, max_size=3)),
             draw(st.lists(st.integers(0, 10**30), min_size=1, max_size=3)),
             ["# c"])
    return Gen(draw(st.randoms(use_true_random=True)), pools, False).expr(5)[0]


PROPERTY_SETTINGS = settings(max_examples=200, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow,
                                                    HealthCheck.data_too_large])


@PROPERTY_SETTINGS
@given(programs(full=True))
def test_fmt_is_idempotent(source):
    once = fmt(source)
    assert fmt(once) == once


@PROPERTY_SETTINGS
@given(programs())
def test_fmt_keeps_the_bytecode(source):
    check_properties(source)


@PROPERTY_SETTINGS
@given(expressions())
def test_expression_round_trip(expr):
    check_properties(f"print({expr})\n")


CORPUS = sorted(glob.glob(os.path.join(TESTS, "programs", "*", "*.sns")))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: os.path.relpath(p, TESTS))
def test_corpus_program(path):
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    try:
        once = format_source(source, path)
    except SenseSyntaxError:
        # Not a program (the corpus holds syntax-error cases too): it must not compile either.
        assert compile_outcome(source, path)[0] == "error"
        return
    assert format_source(once, path) == once
    assert compile_outcome(once, path) == compile_outcome(source, path)


def _comment_texts(source: str) -> list:
    from sensec.fmt import _scan
    return sorted(c.text for c in _scan(source.replace("\r\n", "\n"), "<test>")[1])


@PROPERTY_SETTINGS
@given(programs(full=True))
def test_fmt_keeps_every_comment_once(source):
    """No comment is lost or printed twice, wherever it sits (inside a literal laid out over
    lines, in a block on its header's line, after a closing bracket)."""
    assert _comment_texts(fmt(source)) == _comment_texts(source)
