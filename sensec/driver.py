"""Compiles a source file and every module it imports into one Program."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os

from sensevm.base.errors import CompileErrors, Pos, SenseError, SenseSyntaxError
from sensevm.base.files import read_bytes
from sensevm.bytecode.program import CodeKind, ModuleEntry, Program, Source

from . import nodes as n
from .codegen import FunctionCompiler, ProgramBuilder, module_binding_name, module_relative_path
from .nesting import on_deep_stack
from .resolve import check


@contextlib.contextmanager
def gc_paused(*, freeze: bool = False):
    """No cyclic garbage collection inside the block (restored after, even on an error).

    A compile allocates millions of objects that all stay alive until it ends (tokens, nodes,
    instructions), so every collection the allocations trigger walks an ever larger heap and
    frees nothing: on a large file that was a fifth of the compile. Reference counting still
    frees everything as usual; cycles made meanwhile wait for the next collection after.

    The first collection after the block still walks everything allocated in it once. A
    command that ends soon after (``sensec build``) passes ``freeze=True`` so that it never
    does: what exists then is moved out of the collector's sight (``gc.freeze``), which is
    only right when nothing long-lived follows.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


def read_source(path: str) -> str:
    """Read a .sns file as UTF-8 text; any problem is a positioned SenseSyntaxError."""
    return decode_source(read_bytes(path), path)


def decode_source(data: bytes, path: str) -> str:
    """Source bytes as UTF-8 text (without a BOM); invalid bytes are a positioned
    SenseSyntaxError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SenseSyntaxError(f"source is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                               Pos(line, col), path=path) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def parse_source(source: str, path: str) -> n.Module:
    from .grammar import parse
    return parse(source, path)


def _walk(node: n.Node, *, expressions: bool = True) -> list:
    """Every node of the tree, in source order (pre-order), the root first.

    Iterative: nested generators cost a frame switch per level for every node yielded, which
    made walking a large module slower than compiling it. With ``expressions=False`` it does
    not enter expressions (nothing inside an expression is a statement), which is all the
    declarations and imports below need, and skips most of the tree.
    """
    out = []
    stack = [node]
    while stack:
        node = stack.pop()
        out.append(node)
        kids = node.children()
        if kids:
            if not expressions:
                kids = [k for k in kids if not isinstance(k, n.Expr)]
            kids.reverse()
            stack.extend(kids)
    return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Build:
    def __init__(self, defer_import_errors: bool, import_root: str | None = None,
                 echo: str | None = None):
        self.builder = ProgramBuilder()
        self.echo = echo               # the REPL's echo binding, for the entry module only
        self.slots: dict = {}          # key -> module table index
        self.defer_import_errors = defer_import_errors
        # Imports may read files only under this directory (symlinks resolved): the main
        # file's own, unless the command line says otherwise (--import-root). So an import
        # cannot make the compiler read, and an error quote, any file the user can read.
        self.import_root = os.path.realpath(import_root) if import_root else None

    def module(self, source: str, path: str) -> int:
        """Compile one file's top level (and its imports, depth first); return its code index."""
        tree = parse_source(source, path)
        errors = (_native_errors(tree, path) if "::" in source else []) or check(tree, path)
        if errors:
            raise CompileErrors(errors)
        if self.echo is not None:
            tree = _echo_last_expression(tree, self.echo)
            self.echo = None           # imported modules are compiled as they are
        b = self.builder
        source_index = len(b.sources)
        b.sources.append(Source(path, source))
        code_index = b.reserve_code()
        directory = os.path.dirname(os.path.abspath(path)) if not path.startswith("<") else os.getcwd()
        if self.import_root is None:
            self.import_root = os.path.realpath(directory)
        module_slots = {}
        nodes = _walk(tree, expressions=False)      # imports, actions and tools are statements
        for imp in nodes:
            if not isinstance(imp, (n.Import, n.FromImport)) or imp.python:
                continue
            module_slots[imp.module] = self.import_slot(imp.module, directory, imp.module.pos,
                                                        path)
        action_names = frozenset(x.name for x in nodes if isinstance(x, n.ActionDef))
        tool_names = frozenset(x.name for x in nodes if isinstance(x, n.ToolDef))
        compiler = FunctionCompiler(b, source_index, module_slots, action_names, tool_names)
        compiler.block(tree.body)
        b.codes[code_index] = compiler.finish(
            "<module>", CodeKind.MODULE, pos=tree.body[-1].pos if tree.body else Pos(1, 1))
        return code_index

    def import_slot(self, ref: n.ModRef, directory: str, pos: Pos, importer: str) -> int:
        std = not ref.is_string and ref.text.split(".", 1)[0] == "std"
        if std:
            rel, path = self.std_place(ref, pos, importer)
        else:
            rel = module_relative_path(ref)
            path = os.path.normpath(os.path.join(directory, rel))
        real = os.path.realpath(path)
        # (A std import is allowed whatever the import root: std_place found it in the library.)
        outside = not std and not _inside(real, self.import_root)
        key = real if os.path.isfile(real) and not outside else (rel, path)
        slot = self.slots.get(key)
        if slot is not None:
            return slot
        b = self.builder
        slot = len(b.modules)
        self.slots[key] = slot
        b.modules.append(ModuleEntry(module_binding_name(ref), rel, path, -1))
        if outside:
            message = (f"import of '{rel}' reaches outside the program's directory "
                       f"{self.import_root} (it resolves to {real}); pass --import-root to "
                       "allow imports from elsewhere")
            if not self.defer_import_errors:
                from sensevm.base.errors import SenseImportError
                raise SenseImportError(message, pos, path=importer)
            # As for a module that does not compile, the error surfaces if the import runs;
            # with no position in the module (line 0), it is reported at the import itself.
            b.modules[slot] = ModuleEntry(module_binding_name(ref), rel, path, -1, message)
            return slot
        if isinstance(key, str):
            try:
                code = self.module(read_source(path), path)
            except SenseError as err:
                if not self.defer_import_errors:
                    raise
                first = (getattr(err, "errors", None) or [err])[0]
                pos = first.pos or Pos(0, 0)
                b.modules[slot] = ModuleEntry(module_binding_name(ref), rel, path, -1,
                                              first.message, pos.line, pos.col)
            else:
                b.modules[slot] = ModuleEntry(module_binding_name(ref), rel, path, code)
        return slot

    @staticmethod
    def std_place(ref: n.ModRef, pos: Pos, importer: str) -> tuple[str, str]:
        """``import std.X``: (the module's name as recorded, its path), the installed
        library's X.sns (sensevm.base.stdlib_dir), never a file beside the program, and
        allowed whatever the import root. An unknown module is an error at the import."""
        from sensevm.base.errors import SenseImportError
        from sensevm.base.stdlib_dir import modules, stdlib_dir
        name = ref.text[4:]
        known = modules()
        if name not in known:
            listing = ", ".join("std." + m for m in known) or "none"
            raise SenseImportError(f"no standard library module '{ref.text}' (there are: "
                                   f"{listing})", pos, path=importer)
        return name + ".sns", os.path.join(stdlib_dir(), name + ".sns")


