"""The ``sensec lsp`` server: pygls handles the protocol; each request is answered from the Workspace's analyses (features.py).

Analysing a file means parsing it, which takes about 0.1 ms a line: half a second for a
5,000-line file. So an edit only records the new text and schedules an analysis a moment later
(a burst of keystrokes makes one), on a single worker thread (the parser is not re-entrant, and
one analysis at a time is all a user needs); diagnostics are published when it ends. Hover,
definition, references, the outline and folds wait for the analysis of the text they are
asked about. Completion does not wait: it reads what is being typed from the current text and
names from the latest index, so it answers at once even on a large file.

No request may fail the editor: a bug in a feature is logged (window/logMessage and stderr)
and the request answers with nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import sys
import traceback

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import features as F
from .index import Diagnostic
from .workspace import Workspace

DEBOUNCE = 0.15     # seconds after the last edit before the text is analysed

_SEVERITY = {"error": t.DiagnosticSeverity.Error, "warning": t.DiagnosticSeverity.Warning,
             "info": t.DiagnosticSeverity.Information, "hint": t.DiagnosticSeverity.Hint}


class SenseLanguageServer(LanguageServer):
    def __init__(self):
        from importlib.metadata import PackageNotFoundError, version
        try:
            ours = version("sense-compiled")
        except PackageNotFoundError:
            ours = "0"
        super().__init__("sensec", ours,
                         text_document_sync_kind=t.TextDocumentSyncKind.Incremental)
        self.ws = Workspace()
        # One thread for everything that parses (see the module's doc).
        self.worker = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                            thread_name_prefix="sensec-lsp")
        self.pending: dict = {}      # uri -> the task that analyses its latest text

    # ---- documents
    def path_of(self, uri: str) -> str:
        return to_fs_path(uri) or uri

    def text_of(self, uri: str) -> str:
        return self.workspace.get_text_document(uri).source

    def schedule(self, uri: str, delay: float) -> None:
        old = self.pending.get(uri)
        if old is not None and not old.done():
            old.cancel()
        self.pending[uri] = asyncio.get_event_loop().create_task(self._analyse(uri, delay))

    async def _analyse(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        doc = self.workspace.get_text_document(uri)
        path, text, version = self.path_of(uri), doc.source, doc.version
        self.ws.set_text(path, text)
        loop = asyncio.get_event_loop()
        diagnostics = await loop.run_in_executor(self.worker, self._check, path)
        if diagnostics is not None:
            self.publish(uri, path, diagnostics, version)
        # The files that import this one are checked with it: check them again.
        for other in await loop.run_in_executor(self.worker, self.ws.importers, path):
            other_uri = F.uri_of(other)
            found = await loop.run_in_executor(self.worker, self._check, other)
            if found is not None:
                self.publish(other_uri, other, found, None)

    def _check(self, path: str):
        try:
            return self.ws.check(path)
        except Exception:           # a bug: say so, and leave the last diagnostics shown
            self.log_bug("checking " + path)
            return None

    def publish(self, uri: str, path: str, diagnostics, version) -> None:
        a = self.ws.cached(path)
        lines = a.lines if a is not None else []
        self.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
            uri=uri, version=version,
            diagnostics=[_diagnostic(lines, d) for d in diagnostics]))

    async def ready(self, uri: str) -> None:
        """Wait until the analysis of ``uri``'s latest text (if one is scheduled) is done."""
        while True:
            task = self.pending.get(uri)
            if task is None or task.done():
                return
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if self.pending.get(uri) is task:
                    return

    def log_bug(self, what: str) -> None:
        text = f"sensec lsp: internal error while {what}:\n{traceback.format_exc()}"
        sys.stderr.write(text)
        try:
            self.window_log_message(t.LogMessageParams(type=t.MessageType.Error, message=text))
        except Exception:
            pass


def _diagnostic(lines, d: Diagnostic) -> t.Diagnostic:
    return t.Diagnostic(range=F.to_range(lines, d.span), message=d.message,
                        severity=_SEVERITY.get(d.severity, t.DiagnosticSeverity.Error),
                        source="sensec", code=d.kind)


server = SenseLanguageServer()


