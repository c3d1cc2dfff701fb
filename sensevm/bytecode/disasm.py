"""A dis.py-style listing of a Program's code objects: line, jump-target mark, offset, opcode, operands, meaning.

One line per instruction, in fixed columns as in CPython's ``dis``::

    Disassembly of main (module, main.sns, max stack 2):
      1           0 LOAD_CONST               0 (42)
                  2 STORE_NAME               0 (x)

      2     >>    4 LOAD_NAME                0 (x)

The line number appears only where it changes (with a blank line before it), ``>>`` marks an
instruction that some jump targets, and the parenthesised part resolves the operands: the
constant in Sense syntax, the name, the annotation, the code object's name, the module's path,
``to N`` for a jump. With ``verified=False`` the listing is made without the verifier, so a
broken code object is shown up to the first undecodable byte, which gets a ``!!`` line. A
verified code object with try handlers ends with its handler table, as the verifier proved it
(``verify.handler_ranges``): for each run of instructions, the handler an error there resumes
at and the stack depth it resumes with (the Error on top)::

    Handlers:
        try     4 to    22 -> 28 (stack 0)
Every text from the file (names, paths, constants) is shown with its control characters
escaped: a forged file must not be able to drive the terminal of whoever lists it.
"""

from __future__ import annotations

from sensevm.base.diagnostics import printable
from sensevm.bytecode.decode import DecodeError, decode
from sensevm.bytecode.opcodes import Op, Operand
from sensevm.bytecode.program import CodeKind, CodeObject, Program

OPNAME_WIDTH = 20       # the longest opcode name, as in dis
OPARG_WIDTH = 5

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def sense_repr(value) -> str:
    """A constant as Sense source would write it (strings quoted with Sense's escapes)."""
    if value is None:
        return "nil"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return '"' + "".join(_escape(ch) for ch in value) + '"'
    if type(value) is int:
        return _decimal(value)
    return repr(value)


def _decimal(value: int) -> str:
    """Every digit of an Int: ``str()`` refuses more than 4,300 outside a VM run."""
    if value < 0:
        return "-" + _decimal(-value)
    if value.bit_length() <= 13000:
        return str(value)
    k = int(value.bit_length() * 0.30103) // 2
    high, low = divmod(value, 10 ** k)
    return _decimal(high) + _decimal(low).rjust(k, "0")


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if ch.isprintable():
        return ch
    # Sense has no escape for these; show the code point rather than a raw control character.
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def disassemble(program, *, code_index: int | None = None, verified: bool = True) -> str:
    """The listing of every code object (the entry first) or of ``codes[code_index]`` only.

    ``program`` is a Program or a VerifiedProgram. With ``verified=True`` a Program is verified
    first (VerifyError if it fails); with ``verified=False`` nothing is checked and whatever
    cannot be decoded or resolved is marked instead.
    """
    from sensevm.bytecode.verify import VerifiedProgram, verify

    vprog = None
    if isinstance(program, VerifiedProgram):
        vprog, program = program, program.program
    elif verified:
        vprog = verify(program)
    if not isinstance(program, Program):
        raise TypeError(f"expected a Program or VerifiedProgram, got {type(program).__name__}")

    n = len(program.codes)
    if code_index is not None:
        if not 0 <= code_index < n:
            raise ValueError(f"no code object {code_index} ({n} code objects)")
        order = [code_index]
    elif 0 <= program.entry < n:
        order = [program.entry] + [i for i in range(n) if i != program.entry]
    else:
        order = list(range(n))

    blocks = []
    for i in order:
        code = program.codes[i]
        if vprog is not None:
            instructions, error = list(vprog.codes[i].instructions), None
        else:
            instructions, error = _decode_partial(code.code)
        block = _disassemble_code(program, code, instructions, error)
        if vprog is not None and any(ins.op is Op.TRY_BEGIN for ins in instructions):
            block += "\n\n" + _handler_table(vprog.codes[i])
        blocks.append(block)
    return "\n\n".join(blocks) + "\n"


def _handler_table(verified) -> str:
    from sensevm.bytecode.verify import handler_ranges
    rows = ["Handlers:"]
    for kind, start, end, target, depth in handler_ranges(verified):
        rows.append(f"    {kind:<4} {start:>5} to {end:>5} -> {target} (stack {depth})")
    return "\n".join(rows)


