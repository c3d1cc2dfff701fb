"""The files the language server knows: the editor's open texts over what is on disk, their analyses, the imports between them and the capabilities they name.

A file that imports another is checked with it, as ``sensec check`` does: an imported module
that does not compile, cannot be found or lies outside the importing file's directory is an
error at the import that reaches it. The imported module's text is the editor's when it is
open (unsaved edits count), else the file's.
"""

from __future__ import annotations

import os
import re
import threading
import time

from sensevm.base.errors import SenseError

from .index import Analysis, Diagnostic, analyse_deep

# A capability where a program names one: after `requires` (and a comma), `allow`, `deny`.
_CAPABILITY = re.compile(
    r"\b(?:requires\s+(?:approval\s*,\s*)?|allow\s+|deny\s+)([^\W\d][\w]*(?:\.\w+)*)")
_SCAN_LIMIT = 2000            # workspace files read for capabilities, at most
_SCAN_EVERY = 10.0            # seconds a walk of the workspace folders is reused


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Workspace:
    def __init__(self):
        self.open: dict = {}          # path -> the editor's text
        self.roots: list = []         # the workspace folders
        self._latest: dict = {}       # path -> (text, Analysis) of that text
        self._indexed: dict = {}      # path -> the latest Analysis that has a tree
        self._scanned: dict = {}      # path -> (mtime, capabilities) of files not open
        self._files = (0.0, [])       # when the folders were walked, and the files found
        self._lock = threading.RLock()
        from .std_docs import fill
        fill()          # the std. modules' members, read from the library itself

    # ---- texts
    def set_text(self, path: str, text: str) -> None:
        with self._lock:
            self.open[path] = text

    def close(self, path: str) -> None:
        with self._lock:
            self.open.pop(path, None)

    def text_of(self, path: str):
        with self._lock:
            text = self.open.get(path)
        if text is not None:
            return text
        from ..driver import read_source
        try:
            return read_source(path)
        except (SenseError, OSError, ValueError):
            return None

    # ---- analyses
    def analysis(self, path: str, text: str | None = None) -> Analysis | None:
        """The analysis of ``path``'s current text (computed once per text)."""
        if text is None:
            text = self.text_of(path)
            if text is None:
                return None
        with self._lock:
            cached = self._latest.get(path)
        if cached is not None and cached[0] == text:
            return cached[1]
        a = analyse_deep(text, path)
        with self._lock:
            self._latest[path] = (text, a)
            if a.tree is not None:
                self._indexed[path] = a
        return a

    def cached(self, path: str) -> Analysis | None:
        """The last analysis made of ``path``, without analysing anything."""
        with self._lock:
            cached = self._latest.get(path)
        return cached[1] if cached else None

    def index(self, path: str) -> Analysis | None:
        """The latest analysis of ``path`` with names in it: the current text's if it parsed
        (perhaps repaired), else the last that did (its lines may be a few edits old)."""
        with self._lock:
            latest = self._latest.get(path)
            if latest is not None and latest[1].tree is not None:
                return latest[1]
            return self._indexed.get(path) or (latest[1] if latest else None)

    # ---- checking
    def check(self, path: str) -> list:
        """Every diagnostic of ``path``: its own errors, then those of what it imports."""
        a = self.analysis(path)
        if a is None:
            return []
        out = list(a.diagnostics)
        if a.tree is not None and not a.repaired:
            root = os.path.realpath(os.path.dirname(os.path.abspath(path)))
            out.extend(self.import_diagnostics(a, root))
        return out

    def import_diagnostics(self, a: Analysis, root: str) -> list:
        out = []
        seen = {os.path.realpath(a.path)}
        for imp in a.imports:
            if imp.std:
                continue
            problem = self._module_problem(imp.path, imp.ref.text, root, seen)
            if problem:
                out.append(Diagnostic(imp.span, problem, "SenseImportError"))
        return out

    def _module_problem(self, path: str, rel: str, root: str, seen: set):
        """What is wrong with the module at ``path`` and everything it imports, or None."""
        real = os.path.realpath(path)
        if not _inside(real, root):
            return (f"import of '{rel}' reaches outside the program's directory {root} (it "
                    f"resolves to {real}); pass --import-root to allow imports from elsewhere")
        if real in seen:
            return None
        seen.add(real)
        text = self.text_of(path)
        if text is None:
            return f"module not found: '{rel}' (resolved to {os.path.abspath(path)})"
        sub = self.analysis(path, text)
        errors = [d for d in sub.diagnostics if d.severity == "error"]
        if errors:
            d = errors[0]
            return f"{rel}:{d.span.line + 1}:{d.span.col + 1}: {d.kind}: {d.message}"
        for imp in sub.imports:
            if imp.std:
                continue
            problem = self._module_problem(imp.path, imp.ref.text, root, seen)
            if problem:
                return f"in {rel}: {problem}"
        return None

    def importers(self, path: str) -> list:
        """The open files that import ``path``, directly or through other modules."""
        real = os.path.realpath(path)
        out = []
        with self._lock:
            opened = list(self.open)
        for p in opened:
            if p == path:
                continue
            if self._reaches(p, real, set()):
                out.append(p)
        return out

    def _reaches(self, path: str, real: str, seen: set) -> bool:
        a = self.cached(path)
        if a is None:
            return False
        for imp in a.imports:
            if imp.path is None:
                continue
            r = os.path.realpath(imp.path)
            if r == real:
                return True
            if r not in seen:
                seen.add(r)
                if self._reaches(imp.path, real, seen):
                    return True
        return False

    # ---- capabilities
    def capabilities(self) -> set:
        """Every capability declared (``requires``) or used in a policy, in the open files and
        in the ``.sns`` files under the workspace folders."""
        caps = set()
        with self._lock:
            analyses = [a for _, a in self._latest.values()]
            opened = set(self.open)
        for a in analyses:
            caps |= a.capabilities
        for path in self._workspace_files():
            if path in opened:
                continue
            try:
                mtime = os.stat(path).st_mtime_ns
            except OSError:
                continue
            hit = self._scanned.get(path)
            if hit is None or hit[0] != mtime:
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        found = set(_CAPABILITY.findall(fh.read()))
                except OSError:
                    found = set()
                hit = self._scanned[path] = (mtime, found)
            caps |= hit[1]
        return caps

    def workspace_files(self) -> list:
        """The .sns files under the workspace folders (the walk is reused a while)."""
        return self._workspace_files()

    def _workspace_files(self):
        # A completion must not walk a large tree each time: the walk is reused a while.
        when, files = self._files
        if time.monotonic() - when > _SCAN_EVERY:
            files = list(self._walk())
            self._files = (time.monotonic(), files)
        return files

    def _walk(self):
        count = 0
        for root in self.roots:
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames
                               if not d.startswith(".") and d not in ("node_modules",
                                                                      "__pycache__")]
                for f in filenames:
                    if f.endswith(".sns"):
                        count += 1
                        if count > _SCAN_LIMIT:
                            return
                        yield os.path.join(dirpath, f)
