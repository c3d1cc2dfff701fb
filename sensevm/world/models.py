"""Models (spec 18.1, 18.3): the Model, Answer and Skill values and the builtins that use them.

``inference(...)`` makes a Model around a provider (``providers.py``); ``model NAME = ...`` and
``set delegation = ...`` compile to calls of the two statement helpers at the bottom, whose
names (``@model``, ``@set``) cannot be written in source. The delegated model lives in the scope
where ``set`` ran, under the binding ``@delegation``, so ``ask()`` finds it lexically the way
policy is found.

Every provider that leaves the process (``capability`` not None) is gated by policy (lexical
and call chain, spec 21.2) before each call and audited as a ``model`` event after it. A tool
call a model asks for goes through ``VM.call_tool``, the same path as ``TOOL_CALL``: arity,
capability (audited), argument types, body, return type. Its failure is handed back to the
model as text, never raised, unless it is a limit of the run, which stops the program as
anywhere else.
"""

from __future__ import annotations

import os

from sensevm.base.errors import (SenseError, SenseLimitError, SensePolicyError, SenseRuntimeError,
                                 SenseTypeError)
from sensevm.guard import policy as P
from sensevm.guard import provenance as PV
from sensevm.runtime.values import ToolDefinition, equal, sized, sized_string, to_str, type_name

DELEGATION = "@delegation"
MAX_TOOL_ROUNDS = 10


def _error(message: str, located: bool = True) -> SenseRuntimeError:
    return SenseRuntimeError(message, located=located)


# ----------------------------------------------------------------------------- values

class Model:
    """A reasoning resource: a name (renamed by ``model NAME = ...``) and its provider."""

    __slots__ = ("name", "provider")
    type_name = "Model"

    def __init__(self, name: str, provider):
        self.name = name
        self.provider = provider

    def __str__(self) -> str:
        return f"<model {self.name}>"

    def sense_member(self, vm, name: str):
        if name == "name":
            return self.name
        if name == "ask":
            # Named, and positioned, where it is read: errors and audit lines of a later call
            # point at `m.ask`, as the reference's do.
            frame = vm.frame
            return BoundAsk(self, f"{self.name}.ask", frame.pos if frame is not None else None)
        raise _error(f"model '{self.name}' has no member '{name}'")

    def member_names(self):
        return ["ask", "name"]


class BoundAsk:
    """``m.ask``: a function value that asks one particular model."""

    __slots__ = ("model", "name", "pos")
    type_name = "Function"
    is_function = True
    is_builtin = True          # called with labels, it is refused the way a builtin is
    labels = False

    def __init__(self, model: Model, name: str, pos):
        self.model = model
        self.name = name
        self.pos = pos

    def __str__(self) -> str:
        return f"<builtin {self.name}>"

    def sense_call(self, vm, frame, args) -> bool:
        if len(args) != 1:
            raise _error(f"'{self.name}' expects 1 argument(s), got {len(args)}")
        frame.stack.append(ask_model(vm, frame, self.model, args[0], at=self.pos))
        return False


class Answer:
    """What a model said: a value the program cannot mistake for a certain one."""

    __slots__ = ("value", "confidence", "source")
    type_name = "Answer"

    def __init__(self, value, confidence: float | None, source: str):
        self.value = value
        self.confidence = confidence
        self.source = source

    def __str__(self) -> str:
        shown = "?" if self.confidence is None else f"{self.confidence:.2f}"
        return f"answer<{shown}>({to_str(self.value)})"

    def sense_origins(self) -> frozenset:
        """Its printed form shows its value (and its confidence, the model's too)."""
        return PV.deep_origins(self.value)

    def sense_member(self, vm, name: str):
        if name in ("value", "confidence", "source"):
            return getattr(self, name)
        raise _error(f"answer has no member '{name}'")

    def member_names(self):
        return ["confidence", "source", "value"]

    def sense_equal(self, other) -> bool:
        return (equal(self.value, other.value) and self.confidence == other.confidence
                and self.source == other.source)


