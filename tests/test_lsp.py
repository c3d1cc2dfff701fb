"""`sensec lsp` driven as an editor drives it: a real server process over stdio, real LSP messages (pytest-lsp), real example files."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed "
                                                      "(pip install -e '.[test]')")
from lsprotocol import types as t  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
PROGRAMS = os.path.join(ROOT, "tests", "programs")
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(scope="module", loop_scope="module",
                    config=ClientServerConfig(server_command=[sys.executable, "-m", "sensec",
                                                              "lsp"], server_env=ENV))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(t.InitializeParams(
        capabilities=t.ClientCapabilities(),
        workspace_folders=[t.WorkspaceFolder(uri=from_fs_path(ROOT), name="sense")]))
    yield
    await lsp_client.shutdown_session()


# ------------------------------------------------------------------------------ helpers

_versions: dict = {}


def _text(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


async def open_doc(client, path, text=None, *, wait=True):
    """didOpen ``path`` (its text, or ``text``) and return its diagnostics once published."""
    uri = from_fs_path(path)
    text = _text(path) if text is None else text
    _versions[uri] = 1
    client.diagnostics.pop(uri, None)
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri=uri, language_id="sense", version=1, text=text)))
    return await diagnostics_of(client, uri) if wait else None


async def diagnostics_of(client, uri, timeout=20.0):
    async def wait():
        while uri not in client.diagnostics:
            await client.wait_for_notification(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    await asyncio.wait_for(wait(), timeout)
    return client.diagnostics[uri]


async def until(client, condition, timeout=20.0):
    """Wait for notifications until ``condition()`` holds."""
    async def wait():
        while not condition():
            await client.wait_for_notification(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    await asyncio.wait_for(wait(), timeout)


async def change(client, path, start, end, new_text):
    """An incremental didChange replacing (line, col)..(line, col) with ``new_text``; the
    diagnostics published for the new version."""
    uri = from_fs_path(path)
    _versions[uri] += 1
    client.diagnostics.pop(uri, None)
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=_versions[uri]),
        content_changes=[t.TextDocumentContentChangePartial(
            range=t.Range(t.Position(*start), t.Position(*end)), text=new_text)]))
    return await diagnostics_of(client, uri)


def close_doc(client, path):
    client.text_document_did_close(t.DidCloseTextDocumentParams(
        t.TextDocumentIdentifier(from_fs_path(path))))


def where(text, needle, nth=0, into=0):
    """(line, column) of the ``nth`` occurrence of ``needle`` in ``text``, ``into`` chars in."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    i += into
    line = text.count("\n", 0, i)
    return line, i - (text.rfind("\n", 0, i) + 1)


def doc_pos(path, line_col):
    return dict(text_document=t.TextDocumentIdentifier(from_fs_path(path)),
                position=t.Position(*line_col))


async def hover_text(client, path, line_col):
    h = await client.text_document_hover_async(t.HoverParams(**doc_pos(path, line_col)))
    return h.contents.value if h is not None else None


async def labels(client, path, line_col):
    result = await client.text_document_completion_async(
        t.CompletionParams(**doc_pos(path, line_col)))
    items = result.items if isinstance(result, t.CompletionList) else result
    return [i.label for i in items]


def no_bugs_logged(client):
    bugs = [m.message for m in client.log_messages if m.type == t.MessageType.Error]
    assert bugs == []


# ------------------------------------------------------------------------------ diagnostics

async def test_a_syntax_error_is_published_on_open_at_the_compilers_position(client):
    from sensec.driver import check_file
    path = os.path.join(PROGRAMS, "syntax_errors", "missing_colon.sns")
    [expected] = check_file(path)
    [d] = await open_doc(client, path)
    assert d.message == expected.message
    assert d.severity == t.DiagnosticSeverity.Error and d.source == "sensec"
    assert (d.range.start.line, d.range.start.character) == \
        (expected.pos.line - 1, expected.pos.col - 1)
    close_doc(client, path)


async def test_a_resolver_error_has_the_range_of_its_word(client):
    path = os.path.join(PROGRAMS, "deliberate", "break_outside_loop.sns")
    text = _text(path)
    [d] = await open_doc(client, path)
    assert d.message == "'break' outside loop"
    line, col = where(text, "\nbreak", into=1)
    assert d.range == t.Range(t.Position(line, col), t.Position(line, col + len("break")))
    close_doc(client, path)


