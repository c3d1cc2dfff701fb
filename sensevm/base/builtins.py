"""The builtin names of Sense as data: each builtin's signature and one-line doc, the members of the built-in types, and the ``std.`` modules.

One declarative table for the tools that describe the language without running it (the
language server's hover and completion): the runtime's and the world's tables
(``sensevm.runtime.builtins.CORE``, ``sensevm.world.BUILTINS``) hold the implementations, and
``tests/test_builtin_table.py`` checks that this table names exactly the builtins they define,
so neither can drift from the other. Nothing here is imported at a VM's start-up.

``MEMBERS`` (methods and fields by type name) is data too. ``STD_MODULES`` is the same shape of
row for the ``std.`` modules, read from the library's source by the language server
(sensec/lsp/std_docs.py) rather than written here twice.
"""

from __future__ import annotations


class BuiltinDoc:
    """One builtin function: ``name(params) -> returns``, its arity (None: variadic or optional
    arguments), a one-line doc, and whether it is retired (still bound, it only explains)."""

    __slots__ = ("name", "params", "arity", "returns", "doc", "retired", "labels")

    def __init__(self, name: str, params: str, arity, returns: str, doc: str, *,
                 retired: bool = False, labels: tuple = ()):
        self.name = name
        self.params = params
        self.arity = arity
        self.returns = returns
        self.doc = doc
        self.retired = retired
        self.labels = labels            # the labelled arguments it accepts (spec 9.3)

    @property
    def signature(self) -> str:
        return f"{self.name}({self.params}) -> {self.returns}"

    def __repr__(self) -> str:
        return f"BuiltinDoc({self.name!r})"


class MemberDoc:
    """A member of a built-in type: a method (``params`` is not None) or a field."""

    __slots__ = ("name", "params", "returns", "doc")

    def __init__(self, name: str, params, returns: str, doc: str):
        self.name = name
        self.params = params
        self.returns = returns
        self.doc = doc

    @property
    def is_method(self) -> bool:
        return self.params is not None

    @property
    def signature(self) -> str:
        if self.params is None:
            return f"{self.name}: {self.returns}"
        return f"{self.name}({self.params}) -> {self.returns}"


class StdModule:
    """A ``std.`` module: its dotted name, a one-line doc, its members, and the file that
    defines it if it is written in Sense (go-to-definition opens it)."""

    __slots__ = ("name", "doc", "members", "source")

    def __init__(self, name: str, doc: str, members: tuple = (), source=None):
        self.name = name
        self.doc = doc
        self.members = members          # of BuiltinDoc (functions) and MemberDoc (values)
        self.source = source


_B = BuiltinDoc

