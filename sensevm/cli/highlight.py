"""A Pygments lexer for Sense (``*.sns``), shared by pygmentize, documentation and the REPL."""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, default, include, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Whitespace)

__all__ = ["SenseLexer", "KEYWORDS", "BUILTINS", "TYPES"]

# From sensevm, not sensec.lexer: highlighting (pygmentize, the REPL) never imports the compiler.
from sensevm.base.errors import CATCHABLE, UNCATCHABLE
from sensevm.base.keywords import KEYWORDS

_CONSTANTS = ("true", "false", "nil")
_WORD_OPERATORS = ("and", "or", "not")
_DECLARATION_PREFIXES = ("reversible", "irreversible", "async", "persistent")
# Handled by dedicated rules (they change what the following words mean).
_SPECIAL = ("def", "action", "tool", "agent", "requires", "allow", "deny", "import", "from")
_PLAIN_KEYWORDS = tuple(k for k in KEYWORDS
                        if k not in _CONSTANTS + _WORD_OPERATORS + _DECLARATION_PREFIXES
                        + _SPECIAL)

# Spec 9.2, 15 and 18: every name the builtin scope binds, including the retired ones that
# still answer with a helpful error (the one table in sensevm.base, shared with the language
# server).
from sensevm.base.builtins import BUILTINS as _BUILTIN_DOCS  # noqa: E402

BUILTINS = tuple(b.name for b in _BUILTIN_DOCS)

# Spec 4.1 and 4.7 (and EXTENSIONS.md E1's Map): the annotation names with a meaning.
TYPES = (
    "Int", "Float", "String", "Bool", "Nil", "Array", "Map", "Function", "Module", "Action",
    "Tool", "Future", "Agent", "Model", "Answer", "Memory", "Skill", "McpServer", "Python", "Any",
    "Error",
)

_IDENT = r"[^\W\d]\w*"

# The classes an `except` clause names (sensevm.base.errors.CATCHABLE), and the one it cannot.
ERROR_CLASSES = tuple(CATCHABLE) + tuple(UNCATCHABLE)


