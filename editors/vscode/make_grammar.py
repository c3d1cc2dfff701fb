"""Writes syntaxes/sense.tmLanguage.json, the TextMate grammar of Sense, from the language's own tables (keywords, builtins, types).

    python editors/vscode/make_grammar.py        # rewrite it
    python editors/vscode/make_grammar.py --check  # exit 1 if the file is not what it makes

The reserved words come from sensevm/base/keywords.py and the builtins from
sensevm/base/builtins.py, so the highlighting never drifts from the compiler
(tests/test_vscode_extension.py runs --check).
"""

from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "syntaxes", "sense.tmLanguage.json")


def grammar() -> dict:
    sys.path.insert(0, ROOT)
    from sensevm.base.builtins import BUILTINS
    from sensevm.base.keywords import KEYWORDS
    from sensevm.cli.highlight import TYPES

    constants = ("true", "false", "nil")
    operators = ("and", "or", "not")
    declarations = ("def", "action", "tool", "agent", "model", "memory", "test")
    control = tuple(k for k in KEYWORDS
                    if k not in constants + operators + declarations)

    def words(ws):
        return r"\b(?:" + "|".join(re.escape(w) for w in sorted(ws, key=lambda w: (-len(w), w))) + r")\b"

    return {
        "$schema": "https://raw.githubusercontent.com/martinring/tmlanguage/master/tmlanguage.json",
        "name": "Sense",
        "scopeName": "source.sense",
        "fileTypes": ["sns"],
        "patterns": [
            {"include": "#comment"}, {"include": "#string"}, {"include": "#declaration"},
            {"include": "#rollback"}, {"include": "#native"}, {"include": "#capability"},
            {"include": "#number"},
            {"include": "#keyword"}, {"include": "#builtin"}, {"include": "#type"},
        ],
        "repository": {
            "comment": {"name": "comment.line.number-sign.sense", "match": "#.*$"},
            "string": {"patterns": [
                {"name": "string.quoted.triple.sense", "begin": '"""', "end": '"""',
                 "patterns": [{"include": "#escape"}]},
                {"name": "string.quoted.double.sense", "begin": '"', "end": '"',
                 "patterns": [{"include": "#escape"}]},
            ]},
            "escape": {"name": "constant.character.escape.sense", "match": r"\\."},
            "declaration": {
                "match": r"\b(def|action|tool|agent|model|memory)\s+([^\W\d]\w*)",
                "captures": {"1": {"name": "storage.type.sense"},
                             "2": {"name": "entity.name.function.sense"}}},
            "native": {"match": r"\b(native)(::)([^\W\d]\w*)",
                       "captures": {"1": {"name": "keyword.other.native.sense"},
                                    "2": {"name": "keyword.operator.sense"},
                                    "3": {"name": "support.function.native.sense"}}},
            "rollback": {"match": r"^\s*(rollback)(?=\s*:)",
                         "captures": {"1": {"name": "keyword.control.sense"}}},
            "capability": {
                "match": r"\b(requires|allow|deny)\s+((?:approval\s*,\s*)?[^\W\d][\w]*(?:\.\w+)*)",
                "captures": {"1": {"name": "keyword.other.sense"},
                             "2": {"name": "entity.name.tag.capability.sense"}}},
            "number": {"name": "constant.numeric.sense", "match": r"\b\d+(?:\.\d+)?\b"},
            "keyword": {"patterns": [
                {"name": "constant.language.sense", "match": words(constants)},
                {"name": "keyword.operator.word.sense", "match": words(operators)},
                {"name": "storage.type.sense", "match": words(declarations)},
                {"name": "keyword.control.sense", "match": words(control)},
            ]},
            "builtin": {"name": "support.function.builtin.sense",
                        "match": words(b.name for b in BUILTINS) + r"(?=\s*\()"},
            "type": {"name": "support.type.sense", "match": words(TYPES)},
        },
    }


def render() -> str:
    return json.dumps(grammar(), indent=2, ensure_ascii=False) + "\n"


def main(argv) -> int:
    text = render()
    if "--check" in argv:
        try:
            with open(OUT, encoding="utf-8") as fh:
                current = fh.read()
        except OSError:
            current = None
        if current != text:
            print(f"{OUT} is out of date: run python editors/vscode/make_grammar.py",
                  file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