# Spec 9.2, 15 and 18, in that order; the '@' names the compiler emits are not listed (no
# program can spell them).
BUILTINS: tuple = (
    _B("print", "a, ...", None, "Nil",
       "Write the printed forms of the arguments joined by one space, then a newline."),
    _B("len", "x", 1, "Int", "The length of a String (in code points) or an Array."),
    _B("range", "a, b?, step?", None, "Array<Int>",
       "An Array of Ints from a (or 0) up to b, by step, as Python's range."),
    _B("str", "x", 1, "String", "The printed form of x."),
    _B("int", "x", 1, "Int",
       "x as an Int: a Float truncated toward zero, a Bool, or a String of digits."),
    _B("float", "x", 1, "Float", "x as a Float: a number, a Bool, or a String."),
    _B("type_of", "x", 1, "String", "The name of x's type, e.g. \"Int\" or \"Action\"."),
    _B("push", "arr, v", 2, "Array", "Append v to arr in place and return arr."),
    _B("assert", "c, msg?", None, "Nil",
       "Raise a SenseRuntimeError with msg (default 'assertion failed') if c is falsy."),
    _B("audit_log", "", 0, "Array<String>", "The audit entries recorded so far, one String each."),
    _B("user_request", "", 0, "String",
       "The user's request given by `sensevm run --request TEXT` (labelled as the user's)."),
    _B("await", "x", 1, "Any",
       "Wait for a Future (its value) or an async Agent (it pauses or ends) and return it."),
    _B("start", "agent", 1, "Agent", "Start an agent that was declared: run its body."),
    _B("pause", "reason?", None, "Any",
       "Inside an agent: pause it and hand control back; returns the value it is resumed with."),
    _B("resume", "agent, value?", None, "Agent",
       "Resume a paused agent; its pause() returns value (nil if omitted)."),
    _B("send", "agent, message", 2, "Nil", "Append message to the agent's mailbox."),
    _B("receive", "seconds?", None, "Any",
       "Inside an agent: the oldest message, waiting for one (nil when the timeout expires)."),
    _B("ask_human", "question", 1, "String",
       "Ask a person: inside an agent it pauses with the question; outside it reads a line."),
    _B("inference", "provider, name?, ...labels", None, "Model",
       "A Model: \"mock\", \"anthropic\" or \"openai\".",
       labels=("temperature", "max_tokens", "api_key_env", "response_template", "confidence")),
    _B("ask", "prompt", 1, "Answer", "Ask the model of the nearest 'set delegation'."),
    _B("ask_with_tools", "prompt, tools", 2, "Answer",
       "Ask the delegated model, letting it call the tools and skills given."),
    _B("skill", "name, description, tools", 3, "Skill",
       "A named group of tools with a description, for ask_with_tools."),
    _B("ask_with_memory", "prompt, memory", 2, "Answer",
       "Ask the delegated model with what the memory knows prefixed to the prompt."),
    _B("connect_mcp", "name, command, args, capability?", None, "McpServer",
       "Start an MCP server over stdio and expose its tools."),
    _B("mock_model", "...", None, "Nil", "Retired: use inference(\"mock\", ...) instead.",
       retired=True),
    _B("verify", "action", None, "Nil", "Retired: use action.verify() instead.", retired=True),
    _B("approve", "action", None, "Nil", "Retired: use action.approve() instead.", retired=True),
    _B("rollback", "action", None, "Nil", "Retired: use action.rollback() instead.",
       retired=True),
)

BY_NAME: dict = {b.name: b for b in BUILTINS}

_M = MemberDoc
_MEMORY = (
    _M("remember", "key, value", "Nil", "Store value under key."),
    _M("recall", "key", "Any", "The value stored under key, or nil."),
    _M("forget", "key", "Nil", "Remove key (no error if it is absent)."),
    _M("keys", "", "Array<String>", "The keys, in insertion order."),
    _M("name", None, "String", "The memory's name."),
)

