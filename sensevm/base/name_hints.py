"""What a program probably meant by a name it uses undefined: the Sense spelling of a habit.

``None``, ``True``, ``pass``, ``null`` ... are legal names in Sense (a program may bind them),
so they are no syntax error; only when one is read and nothing binds it does the
``undefined variable`` message add the hint (docs/language.md, "Syntax errors").
"""

from __future__ import annotations

_HINTS = {
    "None": "did you mean nil?",
    "null": "did you mean nil?",
    "NULL": "did you mean nil?",
    "nullptr": "did you mean nil?",
    "undefined": "did you mean nil?",
    "True": "did you mean true?",
    "TRUE": "did you mean true?",
    "False": "did you mean false?",
    "FALSE": "did you mean false?",
    "pass": "Sense has no 'pass': write nil for a statement that does nothing",
    "end": "Sense blocks end where the indentation does: there is no 'end'",
    "this": "Sense has no 'this': pass the value to the function",
    "println": "did you mean print?",
    "puts": "did you mean print?",
    "echo": "did you mean print?",
    "printf": "did you mean print?",
}


def undefined_variable_message(name: str) -> str:
    """``undefined variable 'NAME'``, with a hint when NAME is another language's spelling."""
    hint = _HINTS.get(name)
    return f"undefined variable '{name}' ({hint})" if hint else f"undefined variable '{name}'"