class Skill:
    """A named bundle of tools whose description is put in front of the prompt."""

    __slots__ = ("name", "description", "tools")
    type_name = "Skill"

    def __init__(self, name: str, description: str, tools: list):
        self.name = name
        self.description = description
        self.tools = tools

    def __str__(self) -> str:
        return f"<skill {self.name} ({len(self.tools)} tools)>"

    def sense_member(self, vm, name: str):
        if name in ("name", "description", "tools"):
            return getattr(self, name)
        raise _error(f"skill '{self.name}' has no member '{name}'")

    def member_names(self):
        return ["description", "name", "tools"]

    def sense_equal(self, other) -> bool:
        return (self.name == other.name and self.description == other.description
                and equal(self.tools, other.tools))


# ----------------------------------------------------------------------------- inference()

_USAGE = ("inference() expects (provider: String, model_id: String = default), plus optional "
          "temperature:/max_tokens:/api_key_env: (real providers) or "
          "response_template:/confidence: (\"mock\")")


def _number(v) -> bool:
    return type(v) in (int, float, bool)


def b_inference(vm, args, labels=None):
    from sensevm.world import providers as PR
    from sensevm.runtime.values import unlabelled
    args = unlabelled(args)
    labels = dict(zip(labels, unlabelled(list(labels.values())))) if labels else {}
    if not 1 <= len(args) <= 2:
        raise _error(_USAGE, located=False)
    provider = args[0]
    if type(provider) is not str:
        raise _error("inference()'s provider argument must be a String", located=False)
    rest = args[1:]          # an explicit nil is a wrong name, not a missing one
    try:
        if provider == "mock":
            return _mock(rest, labels)
        if provider == "scripted":
            return _scripted(vm, rest, labels)
        if provider in PR.REMOTE:
            return _remote(PR.REMOTE[provider], rest, labels)
    except PR.ProviderConfigError as err:
        raise _error(str(err), located=False) from None
    # The reference's text (a program may print e.message); what this VM adds, as a note.
    err = _error(f"inference(): unknown provider '{provider}' -- supported: "
                 f"{', '.join(sorted([*PR.REMOTE, 'mock']))}", located=False)
    err.note = "this VM also has the provider 'scripted' (docs/models.md)"
    raise err


# The options this VM adds to the reference's (docs/models.md): never in the reference's text.
_ADDED_OPTIONS = frozenset({"base_url", "timeout"})


def _unknown_options(prefix: str, labels: dict, supported) -> None:
    unknown = sorted(set(labels) - set(supported))
    if unknown:
        theirs = sorted(set(supported) - _ADDED_OPTIONS)
        err = _error(f"{prefix}: unknown option(s) {', '.join(unknown)} -- supported: "
                     f"{', '.join(theirs) or '(none)'}", located=False)
        ours = sorted(set(supported) & _ADDED_OPTIONS)
        if ours:
            err.note = f"this VM also takes {', '.join(ours)} (docs/models.md)"
        raise err


def _mock(rest, labels) -> Model:
    from sensevm.world.providers import MockProvider
    _unknown_options('inference("mock")', labels, ("confidence", "response_template"))
    name = rest[0] if rest else "mock"
    if type(name) is not str:
        raise _error('inference("mock")\'s name argument must be a String', located=False)
    template = labels.get("response_template", "(mock reasoning about: {prompt})")
    if type(template) is not str:
        raise _error('inference("mock")\'s response_template option must be a String',
                     located=False)
    confidence = labels.get("confidence", 0.5)
    if not _number(confidence):
        raise _error('inference("mock")\'s confidence option must be a number', located=False)
    return Model(name, MockProvider(template, float(confidence)))