def _native_errors(tree: n.Module, path: str) -> list:
    """Native calls (``native::name(...)``) belong to the standard library's files alone, and
    name natives of the registry (sensevm/bytecode/natives.py)."""
    calls = [x for x in _walk(tree) if isinstance(x, n.NativeCall)]
    if not calls:
        return []
    from sensevm.base.stdlib_dir import in_stdlib
    from sensevm.bytecode.natives import SPECS
    if not in_stdlib(path):
        return [SenseSyntaxError("native calls (native::...) are for the standard library's "
                                 "own files; import a std module instead", calls[0].pos,
                                 path=path)]
    return [SenseSyntaxError(f"unknown native '{c.name}'", c.pos, path=path)
            for c in calls if c.name not in SPECS]


def _echo_last_expression(tree: n.Module, echo: str) -> n.Module:
    """The REPL's echo: a last top-level statement that is an expression (not an assignment)
    becomes a call of the binding ``echo`` with its value, as Python's interactive mode does."""
    body = tree.body
    if not body or not isinstance(body[-1], n.ExprStmt):
        return tree
    last = body[-1]
    if isinstance(last.expr, (n.Assign, n.CompoundAssign)):
        return tree
    call = n.Call(last.expr.pos, n.Name(last.expr.pos, echo), (last.expr,))
    return n.Module(tree.pos, body[:-1] + (n.ExprStmt(last.pos, call),))