def _guarded(what: str, default=None):
    """A request handler that answers ``default`` (and logs) instead of failing."""
    def wrap(fn):
        @functools.wraps(fn)
        async def handler(ls, params):
            try:
                return await fn(ls, params)
            except Exception:
                ls.log_bug(what)
                return default
        return handler
    return wrap


async def _in_worker(ls, fn, *args):
    return await asyncio.get_event_loop().run_in_executor(ls.worker, fn, *args)


@server.feature(t.INITIALIZED)
def initialized(ls: SenseLanguageServer, params):
    roots = [to_fs_path(f.uri) for f in (ls.workspace.folders or {}).values()]
    if not roots and ls.workspace.root_path:
        roots = [ls.workspace.root_path]
    ls.ws.roots = [r for r in roots if r]


@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: SenseLanguageServer, params: t.DidOpenTextDocumentParams):
    uri = params.text_document.uri
    ls.ws.set_text(ls.path_of(uri), params.text_document.text)
    ls.schedule(uri, 0)


@server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: SenseLanguageServer, params: t.DidChangeTextDocumentParams):
    uri = params.text_document.uri
    ls.ws.set_text(ls.path_of(uri), ls.text_of(uri))
    ls.schedule(uri, DEBOUNCE)


@server.feature(t.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: SenseLanguageServer, params: t.DidSaveTextDocumentParams):
    ls.schedule(params.text_document.uri, 0)


@server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: SenseLanguageServer, params: t.DidCloseTextDocumentParams):
    uri = params.text_document.uri
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.ws.close(ls.path_of(uri))
    ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(t.TEXT_DOCUMENT_HOVER)
@_guarded("answering a hover")
async def hover(ls: SenseLanguageServer, params: t.HoverParams):
    await ls.ready(params.text_document.uri)
    p = params.position
    return await _in_worker(ls, F.hover, ls.ws, ls.path_of(params.text_document.uri),
                            p.line, p.character)


@server.feature(t.TEXT_DOCUMENT_DEFINITION)
@_guarded("finding a definition")
async def definition(ls: SenseLanguageServer, params: t.DefinitionParams):
    await ls.ready(params.text_document.uri)
    p = params.position
    return await _in_worker(ls, F.definition, ls.ws, ls.path_of(params.text_document.uri),
                            p.line, p.character)


@server.feature(t.TEXT_DOCUMENT_REFERENCES)
@_guarded("finding references", [])
async def references(ls: SenseLanguageServer, params: t.ReferenceParams):
    await ls.ready(params.text_document.uri)
    p = params.position
    return await _in_worker(ls, F.references, ls.ws, ls.path_of(params.text_document.uri),
                            p.line, p.character, params.context.include_declaration)


@server.feature(t.TEXT_DOCUMENT_COMPLETION,
                t.CompletionOptions(trigger_characters=[".", " "]))
@_guarded("completing", t.CompletionList(is_incomplete=False, items=[]))
async def completion(ls: SenseLanguageServer, params: t.CompletionParams):
    uri = params.text_document.uri
    if ls.ws.index(ls.path_of(uri)) is None:
        await ls.ready(uri)         # nothing analysed yet: the first analysis, then answer
    p = params.position
    return F.completion(ls.ws, ls.path_of(uri), ls.text_of(uri), p.line, p.character)


@server.feature(t.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@_guarded("making the outline", [])
async def document_symbol(ls: SenseLanguageServer, params: t.DocumentSymbolParams):
    await ls.ready(params.text_document.uri)
    return F.document_symbols(ls.ws, ls.path_of(params.text_document.uri))


@server.feature(t.TEXT_DOCUMENT_FOLDING_RANGE)
@_guarded("making folds", [])
async def folding_range(ls: SenseLanguageServer, params: t.FoldingRangeParams):
    await ls.ready(params.text_document.uri)
    return F.folding_ranges(ls.ws, ls.path_of(params.text_document.uri))


@server.feature(t.TEXT_DOCUMENT_FORMATTING)
@_guarded("formatting")
async def formatting(ls: SenseLanguageServer, params: t.DocumentFormattingParams):
    uri = params.text_document.uri
    return await _in_worker(ls, F.formatting, ls.text_of(uri), ls.path_of(uri))


def serve() -> None:
    server.start_io()