def _scripted(vm, rest, labels) -> Model:
    from sensevm.world.providers import ScriptedProvider
    _unknown_options('inference("scripted")', labels, ())
    path = rest[0] if rest else None
    if type(path) is not str:
        raise _error('inference("scripted") needs the path of a JSON script as its second '
                     "argument (relative to the program's directory)", located=False)
    frame = vm.frame
    # Reading the script is reading a file: its capability is asked before the file is opened
    # (and again at each ask, as for every provider).
    if frame is not None and not P.allowed(ScriptedProvider.capability, frame.scope, frame):
        raise SensePolicyError(f'inference("scripted") requires capability '
                               f"'{ScriptedProvider.capability}', which is denied by policy")
    if not os.path.isabs(path) and frame is not None:
        # The program's directory (sensevm.runtime.places), whatever the working directory.
        from sensevm.runtime.places import resolve
        path = resolve(vm, frame.prepared.path, path)
    provider = ScriptedProvider.load(path)
    return Model(provider.name, provider)


def _remote(spec, rest, labels) -> Model:
    model_id = rest[0] if rest else spec.default_model
    if type(model_id) is not str:
        raise _error("inference()'s model_id argument must be a String", located=False)
    _unknown_options("inference()", labels, spec.options)
    key_env = labels.get("api_key_env", spec.key_env)
    if type(key_env) is not str:
        raise _error("inference()'s api_key_env option must be a String", located=False)
    base_url = labels.get("base_url")
    if base_url is not None and type(base_url) is not str:
        raise _error("inference()'s base_url option must be a String", located=False)
    key = os.environ.get(key_env)
    # A local server (Ollama, LM Studio, vLLM) named by base_url: needs no key unless one is
    # asked for by name.
    if not key and (base_url is None or "api_key_env" in labels):
        raise _error(f"inference() needs the '{key_env}' environment variable set to a real "
                     "API key", located=False)
    temperature = labels.get("temperature")
    if temperature is not None and not _number(temperature):
        raise _error("inference()'s temperature option must be a number", located=False)
    max_tokens = labels.get("max_tokens")
    if max_tokens is not None and type(max_tokens) is not int:
        raise _error("inference()'s max_tokens option must be an Int", located=False)
    timeout = labels.get("timeout", 60)
    if not _number(timeout) or type(timeout) is bool or timeout <= 0:
        raise _error("inference()'s timeout option must be a positive number of seconds",
                     located=False)
    provider = spec.make(model_id=model_id, api_key=key or None, key_env=key_env, base_url=base_url,
                         temperature=temperature, max_tokens=max_tokens, timeout=float(timeout))
    return Model(model_id, provider)


# ----------------------------------------------------------------------------- asking

def delegated_model(scope) -> Model | None:
    while scope is not None:
        model = scope.vars.get(DELEGATION)
        if model is not None:
            return model
        scope = scope.parent
    return None


def _gate(vm, frame, model: Model, at=None) -> str | None:
    """Policy for a provider that leaves the process; returns its capability (or None)."""
    cap = model.provider.capability
    if cap is not None and not P.allowed(cap, frame.scope, frame):
        _record(vm, frame, model, "denied", f"capability '{cap}' denied by policy",
                host_only=True, at=at)
        raise SensePolicyError(f"model '{model.name}' requires capability '{cap}', which is "
                               "denied by policy")
    return cap


def _record(vm, frame, model, event, detail=None, host_only=False, at=None) -> None:
    from sensevm.guard.audit import AuditRecord
    vm.audit.append(AuditRecord(
        subject=f"model '{model.name}'", name=model.name, kind="model", event=event,
        detail=detail, line=(at or frame.pos).line, lineage=vm.lineage(frame),
        host_only=host_only))


def _failed(vm, frame, model, cap, reason: str, at=None) -> SenseRuntimeError:
    if cap is not None:
        _record(vm, frame, model, "failed", reason, host_only=True, at=at)
    return _error(f"model '{model.name}' failed: {reason}")


def model_output(vm, model: Model, text, context):
    """What a model says carries its context's origins (the second look): a model that read a
    page speaks with the page's influence. Its context's clean text is evidence too."""
    look = vm.look
    if look is None:
        return text
    origins = PV.EMPTY
    for value in context:
        origins = PV.union(origins, PV.deep_origins(value))
    look.context(*context)
    look.live = True
    return PV.label(text, PV.union(origins, frozenset({PV.model(model.name)})))