def compile_source(source: str, path: str = "<input>", *,
                   defer_import_errors: bool = False, import_root: str | None = None,
                   echo: str | None = None) -> Program:
    """Compile ``source`` and its imports into one Program.

    With ``defer_import_errors`` (how ``sensevm run FILE.sns`` compiles), an imported module
    that does not compile becomes an error raised when its import runs, as in the reference;
    otherwise (``sensec build``) the whole compile fails. Imports are read only from under
    ``import_root`` (default: the directory of ``path``), symlinks resolved first.
    ``echo`` (the REPL): the name of a binding called with the value of a last top-level
    expression statement that is not an assignment.
    """
    build = _Build(defer_import_errors, import_root, echo)
    with gc_paused():
        entry = on_deep_stack(build.module, source, path)
    b = build.builder
    return Program(strings=tuple(b.strings), constants=tuple(b.constants), codes=tuple(b.codes),
                   modules=tuple(b.modules), sources=tuple(b.sources),
                   actions=tuple(b.actions), tools=tuple(b.tools), agents=tuple(b.agents),
                   entry=entry,
                   source_hash=hashlib.sha256(source.encode("utf-8")).digest())


def compile_file(path: str, *, defer_import_errors: bool = False,
                 import_root: str | None = None) -> Program:
    return compile_source(read_source(path), path, defer_import_errors=defer_import_errors,
                          import_root=import_root)


def check_file(path: str, import_root: str | None = None) -> list[SenseError]:
    """Every error ``sensec check`` can find in ``path``: all syntax errors, else the static ones."""
    try:
        source = read_source(path)
    except SenseError as err:
        return [err]
    from .grammar import parse_all_errors
    errors = parse_all_errors(source, path)
    if errors:
        return list(errors)
    try:
        compile_source(source, path, import_root=import_root)
    except CompileErrors as err:
        return list(err.errors)
    except SenseError as err:
        return [err]
    return []


def check_warnings(path: str) -> list[tuple[Pos, str]]:
    """Things ``sensec check`` points out in a file that compiles, legal as they are
    (tree_warnings)."""
    try:
        tree = parse_source(read_source(path), path)
    except SenseError:
        return []
    return tree_warnings(tree)


def tree_warnings(tree) -> list[tuple[Pos, str]]:
    """The warnings of a parsed file (``sensec check`` and the language server show them):
    ``if x = 1:`` (an assignment as the whole condition of an ``if`` or ``while``), and a name
    that is certainly undefined: read, and bound nowhere in the file nor a builtin (only a
    warning: the read may never run, a test may expect its error)."""
    found = []
    nodes = _walk(tree)
    for node in nodes:
        if isinstance(node, (n.If, n.While)) and isinstance(node.cond, n.Assign):
            word = "if" if isinstance(node, n.If) else "while"
            found.append((node.cond.pos, f"the condition of this '{word}' assigns ('=') -- "
                                         "to compare, write '=='"))
    found.extend(_never_bound(nodes))
    found.sort(key=lambda w: (w[0].line, w[0].col))
    return found


def _never_bound(nodes) -> list[tuple[Pos, str]]:
    """The first read of each name that nothing in the file binds and no builtin is."""
    import difflib
    from sensevm.base.builtins import BUILTINS
    from sensevm.base.name_hints import undefined_variable_message
    bound = {b.name for b in BUILTINS}
    targets = set()
    for node in nodes:
        if isinstance(node, n.Assign) and isinstance(node.target, n.Name):
            bound.add(node.target.name)
            targets.add(id(node.target))
        elif isinstance(node, (n.TypedDecl, n.LocalDecl, n.FunctionDef, n.ActionDef, n.ToolDef,
                               n.AgentDef, n.MemoryDecl, n.ModelDecl, n.Param)):
            bound.add(node.name)
        elif isinstance(node, n.Session):
            bound.add(node.name)
            if node.handle:
                bound.add(node.handle)
        elif isinstance(node, n.For):
            bound.add(node.var)
        elif isinstance(node, n.ExceptClause) and node.name:
            bound.add(node.name)
        elif isinstance(node, n.ImportName):
            bound.add(node.alias or node.name)
        elif isinstance(node, n.Import):
            bound.add(node.alias or module_binding_name(node.module))
    out, seen = [], set()
    for node in nodes:
        if (isinstance(node, n.Name) and id(node) not in targets and node.name not in bound
                and node.name not in seen):
            seen.add(node.name)
            message = undefined_variable_message(node.name)
            if message.endswith("'"):       # (no hint of its own: the nearest name, if any)
                near = difflib.get_close_matches(node.name, sorted(bound), 1, 0.8)
                if near:
                    message += f" (did you mean {near[0]}?)"
            out.append((node.pos, f"{message}: nothing in this file binds it"))
    return out


def sense_files(paths) -> list[str]:
    """The files ``paths`` names: a file as it is, a directory as every .sns file under it."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".sns"))
        else:
            out.append(path)
    return out