async def test_every_error_sensec_check_reports_is_published(client):
    from sensec.driver import check_file
    path = os.path.join(PROGRAMS, "syntax_errors", "brace_close.sns")
    expected = check_file(path)
    got = await open_doc(client, path)
    assert [(d.range.start.line + 1, d.range.start.character + 1, d.message) for d in got] == \
        [(e.pos.line, e.pos.col, e.message) for e in expected]
    close_doc(client, path)


async def test_the_warnings_of_sensec_check_are_published_as_warnings(client, tmp_path):
    from sensec.driver import check_warnings
    path = tmp_path / "assigns.sns"
    path.write_text("x = 0\nif x = 1:\n    print(x)\nwhile x == 1:\n    x = 2\n")
    [d] = await open_doc(client, str(path))
    [(pos, text)] = check_warnings(str(path))
    assert d.severity == t.DiagnosticSeverity.Warning and d.message == text
    assert (d.range.start.line + 1, d.range.start.character + 1) == (pos.line, pos.col) == (2, 6)
    close_doc(client, str(path))


async def test_diagnostics_follow_an_edit_and_its_undo(client, tmp_path):
    path = str(tmp_path / "fizzbuzz.sns")
    shutil.copy(os.path.join(EXAMPLES, "fizzbuzz.sns"), path)
    text = _text(path)
    assert list(await open_doc(client, path)) == []
    # Delete the ':' that ends the first `for` header: the published error moves in.
    line, col = where(text, "for ")
    colon = text.split("\n")[line].index(":")
    [d] = await change(client, path, (line, colon), (line, colon + 1), "")
    assert "expected ':'" in d.message and d.range.start.line == line
    assert list(await change(client, path, (line, colon), (line, colon), ":")) == []
    close_doc(client, path)


async def test_an_imported_module_is_checked_with_its_importer(client, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "util.sns").write_text("def twice(x):\n    return x * 2\n")
    main = tmp_path / "main.sns"
    main.write_text('import lib.util\nfrom "lib/gone.sns" import nothing\nprint(util.twice(2))\n')
    diags = await open_doc(client, str(main))
    [missing] = diags
    assert missing.message.startswith("module not found: 'lib/gone.sns'")
    assert missing.range.start == t.Position(1, 5)
    # The module, open in the editor and broken there (unsaved), breaks its importer too.
    await open_doc(client, str(lib / "util.sns"))
    await change(client, str(lib / "util.sns"), (1, 4), (1, 16), "break")
    expected = t.Diagnostic(range=t.Range(t.Position(0, 7), t.Position(0, 15)),
                            message="lib.util:2:5: SenseSyntaxError: 'break' outside loop",
                            severity=t.DiagnosticSeverity.Error, source="sensec",
                            code="SenseImportError")
    uri = from_fs_path(str(main))
    # Republished when the module changes (the importer itself was not edited).
    await until(client, lambda: expected in client.diagnostics.get(uri, ()))
    assert list(client.diagnostics[uri]) == [expected, missing]
    close_doc(client, str(lib / "util.sns"))
    close_doc(client, str(main))


# ------------------------------------------------------------------------------ hover

async def test_hover_on_an_action_tells_its_kind_capability_approval_and_rollback(client):
    path = os.path.join(EXAMPLES, "agent_approval.sns")
    text = _text(path)
    await open_doc(client, path)
    h = await hover_text(client, path, where(text, "refund(120)", into=2))
    assert "irreversible action refund(amount: Int) requires billing.refund, approval" in h
    assert "- capability: billing.refund" in h
    assert "- approval: required before commit" in h and "- rollback: none" in h
    h = await hover_text(client, path, where(text, "supervisor:"))
    assert "agent supervisor" in h
    h = await hover_text(client, path, where(text, "r.verify", into=3))
    assert "verify() -> Action" in h and "method of Action" in h
    h = await hover_text(client, path, where(text, 'ask_human("'))
    assert "ask_human(question) -> String" in h and "builtin" in h
    close_doc(client, path)