def ask_model(vm, frame, model: Model, prompt, what: str = "ask()", at=None,
              context=()) -> Answer:
    """Ask ``model`` for code running in ``frame``; ``at``: where errors and audit lines point;
    ``context``: values besides the prompt that went into it (their origins)."""
    from sensevm.world.providers import ProviderError
    try:
        if type(prompt) is not str:
            if type(prompt) is not PV.LStr:
                raise _error(f"{what} expects a String prompt, got {type_name(prompt)}")
        cap = _gate(vm, frame, model, at)
        try:
            text, confidence = model.provider.complete(PV.plain(prompt))
        except ProviderError as err:
            raise _failed(vm, frame, model, cap, str(err), at) from None
    except SenseError as err:
        if at is not None:
            err.with_pos(at, frame.prepared.path)
        raise
    if cap is not None:
        _record(vm, frame, model, "called", at=at)
    if type(text) is str:
        text = model_output(vm, model, sized_string(text), (prompt,) + tuple(context))
    return Answer(text, confidence, model.name)


def _no_model(what: str, example: str) -> SenseRuntimeError:
    return _error(f"{what} has no model configured — declare one (e.g. {example}) and "
                  "activate it with 'set delegation = <model>' first")


def b_ask(vm, frame, args):
    model = delegated_model(frame.scope)
    if model is None:
        raise _no_model("ask()", 'inference("mock")')
    frame.stack.append(ask_model(vm, frame, model, args[0]))
    return False


# ----------------------------------------------------------------------------- tools for models

_JSON_TYPES = {"Int": "integer", "Float": "number", "String": "string", "Bool": "boolean"}


def json_schema(annotation: str | None) -> dict:
    """The JSON Schema a model is shown for a parameter annotated ``annotation``."""
    from sensevm.runtime.values import parse_annotation
    parsed = parse_annotation(annotation) if annotation else None
    return _schema(parsed) if parsed is not None else {}


def _schema(parsed) -> dict:
    name, params = parsed
    if name in _JSON_TYPES:
        return {"type": _JSON_TYPES[name]}
    if name == "Array":
        schema: dict = {"type": "array"}
        if params:
            schema["items"] = _schema(params[0])
        return schema
    return {}


def tool_spec(tool, located: bool) -> dict:
    """Validates one tool for a model (ask_with_tools and skill share it) and describes it."""
    if type(tool) is not ToolDefinition:
        model_spec = getattr(tool, "model_spec", None)      # a tool of an MCP server (mcp.py)
        if model_spec is not None:
            return model_spec()
        raise _error("only tools declared with 'tool' (or 'async tool') are accepted here, got "
                     f"{type_name(tool)}", located)
    decl = tool.decl
    if decl.is_async:
        raise _error(f"tool '{decl.name}' is async -- async tools aren't supported here yet "
                     "(its result is a pending Future, not a value)", located)
    if not decl.description:
        raise _error(f"tool '{decl.name}' has no description -- add one to expose it to a "
                     f"model, e.g. 'tool {decl.name}(...) \"what it does\":'", located)
    code = tool.body.code
    return {
        "name": decl.name,
        "description": decl.description,
        "parameters": {
            "type": "object",
            "properties": {p: json_schema(t) for p, t in zip(code.params, code.param_types)},
            "required": list(code.params),
        },
    }


def b_skill(vm, args):
    from sensevm.runtime.values import unlabelled
    name, description, tools = unlabelled(args)
    if type(name) is not str:
        raise _error("skill()'s name argument must be a String", located=False)
    if type(description) is not str:
        raise _error("skill()'s description argument must be a String", located=False)
    if type(tools) is not list:
        raise _error(f"skill()'s tools argument must be an Array, got {type_name(tools)}",
                     located=False)
    if not tools:
        raise _error(f"skill '{name}' needs at least one tool", located=False)
    for tool in tools:
        tool_spec(tool, located=False)
    return Skill(name, description, list(tools))


