"""How fast `sensec lsp` answers a completion on a 5,000-line file: the median round trip of N requests, over stdio, as an editor sends them.

    python -m benchmarks.lsp_completion [--lines 5000] [--rounds 50]

The file is the compile benchmark's generated program (benchmarks/generate.py). The server
is started, the file opened and analysed (the first diagnostics arrive), then completions are
asked for at spread-out lines, each after an edit that types a name's first letter there (so
every request sees a text newer than the last analysis, as while typing). The target is a
median under 50 ms on the project's machine. Needs pygls (pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def measure(lines: int, rounds: int) -> list:
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient
    from pygls.uris import from_fs_path

    sys.path.insert(0, ROOT)
    from benchmarks.generate import generate

    source, _ = generate(lines)
    directory = tempfile.mkdtemp(prefix="sense-lsp-bench-")
    path = os.path.join(directory, "big.sns")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(source)
    uri = from_fs_path(path)

    client = LanguageClient("bench", "1")
    published = asyncio.Event()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _diagnostics(params):
        published.set()

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    await client.start_io(sys.executable, "-m", "sensec", "lsp", env=env)
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities(),
                                                     root_uri=from_fs_path(directory)))
    client.initialized(t.InitializedParams())
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri=uri, language_id="sense", version=1, text=source)))
    await asyncio.wait_for(published.wait(), 120)

    text_lines = source.split("\n")
    times = []
    version = 1
    for i in range(rounds):
        line = (i * 97 + 11) % (len(text_lines) - 1)
        version += 1
        # Type an 'f' at the start of a new line below `line`: names in scope are wanted.
        client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangePartial(
                range=t.Range(t.Position(line, 0), t.Position(line, 0)), text="f\n")]))
        start = time.perf_counter()
        result = await client.text_document_completion_async(t.CompletionParams(
            text_document=t.TextDocumentIdentifier(uri), position=t.Position(line, 1)))
        times.append(time.perf_counter() - start)
        assert result.items, "no completion items"
        version += 1
        client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangePartial(
                range=t.Range(t.Position(line, 0), t.Position(line + 1, 0)), text="")]))
    items = len(result.items)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return times, items


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args(argv)
    try:
        import pygls  # noqa: F401
    except ImportError:
        print("lsp_completion: pygls is not installed (pip install -e '.[test]')",
              file=sys.stderr)
        return 2
    times, items = asyncio.run(measure(args.lines, args.rounds))
    ms = sorted(x * 1000 for x in times)
    print(f"completion on a {args.lines}-line file, {items} items: "
          f"median {statistics.median(ms):.1f} ms, min {ms[0]:.1f} ms, "
          f"max {ms[-1]:.1f} ms over {len(ms)} requests (target: median < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