async def test_hover_on_a_tool_tells_capability_description_and_trust(client):
    path = os.path.join(EXAMPLES, "second_look.sns")
    text = _text(path)
    await open_doc(client, path)
    h = await hover_text(client, path, where(text, "lookup_contact", nth=1))
    assert "trusted tool lookup_contact(name: String) returns String requires contacts.read" in h
    assert "- description: address book" in h and "- trusted: yes" in h
    close_doc(client, path)


async def test_hover_shows_a_functions_signature_and_docstring(client, tmp_path):
    path = str(tmp_path / "doc.sns")
    text = ('def area(w: Int, h: Int) -> Int:\n    "The area of a w by h rectangle."\n'
            "    return w * h\nprint(area(2, 3))\n")
    await open_doc(client, path, text)
    h = await hover_text(client, path, where(text, "area(2"))
    assert "def area(w: Int, h: Int) -> Int" in h and "The area of a w by h rectangle." in h
    assert await hover_text(client, path, (2, 0)) is None     # `return`: nothing to say
    close_doc(client, path)


# ------------------------------------------------------------------------------ definition, references

async def test_definition_across_modules(client):
    path = os.path.join(EXAMPLES, "modules.sns")
    text = _text(path)
    await open_doc(client, path)
    geometry = from_fs_path(os.path.join(EXAMPLES, "lib", "geometry.sns"))
    gtext = _text(os.path.join(EXAMPLES, "lib", "geometry.sns"))

    async def definition(line_col):
        return await client.text_document_definition_async(
            t.DefinitionParams(**doc_pos(path, line_col)))

    got = await definition(where(text, "rectangle_area", into=1))
    line, col = where(gtext, "rectangle_area")
    assert got.uri == geometry and got.range.start == t.Position(line, col)
    # A name imported with `from`: its definition in the module.
    got = await definition(where(text, "circle_area(2)"))
    assert got.uri == geometry and got.range.start == t.Position(*where(gtext, "circle_area"))
    # The import itself: the module's file.
    got = await definition(where(text, "lib.geometry as", into=4))
    assert got.uri == geometry and got.range.start == t.Position(0, 0)
    got = await definition(where(text, '"lib/text.sns"', into=3))
    assert got.uri == from_fs_path(os.path.join(EXAMPLES, "lib", "text.sns"))
    close_doc(client, path)


async def test_references_reach_importers_that_are_not_open(client, tmp_path):
    """A module's top-level name: its uses in every .sns file of the workspace folders that
    imports it, open or not (the test's workspace folder is the repository)."""
    lib = os.path.join(EXAMPLES, "lib", "geometry.sns")
    user = os.path.join(EXAMPLES, "modules.sns")
    gtext, utext = _text(lib), _text(user)
    await open_doc(client, lib)        # modules.sns is not open
    refs = await client.text_document_references_async(t.ReferenceParams(
        context=t.ReferenceContext(include_declaration=False),
        **doc_pos(lib, where(gtext, "make_shape"))))
    assert sorted((r.uri, r.range.start.line) for r in refs) == sorted(
        [(from_fs_path(user), where(utext, "geo.make_shape")[0]),
         (from_fs_path(user), where(utext, "geometry.make_shape")[0])])
    close_doc(client, lib)


async def test_references_within_a_file_and_from_an_importer(client):
    path = os.path.join(EXAMPLES, "modules.sns")
    lib = os.path.join(EXAMPLES, "lib", "geometry.sns")
    text = _text(path)
    await open_doc(client, path)
    refs = await client.text_document_references_async(t.ReferenceParams(
        context=t.ReferenceContext(include_declaration=True),
        **doc_pos(path, where(text, "as geo", into=3))))
    # `import lib.geometry as geo`, then geo.rectangle_area, geo.make_shape, geo.shapes_made
    # and `print(geo == geometry, geo)`; never the other binding, `geometry`.
    lines = text.split("\n")
    expected = sorted((i, m) for i, ln in enumerate(lines)
                      for m in [j for j in range(len(ln)) if ln.startswith("geo", j)
                                and not ln.startswith("geometry", j)])
    assert sorted((r.range.start.line, r.range.start.character) for r in refs) == expected
    assert len(expected) == 6
    await open_doc(client, lib)
    gtext = _text(lib)
    refs = await client.text_document_references_async(t.ReferenceParams(
        context=t.ReferenceContext(include_declaration=True),
        **doc_pos(lib, where(gtext, "make_shape"))))
    where_used = sorted((r.uri == from_fs_path(path), r.range.start.line) for r in refs)
    assert where_used == [(False, where(gtext, "make_shape")[0]),
                          (True, where(text, "geo.make_shape")[0]),
                          (True, where(text, "geometry.make_shape")[0])]
    close_doc(client, lib)
    close_doc(client, path)


