"""``sensevm memory-path [FILE]``: where FILE's persistent memories keep their data, without running it.

The output follows the reference's (``sense memory-path``), except that the command it suggests
is ours, a first line names the program's directory (the base every relative path resolves
against: FILE's own directory, sensevm.runtime.places), an explicit relative path is shown
resolved against it, and the instructions for setting SENSE_MEMORY_DIR are for this system's
shell (POSIX sh, or PowerShell on Windows). FILE is parsed only (a declaration run for real would create its database);
its imports are not followed, as in the reference. A ``.snb`` file is answered from the entry
source it carries.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sensevm.base.errors import SenseError, SnbFormatError
from sensevm.world.memory import ENV_DIR, SUFFIX, default_path

_WITHOUT_FILE_TAIL = [
    "",
    "Pass a file to see the exact resolved path(s) for what it declares:",
    "  sensevm memory-path <file.sns>",
    "",
]

_POWERSHELL = [
    "To change the default, set SENSE_MEMORY_DIR (PowerShell):",
    '  $env:SENSE_MEMORY_DIR = "C:\\path\\to\\wherever"          # this session only',
    '  [Environment]::SetEnvironmentVariable("SENSE_MEMORY_DIR", "C:\\path\\to\\wherever", "User")',
    "                                                          # persists across sessions",
]

_POSIX = [
    "To change the default, set SENSE_MEMORY_DIR (sh, bash, zsh):",
    "  export SENSE_MEMORY_DIR=/path/to/wherever              # this shell only",
    "  echo 'export SENSE_MEMORY_DIR=/path/to/wherever' >> ~/.profile",
    "                                                          # persists across sessions",
]


def _how_to_set() -> list[str]:
    """The instructions for this system's shell: PowerShell on Windows, POSIX sh elsewhere."""
    import os
    return _POWERSHELL if os.name == "nt" else _POSIX


def _overview(override) -> list[str]:
    if override:
        return [f"SENSE_MEMORY_DIR is set: {override}",
                "Every persistent memory declared with no explicit path resolves",
                f"flat under this directory: {Path(override) / ('<name>' + SUFFIX)}"]
    return ["SENSE_MEMORY_DIR is not set.",
            "A persistent memory declared with no explicit path resolves to a",
            "'.sense_memory/' folder next to whichever .sns file declares it:",
            "  <that file's own directory>/.sense_memory/<name>.sense_memory.db",
            "(for a .snb, the .snb's own directory stands for its source's; an explicit",
            "relative path resolves against the same directory, never the working one)"]


def _source_of(path: str):
    """(source text, where the declaring file is for a running program, how that base was
    found) for .sns or .snb ``path``: a program's relative files resolve against FILE's own
    directory (sensevm.runtime.places), and a .snb's recorded source is rebased there."""
    import os
    from sensec.driver import read_source
    from sensevm.base.files import read_bytes
    from sensevm.bytecode.snb import is_snb
    from sensevm.runtime.places import rebase
    data = read_bytes(path)
    base = os.path.dirname(os.path.abspath(path))
    if not is_snb(data):
        return read_source(path), path, f"the directory of {path}"
    from sensevm.bytecode.snb import load
    program = load(data)
    source = program.sources[program.codes[program.entry].source]
    return (source.text, rebase(source.path, source.path, base),
            f"the directory of {path}, beside its source {os.path.basename(source.path)}")


def persistent_declarations(module):
    """Every ``persistent memory`` declaration of a parsed module, nested ones included, in
    source order."""
    from sensec import nodes as n
    found = []

    def walk(node):
        if isinstance(node, n.MemoryDecl):
            if node.persistent:
                found.append(node)
            return
        for child in node.children():
            walk(child)

    walk(module)
    return found


def memory_path(path, *, stdout=None, stderr=None) -> int:
    """Print the report; return the exit status (1 if FILE cannot be read or parsed)."""
    import os
    from sensevm.base.diagnostics import report
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    override = os.environ.get(ENV_DIR)
    if path is None:
        stdout.write("\n".join(_overview(override) + _WITHOUT_FILE_TAIL + _how_to_set())
                     + "\n")
        return 0
    try:
        source, declaring, how = _source_of(path)
        from sensec.driver import parse_source
        module = parse_source(source, declaring)
    except SenseError as err:
        report(err, {}, stderr)
        return 1
    except SnbFormatError as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(path, exc, stderr)
        return 1
    decls = persistent_declarations(module)
    if not decls:
        stdout.write(f"{path} declares no 'persistent memory'.\n")
        return 0
    base = os.path.dirname(os.path.abspath(declaring))
    stdout.write(f"The program's directory ({how}): {base}\n")
    for decl in decls:
        if decl.hint is not None:
            where = os.path.normpath(os.path.join(base, decl.hint))
            note = ("explicit path" if os.path.isabs(decl.hint)
                    else f"explicit path {decl.hint}, relative to the program's directory")
        else:
            where = default_path(decl.name, declaring)
            note = ("default -- via SENSE_MEMORY_DIR" if override
                    else "default -- next to this file")
        stdout.write(f"{decl.name}: {where}  ({note})\n")
    return 0
