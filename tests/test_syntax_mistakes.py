"""Common syntax mistakes, each with the exact message ``sensec check`` / ``sensec build`` gives.

Issue 25, "errors a person can act on": an unclosed bracket or string is reported where it
opens, a wrong closer names both brackets, and a habit from another language names the Sense
spelling (sensec/syntax_hints.py, lexer.py; the list is in docs/language.md). The table is the
real output of one ``sensec check DIR`` run over a file per row; a property holds every broken
program to a positioned error inside the file, never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from program_strategies import programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, source, line, column, message)
MISTAKES = [
    ('and_and', 'a = true\nb = false\nif a && b:\n    print(1)\n',
     3, 6, "unexpected character '&' -- '&&' is not an operator in Sense; write 'and'"),
    ('arrow_function', 'f = (x) => x * 2\n',
     1, 9, "Sense has no '=>' -- declare a function with 'def NAME(params):' (a return type is written '-> Type')"),
    ('bang', 'x = true\nif !x:\n    print(x)\n',
     2, 4, "'!' is not an operator in Sense — use 'not' for negation and '!=' for not-equal"),
    ('block_comment', '/* a comment */\nx = 1\n',
     1, 1, "Sense comments start with '#', not '//' or '/*'"),
    ('catch', 'try:\n    x = 1\ncatch e:\n    print(e)\n',
     3, 1, "Sense spells 'catch' as 'except' -- 'try:' ... 'except SenseError as e:'"),
    ('class', 'class Point:\n    x = 0\n',
     1, 1, 'Sense has no classes -- use maps ({"key": value}) and functions'),
    ('const', 'const limit = 10\n',
     1, 1, "Sense declares no variables with 'const' -- write 'limit = ...' (or 'local limit = ...' for a new local)"),
    ('default_parameter', 'def greet(name = "you"):\n    print(name)\n',
     1, 16, 'Sense has no default parameter values -- every parameter is passed'),
    ('elif', 'x = 1\nif x == 1:\n    print(1)\nelif x == 2:\n    print(2)\n',
     4, 1, "Sense has no 'elif' -- write 'else if CONDITION:'"),
    ('elsif', 'x = 1\nif x == 1:\n    print(1)\nelsif x == 2:\n    print(2)\n',
     4, 1, "Sense has no 'elsif' -- write 'else if CONDITION:'"),
    ('empty_block', 'def f():\nprint(1)\n',
     2, 1, "expected an indented block (got IDENT 'print') -- a block needs at least one statement (write 'nil' for a block that does nothing)"),
    ('floor_division', 'print(7 // 2)\n',
     1, 9, "Sense has no '//' (integer division) operator -- '/' divides (7 / 2 is 3.5), and int(a / b) drops the fraction (rounding toward zero)"),
    ('fn', 'fn add(a, b):\n    return a + b\n',
     1, 1, "Sense declares functions with 'def' -- write 'def add(...):'"),
    ('func', 'func add(a, b):\n    return a + b\n',
     1, 1, "Sense declares functions with 'def' -- write 'def add(...):'"),
    ('function', 'function add(a, b) {\n    return a + b\n}\n',
     1, 1, "Sense declares functions with 'def' -- write 'def add(...):'"),
    ('if_brace', 'x = 1\nif x {\n    print(x)\n}\n',
     2, 6, "Sense uses indentation for blocks, not '{ }' — write ':' then an indented block instead"),
    ('is_operator', 'x = nil\nif x is nil:\n    print(x)\n',
     2, 6, "Sense has no 'is' -- compare with '==' (and 'is not' with '!=')"),
    ('lambda', 'double = lambda x: x * 2\n',
     1, 10, "Sense has no 'lambda' -- define a function with 'def' and pass its name"),
    ('let', 'let x = 1\n',
     1, 1, "Sense declares no variables with 'let' -- write 'x = ...' (or 'local x = ...' for a new local)"),
    ('match', 'x = 1\nmatch x:\n    print(x)\n',
     2, 1, "Sense has no 'match' statement -- write 'if ... else if ...'"),
    ('minus_minus', 'i = 3\ni--\n',
     2, 2, "Sense has no '--' -- write 'x -= 1'"),
    ('mismatched_bracket_paren', 'x = [1, 2)\n',
     1, 10, "')' does not match '[' opened at line 1, column 5 -- close that one with ']' first"),
    ('mismatched_paren_bracket', 'x = (1 + 2]\n',
     1, 11, "']' does not match '(' opened at line 1, column 5 -- close that one with ')' first"),
    ('missing_colon_def', 'def f()\n    return 1\n',
     1, 8, "expected ':' at the end of the 'def' line (got NEWLINE '')"),
    ('missing_colon_for', 'for x in [1, 2]\n    print(x)\n',
     1, 16, "expected ':' at the end of the 'for' line (got NEWLINE '')"),
    ('missing_colon_if', 'x = 1\nif x == 1\n    print(x)\n',
     2, 10, "expected ':' at the end of the 'if' line (got NEWLINE '')"),
    ('missing_colon_while', 'x = 1\nwhile x < 3\n    x = x + 1\n',
     2, 12, "expected ':' at the end of the 'while' line (got NEWLINE '')"),
    ('not_double_equals', 'x = 1\nif x !== 2:\n    print(x)\n',
     2, 6, "Sense has no '!==' -- '!=' compares (it never converts types)"),
    ('or_or', 'a = true\nb = false\nif a || b:\n    print(1)\n',
     3, 6, "unexpected character '|' -- '||' is not an operator in Sense; write 'or'"),
    ('plus_plus', 'i = 0\ni++\n',
     2, 2, "Sense has no '++' -- write 'x += 1'"),
    ('power', 'print(2 ** 10)\n',
     1, 9, "Sense has no '**' (power) operator -- multiply (x * x), or multiply in a loop for a larger power"),
    ('pre_increment', 'i = 0\n++i\n',
     2, 1, "Sense has no '++' -- write 'x += 1'"),
    ('print_statement', 'print "hello"\n',
     1, 7, "'print' is a function in Sense -- call it with parentheses: print(...)"),
    ('question_colon', 'x = 1\ny = x > 0 ? 1 : 2\n',
     2, 11, "unexpected character '?' -- Sense has no '?:' or '?.' operators; use an 'if' statement (or compare with nil)"),
    ('range_dots', 'for i in 0..10:\n    print(i)\n',
     1, 11, "Sense has no '..' range -- write range(a, b) (from a up to, not including, b)"),
    ('reserved_word_name', 'from = 1\n',
     1, 1, "'from' is a reserved word in Sense and cannot be a name -- choose another name"),
    ('semicolon', 'x = 1;\n',
     1, 6, "semicolons aren't used in Sense — start a new line instead"),
    ('single_quotes', "print('hi')\n",
     1, 7, 'unexpected character "\'" -- strings are written in double quotes: "..."'),
    ('slash_comment', '// a comment\nx = 1\n',
     1, 1, "Sense comments start with '#', not '//' or '/*'"),
    ('stray_paren', 'print(1))\n',
     1, 9, "')' closes nothing -- no '(' is open here"),
    ('switch', 'x = 1\nswitch x:\n    print(x)\n',
     2, 1, "Sense has no 'switch' statement -- write 'if ... else if ...'"),
    ('ternary', 'x = 1\ny = 1 if x else 2\n',
     2, 7, "Sense has no conditional expression ('a if c else b') -- use an 'if' statement that assigns in both branches"),
    ('then', 'x = 1\nif x then\n    print(x)\n',
     2, 6, "Sense needs no 'then' -- end the line with ':' and indent the block"),
    ('throw', 'throw "bad"\n',
     1, 1, 'Sense spells \'throw\' as \'raise\' -- \'raise "message"\''),
    ('trailing_comma_array', 'xs = [1, 2, 3,]\n',
     1, 14, "an array literal cannot end with a comma -- remove the ',' before ']'"),
    ('triple_equals', 'x = 1\nif x === 1:\n    print(x)\n',
     2, 6, "Sense has no '===' -- '==' compares (it never converts types)"),
    ('unclosed_brace', 'm = {"a": 1\n',
     1, 5, "'{' opened here is never closed (the file ends at line 2, column 1, still inside it)"),
    ('unclosed_bracket', 'xs = [1, 2,\n    3\nprint(xs)\n',
     1, 6, "'[' opened here is never closed (the parser gave up at line 3, column 1: expected ']' after the array elements (got IDENT 'print'))"),
    ('unclosed_nested', 'print(len([1, 2)\n',
     1, 16, "')' does not match '[' opened at line 1, column 11 -- close that one with ']' first"),
    ('unclosed_paren', 'x = (1 + 2\nprint(x)\n',
     1, 5, "'(' opened here is never closed (the parser gave up at line 2, column 1: expected ')' after the expression (got IDENT 'print'))"),
    ('unclosed_paren_eof', 'print(1\n',
     1, 6, "'(' opened here is never closed (the file ends at line 2, column 1, still inside it)"),
    ('unterminated_fstring', 'name = "a"\nprint(f"hi {name}\n',
     2, 7, 'unterminated string literal -- the \'f"\' opened here is never closed (the file ends at line 3, column 1)'),
    ('unterminated_string', 'x = 1\nprint("abc)\ny = 2\n',
     2, 7, 'unterminated string literal -- the \'"\' opened here is never closed (the file ends at line 4, column 1)'),
    ('unterminated_triple', 'doc = """abc\n\n',
     1, 7, 'unterminated triple-quoted string literal -- the \'"""\' opened here is never closed (the file ends at line 3, column 1)'),
    ('var', 'var total = 0\n',
     1, 1, "Sense declares no variables with 'var' -- write 'total = ...' (or 'local total = ...' for a new local)"),
    ('walrus', 'x := 5\n',
     1, 3, "Sense has no ':=' -- assignment is already an expression: write '='"),
    ('while_brace', 'x = 1\nwhile x < 3 {\n    x = x + 1\n}\n',
     2, 13, "Sense uses indentation for blocks, not '{ }' — write ':' then an indented block instead"),
]