# ------------------------------------------------------------------------------ completion

async def test_completion_offers_keywords_names_in_scope_and_builtins(client):
    path = os.path.join(EXAMPLES, "testing.sns")
    text = _text(path)
    await open_doc(client, path)
    got = await labels(client, path, where(text, "assert(clamp(5", into=7))
    assert {"clamp", "while", "print", "audit_log", "check_all"} <= set(got)
    # Inside clamp's body its parameters are in scope; outside it they are not.
    inside = await labels(client, path, where(text, "return lo"))
    assert {"lo", "hi", "x"} <= set(inside)
    assert "lo" not in got
    close_doc(client, path)


async def test_completion_of_members_after_a_dot(client):
    path = os.path.join(EXAMPLES, "modules.sns")
    text = _text(path)
    await open_doc(client, path)
    got = await labels(client, path, where(text, "geo.rectangle_area", into=4))
    assert set(got) == {"PI", "square", "circle_area", "rectangle_area", "shapes_made",
                        "make_shape"}
    close_doc(client, path)
    path = os.path.join(EXAMPLES, "delete_account.sns")
    text = _text(path)
    await open_doc(client, path)
    got = await labels(client, path, where(text, "a.verify", into=2))
    assert set(got) == {"verify", "approve", "commit", "rollback", "state", "name", "kind",
                        "approved"}
    close_doc(client, path)


async def test_the_standard_library_in_hover_completion_and_definition(client, tmp_path):
    """std. modules are described from the library's own source: members with signatures
    and the comment above each, the import's file for go-to-definition."""
    from sensevm.base.stdlib_dir import modules, stdlib_dir
    path = str(tmp_path / "uses_std.sns")
    text = "import std.fs\nimport std.json\nx = fs.read_text(\"a\")\ny = json.\n"
    await open_doc(client, path, text, wait=False)
    got = await labels(client, path, (3, len("y = json.")))
    assert set(got) == {"parse", "format", "pretty"}
    h = await hover_text(client, path, where(text, "read_text", into=2))
    assert "read_text(path: String) -> String" in h and "requires fs.read" in h
    assert "text" in h.lower()      # the comment above the tool in stdlib/fs.sns
    got = await client.text_document_definition_async(
        t.DefinitionParams(**doc_pos(path, where(text, "std.fs", into=5))))
    assert got.uri == from_fs_path(os.path.join(stdlib_dir(), "fs.sns"))
    # `import std.` offers every module the library has.
    got = await labels(client, path, (0, len("import std.")))
    assert {f"std.{m}" for m in modules()} <= set(got) and "std.fs" in got
    close_doc(client, path)


async def test_completion_of_capabilities_after_requires_and_in_a_policy(client, tmp_path):
    path = str(tmp_path / "caps.sns")
    text = ("irreversible action pay(n) requires billing.charge:\n    nil\n"
            "tool t() requires \nnil\npolicy:\n    allow \n")
    await open_doc(client, path, text)
    after_requires = await labels(client, path, (2, len("tool t() requires ")))
    in_policy = await labels(client, path, (5, len("    allow ")))
    # billing.charge is declared here; email.send is used in examples/second_look.sns.
    for got in (after_requires, in_policy):
        assert {"billing.charge", "email.send", "contacts.read"} <= set(got)
    assert "approval" in after_requires
    assert set(await labels(client, path, (5, 4))) == {"allow", "deny"}
    close_doc(client, path)


# ------------------------------------------------------------------------------ outline, folds, format

