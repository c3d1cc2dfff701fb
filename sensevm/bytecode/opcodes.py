"""The instruction set: one row per opcode; the compiler, VM, decoder, verifier and disassembler derive from it.

Instruction format
------------------
An instruction is one opcode byte followed by its operands, in the order of the row's operand
kinds. Every operand is an unsigned LEB128 varint, except a jump TARGET, which is a fixed
4-byte little-endian absolute byte offset within the same code object (fixed width, so the
assembler resolves labels in one pass and the verifier can demand that a target is the start of
an instruction)::

    +--------+---------------+---------------+
    | opcode | operand 1 ... | operand 2 ... |      operands: varint, or u32 LE for TARGET
    +--------+---------------+---------------+

Operand kinds
-------------
    CONST   index into Program.constants       NAME    index into Program.strings (a name)
    TYPE    index into Program.strings (an annotation as written, e.g. "Array<Int>")
    CODE    index into Program.codes           MODULE  index into Program.modules
    ACTION  index into Program.actions (the manifest of declared actions)
    TOOL    index into Program.tools (the manifest of declared tools)
    AGENT   index into Program.agents (the manifest of declared agents)
    COUNT   a small count                      TARGET  absolute byte offset of an instruction

Stack effects
-------------
``pops`` and ``pushes`` are ints or formulas over the operands ``a`` (first) and ``b``
(second). Ops that branch also give ``branch``: (pops, pushes) when the jump is taken; the
fall-through path uses ``pops``/``pushes``. The verifier derives every code object's stack
depth from these rows and nothing else.

Changing a row changes ``FINGERPRINT``; the .snb header carries it. A new minor version may
only *append* rows, numbered above every opcode of the minors before it, and writes down the
fingerprint of the table it ends with (``FINGERPRINTS``, ``TABLE_ENDS``): a file of an older
minor carries its own minor's fingerprint, and since each of its instructions means what it
meant, it still loads. Any other change to a row needs a new ``FORMAT_MAJOR`` (CPython's MAGIC
rule), and the tests fail until it has one (tests/test_opcodes.py).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

try:    # CPython's own quick way of making its enums (3.11+), for this module's import time
    from enum import _simple_enum
except ImportError:     # pragma: no cover - a Python without it makes them the usual way
    _simple_enum = None

from sensevm.base.digest import sha256    # not hashlib: see sensevm.base.digest (start-up time)

FORMAT_MAJOR = 5          # 5: IMPORT_PYTHON
FORMAT_MINOR = 3          # 0: the manifest's flags: action "immediate" (4), "sends" (8) with
                          # second-look roles (16); tool "trusted" (2). 1: the role
                          # "credential" (5), which a 5.0 reader refuses as unknown. 2: maps
                          # (BUILD_MAP, 180); errors a program handles (TRY_BEGIN, TRY_END,
                          # EXCEPT_JUMP, RAISE, 200-203); slices, `in`, f-strings and compound
                          # assignment (SLICE .. DUP2, 220-224). 3: the standard library's
                          # native bridge (NATIVE, 230; sensevm/bytecode/natives.py)


_PLAIN: dict = {}


def int_enum(cls, base=IntEnum):
    """The plain class ``cls`` (members, and a ``__new__`` taking each member's value) as an
    IntEnum (or ``base``). Every command makes the enums of the instruction set and the file
    format: the decorator CPython uses for its own enums makes them in a third of the time that
    the class statement does."""
    _PLAIN[cls.__name__] = cls      # (for the test that the usual way makes the same enum)
    if _simple_enum is None:
        return _int_enum_slowly(cls, base)
    enum_class = _simple_enum(base)(cls)
    # It leaves a descriptor in the class per member, which makes every `Op.X` a Python-level
    # call; the class statement leaves the members themselves (no name here shadows another).
    for name, member in enum_class._member_map_.items():
        type.__setattr__(enum_class, name, member)
    return enum_class


def int_flag(cls):
    """``int_enum`` for an IntFlag."""
    return int_enum(cls, IntFlag)


def _int_enum_slowly(cls, base=IntEnum):
    import types

    def body(ns):
        for key, value in cls.__dict__.items():
            if key not in ("__dict__", "__weakref__"):
                ns[key] = value.__func__ if isinstance(value, staticmethod) else value
    return types.new_class(cls.__name__, (base,), exec_body=body)


@int_enum
class Operand:
    CONST = 1
    NAME = 2
    TYPE = 3
    CODE = 4
    MODULE = 5
    COUNT = 6
    TARGET = 7
    ACTION = 8
    TOOL = 9
    AGENT = 10


@int_flag
class F:
    """Properties of an opcode."""
    NONE = 0
    JUMP = 1          # has a TARGET operand
    TERMINATOR = 2    # control never falls through to the next instruction
    CALLS = 4         # may push a new frame (calls Sense code)
    SCOPE = 8         # changes the current scope


C, N, T, K, M, U, J, A, O = (Operand.CONST, Operand.NAME, Operand.TYPE, Operand.CODE,
                             Operand.MODULE, Operand.COUNT, Operand.TARGET, Operand.ACTION,
                             Operand.TOOL)
G = Operand.AGENT


@int_enum
class Op:
    """Each member: value, operand kinds, pops, pushes, flags, branch effect, doc."""

    def __new__(cls, code, operands, pops, pushes, flags, branch, doc):
        obj = int.__new__(cls, code)
        obj._value_ = code
        obj.operands = operands
        obj.pops = pops
        obj.pushes = pushes
        obj.flags = flags
        obj.branch = branch
        obj.doc = doc
        return obj

    #                 code  operands pops  pushes flags                branch   doc
    NOP            = (0x00, (),      0,    0,     F.NONE,              None,    "do nothing")
    LOAD_CONST     = (0x01, (C,),    0,    1,     F.NONE,              None,    "push constants[a]")
    LOAD_NIL       = (0x02, (),      0,    1,     F.NONE,              None,    "push nil")
    LOAD_TRUE      = (0x03, (),      0,    1,     F.NONE,              None,    "push true")
    LOAD_FALSE     = (0x04, (),      0,    1,     F.NONE,              None,    "push false")
    POP            = (0x05, (),      1,    0,     F.NONE,              None,    "discard the top")
    DUP            = (0x06, (),      1,    2,     F.NONE,              None,    "push the top again")

    LOAD_NAME      = (0x10, (N,),    0,    1,     F.NONE,              None,
                      "push the nearest binding of strings[a] along the scope chain")
    STORE_NAME     = (0x11, (N,),    1,    0,     F.NONE,              None,
                      "pop into the nearest existing binding of strings[a], else bind it in the innermost scope")
    STORE_LOCAL    = (0x12, (N,),    1,    0,     F.NONE,              None,
                      "pop into a binding of strings[a] in the innermost scope (local)")
    CHECK_DECL     = (0x13, (N, T),  1,    1,     F.NONE,              None,
                      "check the top against annotation strings[b] for the declaration of strings[a]")
    PUSH_SCOPE     = (0x14, (),      0,    0,     F.SCOPE,             None,
                      "enter a new block scope whose parent is the current one")
    POP_SCOPE      = (0x15, (U,),    0,    0,     F.SCOPE,             None,
                      "leave a (the operand) block scopes")

    ADD            = (0x20, (),      2,    1,     F.NONE,              None,    "a + b")
    SUB            = (0x21, (),      2,    1,     F.NONE,              None,    "a - b")
    MUL            = (0x22, (),      2,    1,     F.NONE,              None,    "a * b")
    DIV            = (0x23, (),      2,    1,     F.NONE,              None,    "a / b (always Float)")
    MOD            = (0x24, (),      2,    1,     F.NONE,              None,    "a % b (sign of the divisor)")
    EQ             = (0x25, (),      2,    1,     F.NONE,              None,    "a == b")
    NE             = (0x26, (),      2,    1,     F.NONE,              None,    "a != b")
    LT             = (0x27, (),      2,    1,     F.NONE,              None,    "a < b")
    LE             = (0x28, (),      2,    1,     F.NONE,              None,    "a <= b")
    GT             = (0x29, (),      2,    1,     F.NONE,              None,    "a > b")
    GE             = (0x2A, (),      2,    1,     F.NONE,              None,    "a >= b")
    NEG            = (0x2B, (),      1,    1,     F.NONE,              None,    "-a")
    NOT            = (0x2C, (),      1,    1,     F.NONE,              None,    "not a (truthiness)")

    JUMP           = (0x30, (J,),    0,    0,     F.JUMP | F.TERMINATOR, (0, 0), "continue at a")
    POP_JUMP_IF_FALSE = (0x31, (J,), 1,    0,     F.JUMP,              (1, 0),  "pop; if falsy continue at a")
    POP_JUMP_IF_TRUE  = (0x32, (J,), 1,    0,     F.JUMP,              (1, 0),  "pop; if truthy continue at a")
    JUMP_IF_FALSE_OR_POP = (0x33, (J,), 1, 0,     F.JUMP,              (1, 1),
                      "if the top is falsy continue at a keeping it, else pop it ('and')")
    JUMP_IF_TRUE_OR_POP  = (0x34, (J,), 1, 0,     F.JUMP,              (1, 1),
                      "if the top is truthy continue at a keeping it, else pop it ('or')")

    BUILD_ARRAY    = (0x40, (U,),    "a",  1,     F.NONE,              None,    "pop a values into a new Array")
    INDEX          = (0x41, (),      2,    1,     F.NONE,              None,    "obj[index]")
    STORE_INDEX    = (0x42, (),      3,    1,     F.NONE,              None,
                      "obj[index] = value; leaves value (assignment is an expression)")
    GET_MEMBER     = (0x43, (N,),    1,    1,     F.NONE,              None,    "obj.strings[a]")
    GET_ITER       = (0x44, (),      1,    1,     F.NONE,              None,
                      "replace an Array or String by an iterator over it")
    FOR_ITER       = (0x45, (J,),    1,    2,     F.JUMP,              (1, 0),
                      "push the iterator's next item; when exhausted pop it and continue at a")

    MAKE_FUNCTION  = (0x50, (K,),    0,    1,     F.NONE,              None,
                      "push a closure of codes[a] over the current scope")
    CALL           = (0x51, (U,),    "a+1", 1,    F.CALLS,             None,
                      "call the callee below a positional arguments")
    CALL_LABELED   = (0x52, (U, U),  "a+2*b+1", 1, F.CALLS,            None,
                      "call with a positional arguments then b (name, value) pairs")
    RETURN         = (0x53, (),      1,    0,     F.TERMINATOR,        None,
                      "return the top to the caller")

    TEST_BEGIN     = (0x60, (C, J),  0,    0,     F.JUMP | F.SCOPE,    (0, 0),
                      "start test constants[a] in a new scope; an error in it is recorded and resumes at b")
    TEST_END       = (0x61, (),      0,    0,     F.SCOPE,             None,
                      "record the innermost running test as passed and leave its scope")
    TEST_ABANDON   = (0x62, (),      0,    0,     F.SCOPE,             None,
                      "leave the innermost running test without recording it (break/continue)")

    IMPORT         = (0x70, (M,),    0,    1,     F.CALLS,             None,
                      "push module modules[a], running it first if this is its first import")
    IMPORT_FROM    = (0x71, (N,),    1,    1,     F.NONE,              None,
                      "replace a module by its top-level binding strings[a] (a Python module: "
                      "its attribute strings[a])")
    # Python interop (spec 18.7, docs/interop.md): the capability python.import must be granted
    # by an explicit `allow` (lexically or on the call chain) and denied nowhere on the chain;
    # the handler checks it, in both tiers and for hand-made bytecode alike, before any import.
    IMPORT_PYTHON  = (0x72, (N,),    0,    1,     F.NONE,              None,
                      "check capability python.import, then push Python module strings[a], wrapped")

    # Policy: each rule is written into the current scope's table when it executes (spec 11).
    POLICY_ALLOW   = (0x80, (N,),    0,    0,     F.NONE,              None,
                      "allow capability strings[a] in the current scope")
    POLICY_DENY    = (0x81, (N,),    0,    0,     F.NONE,              None,
                      "deny capability strings[a] in the current scope")

    # The action lifecycle. Each handler asks policy, records the decision in the audit log, and
    # moves the state through lifecycle.py's table, in that order. A body runs only inside
    # ACTION_COMMIT (and a rollback block only inside ACTION_ROLLBACK): the verifier refuses any
    # other reference to their code objects. A receiver that is not an action at run time gets
    # the ordinary member call (`x.verify()` on a module, say) instead.
    MAKE_ACTION    = (0x90, (A,),    0,    1,     F.NONE,              None,
                      "push the definition of actions[a], closed over the current scope")
    ACTION_PREPARE = (0x91, (U,),    "a+1", 1,    F.CALLS,             None,
                      "call with a arguments: an action definition is prepared (its body never runs)")
    ACTION_VERIFY  = (0x92, (),      1,    1,     F.NONE,              None,
                      "receiver.verify(): check the capability; prepared -> verified | denied")
    ACTION_APPROVE = (0x93, (),      1,    1,     F.NONE,              None,
                      "receiver.approve(): record the approval")
    ACTION_COMMIT  = (0x94, (),      1,    1,     F.CALLS,             None,
                      "receiver.commit(): re-check capability and approval, then run the body")
    ACTION_ROLLBACK = (0x95, (),     1,    1,     F.CALLS,             None,
                      "receiver.rollback(): re-check capability, then run the rollback block")

    # Tools: the capability is checked at the call site, every time, by TOOL_CALL (or by CALL
    # when its callee turns out to be a tool), before the body is entered.
    MAKE_TOOL      = (0xA0, (O,),    0,    1,     F.NONE,              None,
                      "push the definition of tools[a], closed over the current scope")
    TOOL_CALL      = (0xA1, (U,),    "a+1", 1,    F.CALLS,             None,
                      "call with a arguments: a tool checks arity, capability (audited), types, then runs")

    # Agents: the declaration creates the agent and its one persistent scope; the body runs
    # only when start() is called (see the agent builtins in vm.py).
    MAKE_AGENT     = (0xB0, (G,),    0,    1,     F.NONE,              None,
                      "push a new agent for agents[a], its scope a child of the current one")

    # Maps (EXTENSIONS.md E1), format 5.2. The keys and values were pushed in source order,
    # key then value per entry: a later entry with an equal key updates the earlier one in
    # place (its position stays), as a run of `m[k] = v` would.
    BUILD_MAP      = (0xB4, (U,),    "2*a", 1,    F.NONE,              None,
                      "pop a (key, value) pairs into a new Map")

    # Errors a program handles (EXTENSIONS.md E4; format 5.2). A frame's running handlers are
    # one stack, test blocks' and try blocks' together (Frame.tests): an error resumes at the
    # innermost, in its frame or a caller's; a resource limit (SenseLimitError) at none. The
    # verifier proves that stack at every instruction, so a handler's target always finds the
    # stack depth and scope depth it was compiled for.
    TRY_BEGIN      = (0xC8, (J,),    0,    0,     F.JUMP,              (0, 1),
                      "push a handler: an error in this frame (or a callee) resumes at a, the "
                      "stack cut to its depth here and the Error pushed")
    TRY_END        = (0xC9, (),      0,    0,     F.NONE,              None,
                      "pop the innermost handler, a try handler")
    EXCEPT_JUMP    = (0xCA, (N, J),  1,    1,     F.JUMP,              (1, 1),
                      "if the Error on top is not of class strings[a] (or a subclass of it), "
                      "continue at b; it stays on the stack")
    RAISE          = (0xCB, (),      1,    0,     F.TERMINATOR,        None,
                      "pop a value and raise it: an Error again as it was, a String as a "
                      "SenseRuntimeError, anything else is a SenseTypeError")

    # Slices, membership, f-strings, compound assignment (EXTENSIONS.md E3; format 5.2).
    SLICE          = (0xDC, (U,),    3,    1,     F.NONE,              None,
                      "obj[lo:hi] as a new value; a says which bounds were written (1 lo, 2 hi): "
                      "the slot of one not written holds nil and is not read")
    CONTAINS       = (0xDD, (),      2,    1,     F.NONE,              None,
                      "a in b: an element of an Array (==), a substring of a String")
    FORMAT_VALUE   = (0xDE, (),      1,    1,     F.NONE,              None,
                      "replace the top by its str() form (a value interpolated by an f-string)")
    BUILD_STRING   = (0xDF, (U,),    "a",  1,     F.NONE,              None,
                      "pop a values and push their str() forms joined (an f-string)")
    DUP2           = (0xE0, (),      2,    4,     F.NONE,              None,
                      "push the top two again, in order (the container and index of `c[i] += e`)")

    # The standard library's native bridge (EXTENSIONS.md E5, docs/stdlib.md; format 5.3).
    # constants[a] names a native of the registry (sensevm/bytecode/natives.py). The handler
    # checks, in the one handler both tiers run, that the frame executing it is the body of a
    # declaration of the registry's kind requiring exactly the registry's capability (a pure
    # native: anywhere), so a hand-made file reaches a host effect only through a tool's call
    # check or an action's verify and commit.
    NATIVE         = (0xE6, (C, U),  "b",  1,     F.NONE,              None,
                      "pop b arguments, call native constants[a] on them, push its result")


# ----------------------------------------------------------------------------- derived tables

# (Built from the members' plain attributes: `value`, `name` and flag arithmetic are
# Python-level calls on an enum, and this module is imported by every command.)
_MEMBERS = list(Op)
OPS: dict[int, Op] = {op._value_: op for op in _MEMBERS}
OPNAMES: dict[int, str] = {op._value_: op._name_ for op in _MEMBERS}
JUMPS = frozenset(op for op in _MEMBERS if int(op.flags) & F.JUMP._value_)
TERMINATORS = frozenset(op for op in _MEMBERS if int(op.flags) & F.TERMINATOR._value_)


# The stack effects above that depend on the operands, by their formula's text: a new formula
# fails the import (KeyError) until it is added here; tests/test_opcodes.py checks that each
# function computes its text. (Not eval: compiling them cost every start.)
_FORMULAS = {
    "a": lambda a=0, b=0: a,
    "a+1": lambda a=0, b=0: a + 1,
    "a+2*b+1": lambda a=0, b=0: a + 2 * b + 1,
    "2*a": lambda a=0, b=0: 2 * a,
    "b": lambda a=0, b=0: b,
}


def _effect(formula):
    if isinstance(formula, int):
        return lambda a=0, b=0: formula
    return _FORMULAS[formula]


POPS = {op: _effect(op.pops) for op in _MEMBERS}
PUSHES = {op: _effect(op.pushes) for op in _MEMBERS}


def _effect_row(op: Op) -> tuple:
    fixed = isinstance(op.pops, int) and isinstance(op.pushes, int)
    branch = op.branch
    return (op.pops if fixed else None, op.pushes if fixed else None,
            branch[0] if branch else None, branch[1] if branch else None,
            op in TERMINATORS,
            op.operands.index(Operand.TARGET) if Operand.TARGET in op.operands else -1)


# The rows' stack effects as the assembler's and the verifier's walks read them, indexed by
# opcode value (a list index: a dict keyed by the enum member would hash it in Python):
# (pops, pushes, branch pops, branch pushes, terminates, index of the TARGET operand or -1);
# pops and pushes are None where the row gives a formula (use POPS / PUSHES), the branch
# columns None for an op that does not branch.
EFFECTS: list = [None] * 256
# The operand layout, by opcode value, for the encoders and decoders that take a short cut:
# 0 no operands, 1 a single varint operand, 2 anything else (a TARGET, or two operands).
SHAPES: list = [2] * 256
for _op in _MEMBERS:
    EFFECTS[_op._value_] = _effect_row(_op)
    if not _op.operands:
        SHAPES[_op._value_] = 0
    elif len(_op.operands) == 1 and _op.operands[0] is not Operand.TARGET:
        SHAPES[_op._value_] = 1
del _op


# The operand encoding is part of the instruction set too: changing it must change the fingerprint.
ENCODING = "opcode:u8; operands:uleb128; TARGET:u32le absolute byte offset"


def _fingerprint(end: int = 256) -> bytes:
    """The fingerprint of the rows numbered below ``end``: the table as a minor left it."""
    rows = [ENCODING]
    for op in _MEMBERS:
        if op._value_ >= end:
            continue
        rows.append(f"{op._value_}|{op._name_}|{','.join(o._name_ for o in op.operands)}|"
                    f"{op.pops}|{op.pushes}|{int(op.flags)}|{op.branch}")
    return sha256("\n".join(rows).encode()).digest()[:8]


# _fingerprint() of this table, written out: hashing the table cost every start. The test suite
# recomputes it (tests/test_opcodes.py), so a changed row cannot keep the old fingerprint.
FINGERPRINT: bytes = bytes.fromhex("552f453e87ceee40")
_FINGERPRINT_5_0: bytes = bytes.fromhex("348da0f093235426")

# For each minor of FORMAT_MAJOR: one past the highest opcode it defines, and the fingerprint of
# the table up to there, which files of that minor carry (snb.load accepts each for its minor).
TABLE_ENDS: dict = {0: 177, 1: 177, 2: 225, 3: 231}
_FINGERPRINT_5_2: bytes = bytes.fromhex("41dea3c87fc1276b")
FINGERPRINTS: dict = {0: _FINGERPRINT_5_0, 1: _FINGERPRINT_5_0, 2: _FINGERPRINT_5_2,
                      3: FINGERPRINT}