def _decode_partial(code: bytes):
    out = []
    try:
        for ins in decode(code):
            out.append(ins)
    except DecodeError as e:
        return out, e
    return out, None


def _header(program: Program, code: CodeObject) -> str:
    try:
        kind = CodeKind(code.kind).name.lower()
    except ValueError:
        kind = f"kind {code.kind!r}"
    if 0 <= code.source < len(program.sources):
        path = program.sources[code.source].path
    else:
        path = f"<source {code.source} out of range>"
    parts = [kind, path]
    if code.kind == CodeKind.FUNCTION or code.params or code.return_type is not None:
        types = tuple(code.param_types) + (None,) * max(0, len(code.params) - len(code.param_types))
        params = ", ".join(p if t is None else f"{p}: {t}" for p, t in zip(code.params, types))
        parts.append(f"params ({params})" + (f" -> {code.return_type}" if code.return_type else ""))
    parts.append(f"max stack {code.max_stack}")
    return printable(f"Disassembly of {code.name} ({', '.join(parts)}):")


def _resolve(program: Program, kind: Operand, value: int):
    """The parenthesised meaning of one operand, or None for a bare count."""
    def pick(table, show):
        return printable(show(table[value])) if 0 <= value < len(table) else "<out of range>"

    if kind is Operand.CONST:
        return pick(program.constants, sense_repr)
    if kind is Operand.NAME or kind is Operand.TYPE:
        return pick(program.strings, str)
    if kind is Operand.CODE:
        return pick(program.codes, lambda c: c.name)
    if kind is Operand.MODULE:
        return pick(program.modules, lambda m: m.rel)
    if kind is Operand.AGENT:
        return pick(program.agents, lambda g: f"{'async ' if g.is_async else ''}agent {g.name}")
    if kind is Operand.TOOL:
        return pick(program.tools, lambda t: f"{'trusted ' if t.trusted else ''}"
                                             f"{'async ' if t.is_async else ''}tool {t.name}")
    if kind is Operand.ACTION:
        return pick(program.actions, lambda a: f"{a.kind} action {a.name}"
                                               f"{' sends' if a.sends else ''}")
    if kind is Operand.TARGET:
        return f"to {value}"
    return None


def _disassemble_code(program: Program, code: CodeObject, instructions, error) -> str:
    targets = {value for ins in instructions
               for kind, value in zip(ins.op.operands, ins.args) if kind is Operand.TARGET}
    positions = sorted(code.positions)
    max_line = max((line for _, line, _ in positions), default=0)
    line_width = max(3, len(str(max_line)))
    offset_width = max(4, len(str(len(code.code))))

    lines = [_header(program, code)]
    p, current, shown = 0, 0, None
    for ins in instructions:
        # The line of the last position at or before this offset (CodeObject.position_at).
        while p < len(positions) and positions[p][0] <= ins.offset:
            current = positions[p][1]
            p += 1
        starts_line = current > 0 and current != shown
        if starts_line:
            if shown is not None:
                lines.append("")
            shown = current
        fields = [str(current).rjust(line_width) if starts_line else " " * line_width,
                  ">>" if ins.offset in targets else "  ",
                  str(ins.offset).rjust(offset_width),
                  ins.op.name.ljust(OPNAME_WIDTH)]
        if ins.args:
            fields.append(", ".join(map(str, ins.args)).rjust(OPARG_WIDTH))
            meaning = [m for m in (_resolve(program, kind, value)
                                   for kind, value in zip(ins.op.operands, ins.args))
                       if m is not None]
            if ins.op is Op.SLICE:      # which bounds the slice wrote: (lo:hi), (lo:), (:hi), (:)
                meaning = [f"{'lo' if ins.args[0] & 1 else ''}:{'hi' if ins.args[0] & 2 else ''}"]
            if meaning:
                fields.append("(" + ", ".join(meaning) + ")")
        lines.append(" ".join(fields).rstrip())
    if error is not None:
        lines.append(" ".join([" " * line_width, "!!", str(error.offset).rjust(offset_width),
                               "<invalid>".ljust(OPNAME_WIDTH), printable(error.message)]))
    return "\n".join(lines)