# The members of the built-in types (spec 10.2, 15.1, 18), by the type_of name. A member the
# runtime adds is a row here; the language server completes members after '.' from this table
# when it knows the receiver's type.
MEMBERS: dict = {
    "Action": (
        _M("verify", "", "Action", "Check the capability: prepared -> verified (or denied)."),
        _M("approve", "", "Action", "Record approval (prepared or verified; not audited)."),
        _M("commit", "", "Any", "Run the body (checks capability and approval first)."),
        _M("rollback", "", "Any", "Run the rollback block of a committed reversible action."),
        _M("state", None, "String", "prepared, verified, committed, denied, failed or rolled_back."),
        _M("name", None, "String", "The action's name."),
        _M("kind", None, "String", "\"reversible\" or \"irreversible\"."),
        _M("approved", None, "Bool", "Whether .approve() was called."),
    ),
    "Agent": (
        _M("status", None, "String", "created, running, paused, completed or failed."),
        _M("name", None, "String", "The agent's name."),
        _M("pause_reason", None, "Any", "The reason of its last pause, or nil."),
        _M("doc", None, "String", "The agent's docstring, or nil."),
    ),
    "Model": (
        _M("ask", "prompt", "Answer", "Ask this model."),
        _M("name", None, "String", "The model's name."),
    ),
    "Answer": (
        _M("value", None, "String", "The answer's text."),
        _M("confidence", None, "Float", "The model's confidence, or nil."),
        _M("source", None, "String", "The name of the model that answered."),
    ),
    "Memory": _MEMORY + (_M("kind", None, "String", "The hint it was declared with, or nil."),),
    "PersistentMemory": _MEMORY + (
        _M("path", None, "String", "Where the log is stored."),
        _M("history", "key", "Array<String>", "Every remember and forget of key, with versions."),
        _M("as_of", "key, version", "Any", "The value of key as of a global version."),
    ),
    "Skill": (
        _M("name", None, "String", "The skill's name."),
        _M("description", None, "String", "What the skill does."),
        _M("tools", None, "Array", "Its tools."),
    ),
    "McpServer": (
        _M("name", None, "String", "The server's name."),
        _M("tools", None, "Array", "The tools it exposes."),
        _M("close", "", "Nil", "Stop the server."),
    ),
    # EXTENSIONS.md E2 (sensevm/runtime/methods.py implements them).
    "String": (
        _M("upper", "", "String", "The text in upper case."),
        _M("lower", "", "String", "The text in lower case."),
        _M("trim", "", "String", "Without leading and trailing whitespace."),
        _M("trim_start", "", "String", "Without leading whitespace."),
        _M("trim_end", "", "String", "Without trailing whitespace."),
        _M("split", "[sep]", "Array<String>", "The parts between sep (default: whitespace runs)."),
        _M("lines", "", "Array<String>", "The lines, without their line ends."),
        _M("starts_with", "prefix", "Bool", "Whether the text starts with prefix."),
        _M("ends_with", "suffix", "Bool", "Whether the text ends with suffix."),
        _M("contains", "sub", "Bool", "Whether sub occurs in the text."),
        _M("find", "sub", "Int", "The index of the first sub, or -1."),
        _M("replace", "old, new", "String", "Every old replaced by new."),
        _M("repeat", "n", "String", "The text n times."),
        _M("pad_start", "n, fill", "String", "Padded at the start with fill to length n."),
        _M("pad_end", "n, fill", "String", "Padded at the end with fill to length n."),
        _M("to_int", "", "Int", "The text as an Int, as int() reads it."),
        _M("to_float", "", "Float", "The text as a Float, as float() reads it."),
    ),
    "Array": (
        _M("push", "v", "Nil", "Append v."),
        _M("pop", "", "Any", "Remove and return the last element."),
        _M("insert", "i, v", "Nil", "Insert v before index i."),
        _M("remove_at", "i", "Any", "Remove and return the element at i."),
        _M("index_of", "v", "Int", "The index of the first element equal to v, or -1."),
        _M("contains", "v", "Bool", "Whether an element equals v."),
        _M("join", "sep", "String", "The elements (Strings) joined with sep."),
        _M("sorted", "[key]", "Array", "A sorted copy (by key(x) when given)."),
        _M("reversed", "", "Array", "A reversed copy."),
        _M("copy", "", "Array", "A shallow copy."),
        _M("map", "f", "Array", "f(x) of every element."),
        _M("filter", "f", "Array", "The elements for which f(x) is true."),
        _M("reduce", "f, initial", "Any", "f(acc, x) over the elements, from initial."),
        _M("sum", "", "Any", "The sum of the elements (numbers)."),
        _M("min", "", "Any", "The least element (non-empty)."),
        _M("max", "", "Any", "The greatest element (non-empty)."),
        _M("slice", "a, b", "Array", "The elements from a up to b, as x[a:b]."),
    ),
    "Map": (
        _M("keys", "", "Array", "The keys, in insertion order."),
        _M("values", "", "Array", "The values, in insertion order."),
        _M("items", "", "Array", "[key, value] pairs, in insertion order."),
        _M("get", "k, [default]", "Any", "The value of k, or default (nil) when missing."),
        _M("has", "k", "Bool", "Whether k is a key."),
        _M("remove", "k", "Any", "Remove k and return its value."),
        _M("copy", "", "Map", "A shallow copy."),
        _M("merged", "other", "Map", "A new Map: this one's entries, then other's (other wins)."),
    ),
}

# The std. modules, by dotted name ("std.fs"): filled by the language server from the
# library's own source (sensec/lsp/std_docs.py), so it describes exactly what the VM runs.
STD_MODULES: dict = {}