def _sensec(*args, cwd):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "sensec", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """Every row as a file of one directory, and what one ``sensec check DIR`` says."""
    root = tmp_path_factory.mktemp("mistakes")
    for name, source, *_ in MISTAKES:
        (root / f"{name}.sns").write_text(source, encoding="utf-8")
    proc = _sensec("check", ".", cwd=root)
    first = {}
    for line in proc.stderr.splitlines():
        if line.startswith("./") and ": SenseSyntaxError: " in line:
            where, message = line[2:].split(": SenseSyntaxError: ", 1)
            file, row, col = where.rsplit(":", 2)
            first.setdefault(file[:-4], (int(row), int(col), message))
    return root, proc, first


def test_there_are_at_least_forty_mistakes():
    assert len(MISTAKES) >= 40
    assert len({name for name, *_ in MISTAKES}) == len(MISTAKES)


def test_check_reports_every_file_and_fails(checked):
    _, proc, first = checked
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert sorted(first) == sorted(name for name, *_ in MISTAKES)


@pytest.mark.parametrize("name, source, line, col, message", MISTAKES,
                         ids=[row[0] for row in MISTAKES])
def test_mistake_message(checked, name, source, line, col, message):
    _, _, first = checked
    assert first[name] == (line, col, message)
    assert 1 <= line <= source.count("\n") + 1