class SenseLexer(RegexLexer):
    """Sense, the agent language compiled by ``sensec`` and run by ``sensevm``."""

    name = "Sense"
    aliases = ["sense"]
    filenames = ["*.sns"]
    mimetypes = ["text/x-sense"]
    url = "https://pypi.org/project/sense-lang/"
    version_added = ""

    tokens = {
        "root": [
            # 'rollback' is a soft keyword only where it opens an action's rollback block; as a
            # call it is the retired builtin. ('compensate' is its old spelling, still recognised
            # there to give a rename hint.) Before the whitespace rule, which would eat the '^'.
            (r"^([ \t]*)(rollback|compensate)(?=[ \t]*:)", bygroups(Whitespace, Keyword)),
            # The error handling forms (EXTENSIONS.md E4) are soft keywords the same way: at a
            # line's start, followed by what the form needs (sensec.lexer.soft_keyword_type;
            # `try: Int = 1` is still a declaration there, which this approximation ignores).
            (r"^([ \t]*)(try|finally)(?=[ \t]*:)", bygroups(Whitespace, Keyword)),
            (r"^([ \t]*)(except)(?=[ \t]*:|[ \t]+[^\W\d])", bygroups(Whitespace, Keyword)),
            (r"^([ \t]*)(raise)(?=[ \t]*(?:#|$)|[ \t]+[\w\"])", bygroups(Whitespace, Keyword)),
            (words(ERROR_CLASSES, suffix=r"\b"), Name.Exception),
            (r"\n", Whitespace),
            (r"[ \t\f\v]+", Whitespace),
            (r"#.*$", Comment.Single),
            include("strings"),
            (r"(def|action|tool)(\b[ \t]*)(" + _IDENT + ")",
             bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (r"(agent)(\b[ \t]*)(" + _IDENT + ")",
             bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            (r"(session)(\b[ \t]*)(" + _IDENT + ")", bygroups(Keyword, Whitespace, Name.Label)),
            # A native call of the standard library's own files (docs/stdlib.md).
            (r"(native)(::)(" + _IDENT + ")", bygroups(Keyword.Pseudo, Operator, Name.Builtin)),
            (words(("def", "action", "tool", "agent"), suffix=r"\b"), Keyword.Declaration),
            (words(_DECLARATION_PREFIXES, suffix=r"\b"), Keyword.Declaration),
            # Capability paths: reserved words are legal segments there (spec 2.4).
            (r"(requires|allow|deny)\b", Keyword, "capabilities"),
            (r"import\b", Keyword.Namespace, "module"),
            (r"from\b", Keyword.Namespace, ("from-names", "module")),
            (words(_CONSTANTS, suffix=r"\b"), Keyword.Constant),
            (words(_WORD_OPERATORS, suffix=r"\b"), Operator.Word),
            (words(_PLAIN_KEYWORDS, suffix=r"\b"), Keyword),
            (words(TYPES, suffix=r"\b"), Keyword.Type),
            (r"(\.)([ \t]*)(" + _IDENT + ")", bygroups(Punctuation, Whitespace, Name.Attribute)),
            (words(BUILTINS, suffix=r"\b"), Name.Builtin),
            include("numbers"),
            (r"==|!=|<=|>=|->|[-+*/%]=|[-+*/%<>=]", Operator),
            (r"[()\[\]{},:.]", Punctuation),          # { } : a map literal (EXTENSIONS.md E1)
            (_IDENT, Name),
        ],
        "numbers": [
            (r"\d+\.\d+", Number.Float),
            (r"\d+", Number.Integer),
        ],
        "strings": [
            # f-strings: the text as a string, each {expression} highlighted as code.
            (r'f"""', String.Double, "ftriple"),
            (r'f"', String.Double, "fstring"),
            (r'"""', String.Double, "triple"),
            (r'"', String.Double, "string"),
        ],
        "escapes": [
            # \n \t \r \" \\ are named escapes; any other \x means x, but is still an escape.
            (r"\\[\s\S]", String.Escape),
        ],
        "string": [
            include("escapes"),
            (r'[^"\\]+', String.Double),
            (r'"', String.Double, "#pop"),
        ],
        "triple": [
            include("escapes"),
            (r'"""', String.Double, "#pop"),
            (r'[^"\\]+', String.Double),
            (r'"', String.Double),
        ],
        "fstring": [
            include("escapes"),
            (r"\{\{|\}\}", String.Escape),
            (r"\{", String.Interpol, "fexpr"),
            (r'[^"\\{}]+', String.Double),
            (r'"', String.Double, "#pop"),
            (r"\}", String.Double),        # a single '}': the compiler says what is wrong
        ],
        "ftriple": [
            include("escapes"),
            (r"\{\{|\}\}", String.Escape),
            (r"\{", String.Interpol, "ftriple-expr"),
            (r'"""', String.Double, "#pop"),
            (r'[^"\\{}]+', String.Double),
            (r'["}]', String.Double),
        ],
        # An f-string's expression: no string of the f-string's own quotes can stand in it, so a
        # quote ends the f-string (the compiler reports the unclosed brace).
        "fexpr": [
            (r"\}", String.Interpol, "#pop"),
            (r'"', String.Double, "#pop:2"),
            include("expression"),
        ],
        "ftriple-expr": [
            (r"\}", String.Interpol, "#pop"),
            (r'"""', String.Double, "#pop:2"),
            (r'f"', String.Double, "fstring"),
            (r'"', String.Double, "string"),
            include("expression"),
        ],
        "expression": [
            (r"\s+", Whitespace),
            (words(_CONSTANTS, suffix=r"\b"), Keyword.Constant),
            (words(_WORD_OPERATORS, suffix=r"\b"), Operator.Word),
            (words(_PLAIN_KEYWORDS, suffix=r"\b"), Keyword),
            (words(TYPES, suffix=r"\b"), Keyword.Type),
            (r"(\.)([ \t]*)(" + _IDENT + ")", bygroups(Punctuation, Whitespace, Name.Attribute)),
            (words(BUILTINS, suffix=r"\b"), Name.Builtin),
            include("numbers"),
            (r"==|!=|<=|>=|->|[-+*/%<>=]", Operator),
            (r"[()\[\],:.]", Punctuation),
            (_IDENT, Name),
        ],
        "capabilities": [
            (r"[ \t]+", Whitespace),
            (r"approval\b", Keyword),
            (_IDENT + r"(?:[ \t]*\.[ \t]*" + _IDENT + r")*", Name.Namespace),
            (r",", Punctuation),
            # Anything else (':', a tool's description, the end of the line) ends the list.
            default("#pop"),
        ],
        "module": [
            (r"[ \t]+", Whitespace),
            (r"python\b", Keyword.Namespace),
            (r'"""', String.Double, ("#pop", "triple")),
            (r'"', String.Double, ("#pop", "string")),
            (_IDENT + r"(?:[ \t]*\.[ \t]*" + _IDENT + r")*", Name.Namespace, "#pop"),
            default("#pop"),
        ],
        # After 'from MODULE': 'import' and the plain names it binds, to the end of the line.
        "from-names": [
            (r"[ \t]+", Whitespace),
            (r"import\b", Keyword.Namespace),
            (r"as\b", Keyword),
            (_IDENT, Name),
            (r",", Punctuation),
            default("#pop"),
        ],
    }