async def test_document_symbols_outline_the_declarations(client, tmp_path):
    path = str(tmp_path / "outline.sns")
    text = ("def f():\n    def inner():\n        nil\n    return inner\n"
            "reversible action a() requires x.y:\n    nil\nrollback:\n    nil\n"
            'tool t() "d":\n    nil\nagent helper:\n    nil\npolicy:\n    deny x.y\n'
            'test "it works":\n    assert(true)\nx = 1\n')
    await open_doc(client, path, text)
    syms = await client.text_document_document_symbol_async(
        t.DocumentSymbolParams(t.TextDocumentIdentifier(from_fs_path(path))))
    outline = [(s.name, s.kind, s.range.start.line, s.range.end.line) for s in syms]
    assert outline == [("f", t.SymbolKind.Function, 0, 3), ("a", t.SymbolKind.Event, 4, 7),
                       ("t", t.SymbolKind.Method, 8, 9), ("helper", t.SymbolKind.Class, 10, 11),
                       ("policy", t.SymbolKind.Namespace, 12, 13),
                       ('test "it works"', t.SymbolKind.Module, 14, 15)]
    assert [c.name for c in syms[0].children] == ["inner"]
    folds = await client.text_document_folding_range_async(
        t.FoldingRangeParams(t.TextDocumentIdentifier(from_fs_path(path))))
    assert {(0, 3), (1, 2), (4, 7), (6, 7), (14, 15)} <= {(f.start_line, f.end_line) for f in folds}
    close_doc(client, path)


async def test_formatting_is_sensec_fmt(client, tmp_path):
    from sensec.fmt import format_source
    # An example (canonical, as `make test` checks) with its layout undone: the edit redoes it.
    text = "\n".join(line.replace("    ", "  ") + ("   # mine" if line.startswith("print") else "")
                     for line in _text(os.path.join(EXAMPLES, "delete_account.sns")).split("\n"))
    path = str(tmp_path / "delete_account.sns")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    await open_doc(client, path, text)
    edits = await client.text_document_formatting_async(t.DocumentFormattingParams(
        t.TextDocumentIdentifier(from_fs_path(path)), t.FormattingOptions(4, True)))
    [edit] = edits
    assert edit.new_text == format_source(text, path) != text
    assert edit.range.start == t.Position(0, 0)
    close_doc(client, path)


# ------------------------------------------------------------------------------ never crash

async def test_every_request_answers_on_every_line_prefix_of_an_example(client, tmp_path):
    """Over the wire: the file cut after each line (and mid-line), every request at its end."""
    text = _text(os.path.join(EXAMPLES, "dry_run.sns"))
    path = str(tmp_path / "typing.sns")
    await open_doc(client, path, "")
    lines = text.split("\n")
    for i in range(len(lines)):
        for cut in {len(lines[i]) // 2, len(lines[i])}:
            prefix = "\n".join(lines[:i] + [lines[i][:cut]])
            uri = from_fs_path(path)
            _versions[uri] += 1
            client.text_document_did_change(t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=_versions[uri]),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=prefix)]))
            end = (i, cut)
            await client.text_document_completion_async(t.CompletionParams(**doc_pos(path, end)))
            await client.text_document_hover_async(t.HoverParams(**doc_pos(path, end)))
            await client.text_document_definition_async(t.DefinitionParams(**doc_pos(path, end)))
            await client.text_document_references_async(t.ReferenceParams(
                context=t.ReferenceContext(True), **doc_pos(path, end)))
            ident = t.TextDocumentIdentifier(uri)
            await client.text_document_document_symbol_async(t.DocumentSymbolParams(ident))
            await client.text_document_folding_range_async(t.FoldingRangeParams(ident))
            await client.text_document_formatting_async(
                t.DocumentFormattingParams(ident, t.FormattingOptions(4, True)))
    no_bugs_logged(client)
    close_doc(client, path)


# ------------------------------------------------------------------------------ the command

@pytest.mark.filterwarnings("ignore:The test .* is marked with '@pytest.mark.asyncio'")
def test_without_pygls_sensec_lsp_says_how_to_install_it():
    code = ("import sys; sys.modules['pygls'] = None\n"
            "from sensec.cli import main\nmain(['lsp'], prog_name='sensec')\n")
    proc = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "pip install 'sense-compiled[lsp]'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