def b_ask_with_tools(vm, frame, args):
    from sensevm.world.providers import ProviderError, ToolCallingUnsupported
    prompt, tools = args
    model = delegated_model(frame.scope)
    if model is None:
        raise _no_model("ask_with_tools()", 'model claude = inference("anthropic")')
    if type(tools) is not list:
        raise _error(f"ask_with_tools() expects an Array of tools, got {type_name(tools)}")
    if type(prompt) is not str and type(prompt) is not PV.LStr:
        raise _error(f"ask_with_tools() expects a String prompt, got {type_name(prompt)}")
    context = [prompt]      # everything the model has read (the second look)
    cap = _gate(vm, frame, model)
    specs, by_name, skills = [], {}, []
    for item in tools:
        members = [item]
        if type(item) is Skill:
            skills.append(f"{item.name}: {item.description}")
            members = item.tools
        for tool in members:
            spec = tool_spec(tool, located=True)
            if spec["name"] in by_name:
                raise _error(f"duplicate tool name '{spec['name']}' across the given "
                             "tools/skills")
            specs.append(spec)
            by_name[spec["name"]] = tool
    if skills:
        prompt = ("Available skills:\n" + "\n".join(f"- {s}" for s in skills) + "\n\n"
                  + PV.plain(prompt))

    conversation: list = [{"role": "user", "text": PV.plain(prompt)}]
    for _ in range(MAX_TOOL_ROUNDS):
        try:
            turn = model.provider.turn(conversation, specs)
        except ToolCallingUnsupported as err:
            raise _error(f"model '{model.name}' does not support ask_with_tools(): {err}") \
                from None
        except ProviderError as err:
            raise _failed(vm, frame, model, cap, str(err)) from None
        conversation.append({"role": "assistant", "text": turn.text, "calls": turn.calls})
        if not turn.calls:
            if cap is not None:
                _record(vm, frame, model, "called")
            frame.stack.append(Answer(model_output(vm, model, sized_string(turn.text or ""),
                                                   context), None, model.name))
            return False
        for call in turn.calls:
            result = _run_requested(vm, frame, by_name, call, model, context)
            context.append(result)
            conversation.append({"role": "tool", "id": call.id, "name": call.name,
                                 "text": PV.plain(result)})
    raise _failed(vm, frame, model, cap, f"no final answer within {MAX_TOOL_ROUNDS} tool-call "
                                         "rounds")


def _run_requested(vm, frame, by_name: dict, call, model, context) -> str:
    """One tool call a model asked for, through the tool call path; its result as text (with
    the result's origins). The arguments are the model's words: they carry its context's."""
    tool = by_name.get(call.name)
    if tool is None:
        return f"error: no such tool '{call.name}'"
    if not isinstance(call.arguments, dict):
        return "error: the arguments must be a JSON object"
    try:
        remote = getattr(tool, "call_for_model", None)     # a tool of an MCP server (mcp.py)
        if remote is not None:
            return remote(vm, frame, call.arguments)
        args = []
        for param in tool.params:
            args.append(model_output(vm, model, sized(from_json(call.arguments.get(param),
                                                                param)), context))
        result = vm.call_tool_now(frame, tool, args)
        return PV.like(to_str(result), result)
    except SenseLimitError:
        raise
    except SenseError as err:
        err.with_pos(frame.pos, frame.prepared.path)
        return f"error: {err.text}"


def from_json(value, param: str):
    """A JSON value a model sent, as a Sense value: an object is a Map (EXTENSIONS.md E1), its
    keys Strings in the order the model wrote them."""
    if isinstance(value, dict):
        return {str(k): from_json(v, param) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(x, param) for x in value]
    return value


# ----------------------------------------------------------------------------- statements

def b_model_decl(vm, args):
    """``model NAME = value``: the value must be a Model; it is renamed NAME."""
    name, value = args
    if type(value) is not Model:
        raise SenseTypeError(f"'model {name}' expects a Model, got {type_name(value)}")
    value.name = name
    return value


def b_set(vm, args):
    """``set TARGET = value``: only ``delegation`` exists; the value is already evaluated."""
    target, value = args
    if target != "delegation":
        raise _error(f"unknown 'set' target '{target}' (only 'delegation' is supported so far)")
    if type(value) is not Model:
        raise SenseTypeError(f"'set delegation' requires a Model value, got {type_name(value)}")
    return value
