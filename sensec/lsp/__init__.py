"""``sensec lsp``: the language server for Sense (diagnostics, hover, definitions, references, completion, outline, folds, formatting) over stdio.

It needs pygls (``pip install 'sense-compiled[lsp]'``); everything else in sensec works
without it, and nothing outside this package imports it.
"""

from __future__ import annotations

import sys

INSTALL_HINT = ("sensec lsp needs the pygls package, which is not installed; install it with\n"
                "    pip install 'sense-compiled[lsp]'\n"
                "(or: pip install pygls)")


def main() -> int:
    """Serve over stdin/stdout until the editor says exit; 2 if pygls is missing."""
    try:
        import pygls  # noqa: F401
        import lsprotocol  # noqa: F401
    except ImportError:
        sys.stderr.write(INSTALL_HINT + "\n")
        return 2
    from .server import serve
    serve()
    return 0