@pytest.mark.parametrize("name", ["unclosed_paren", "elif", "power", "unterminated_string"])
def test_build_says_the_same(checked, name):
    root, _, first = checked
    proc = _sensec("build", f"{name}.sns", "-o", os.devnull, cwd=root)
    assert proc.returncode == 1
    line, col, message = first[name]
    assert proc.stderr.splitlines()[0] == f"{name}.sns:{line}:{col}: SenseSyntaxError: {message}"


def test_legal_names_stay_legal_and_hint_only_when_undefined(tmp_path):
    """None, True, pass, let, fn ... are names in Sense: a program binding them is unchanged;
    read undefined, the run-time error names the Sense spelling."""
    from sensec.driver import compile_source
    for source in ("None = 1\nprint(None)\n", "let = 2\nprint(let)\n", "fn = 3\nfn\n",
                   "True = 4\npass = True\n", "x = 0\nif x = 1:\n    print(x)\n"):
        compile_source(source, "ok.sns")
    (tmp_path / "none.sns").write_text("x = None\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-m", "sensevm", "run", "none.sns"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == (
        "none.sns:1:5: SenseNameError: undefined variable 'None' (did you mean nil?)")


def test_check_warns_of_an_assignment_as_condition(tmp_path):
    (tmp_path / "a.sns").write_text("x = 0\nif x = 1:\n    print(x)\n", encoding="utf-8")
    proc = _sensec("check", "a.sns", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stderr == ("a.sns:2:6: warning: the condition of this 'if' assigns ('=') -- "
                           "to compare, write '=='\n")


def test_check_warns_of_names_nothing_binds(tmp_path):
    """A name read and bound nowhere in the file (nor a builtin) is certainly undefined: a
    warning at its first read, with the nearest name or another language's spelling; names
    bound anywhere (later, in a function, as a parameter, an import, a loop, a handler) are
    not."""
    (tmp_path / "a.sns").write_text(
        "def greet(who):\n    prnt(\"hi \" + who)\n    return None\n"
        "for k in [1]:\n    total = k\nprint(total, later(), prnt)\n"
        "def later():\n    return 1\ntry:\n    x = 1\nexcept SenseError as e:\n    print(e)\n",
        encoding="utf-8")
    proc = _sensec("check", "a.sns", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stderr == (
        "a.sns:2:5: warning: undefined variable 'prnt' (did you mean print?): nothing in this "
        "file binds it\n"
        "a.sns:3:12: warning: undefined variable 'None' (did you mean nil?): nothing in this "
        "file binds it\n")


def test_no_program_of_the_corpus_that_runs_clean_is_warned_of_an_undefined_name():
    """The warning is never a false alarm on the corpus: every program it fires on expects an
    error (it reads the name on purpose)."""
    import glob
    from sensec.driver import check_warnings
    paths = (glob.glob(os.path.join(ROOT, "tests", "programs", "*", "*.sns"))
             + glob.glob(os.path.join(ROOT, "examples", "*.sns"))
             + glob.glob(os.path.join(ROOT, "stdlib", "*.sns")))
    wrong = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if "expect error" in text:
            continue
        if any("binds it" in message for _, message in check_warnings(path)):
            wrong.append(os.path.relpath(path, ROOT))
    assert sorted(wrong) == sorted([
        "tests/programs/actions/failing_body_error_kinds.sns",
        "tests/programs/actions/rollback_failure_can_be_retried.sns",
        "tests/programs/errors_handled/basics.sns",
        "tests/programs/errors_handled/finally_error_replaces.sns",
        "tests/programs/errors_handled/hierarchy.sns",
        "tests/programs/test_blocks/every_error_kind_swallowed.sns",
        "tests/programs/test_blocks/test_with_session.sns",
        "tests/programs/truthiness/short_circuit.sns"])   # each reads one on purpose, caught


# ----------------------------------------------------------------------------- property

def _break(draw, source: str) -> str:
    how = draw(st.sampled_from(["drop_closer", "stray", "cut", "unclose_string", "double"]))
    if how == "drop_closer":
        spots = [i for i, c in enumerate(source) if c in ")]}"]
        if spots:
            i = draw(st.sampled_from(spots))
            return source[:i] + source[i + 1:]
    if how == "stray":
        i = draw(st.integers(0, len(source)))
        junk = draw(st.sampled_from(["(", ")", "[", "]", "{", "}", '"', '"""', 'f"', "**",
                                     "//", "elif", "let ", "&&", "++", "===", "=>", ":", ",",
                                     "\n    ", "'", "?", "!", "lambda "]))
        return source[:i] + junk + source[i:]
    if how == "cut":
        return source[:draw(st.integers(0, len(source)))]
    if how == "unclose_string":
        spots = [i for i, c in enumerate(source) if c == '"']
        if spots:
            i = draw(st.sampled_from(spots))
            return source[:i] + source[i + 1:]
    i = draw(st.integers(0, len(source)))
    return source[:i] + source[i:i + 3] + source[i:]


@st.composite
def broken_programs(draw):
    return _break(draw, draw(programs()))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_programs())
def test_broken_programs_get_positioned_errors(source):
    from sensec.driver import compile_source
    from sensec.grammar import parse_all_errors
    from sensevm.base.errors import SenseError
    lines = source.split("\n")

    def inside(err):
        assert err.pos is not None, err
        line, col = err.pos.line, err.pos.col
        assert 1 <= line <= len(lines), (err, line)
        assert 1 <= col <= len(lines[line - 1]) + 1, (err, line, col)

    try:
        compile_source(source, "broken.sns")
    except SenseError as err:
        for e in getattr(err, "errors", None) or [err]:
            inside(e)
    for err in parse_all_errors(source, "broken.sns"):
        inside(err)
