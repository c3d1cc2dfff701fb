"""Model providers: the offline mock, a scripted replay for tests and demos, and HTTP providers.

A provider answers two questions: ``complete(prompt) -> (text, confidence)`` for ``ask`` and
``turn(conversation, tools) -> Turn`` for one round of ``ask_with_tools``. The conversation is
kept in a neutral form by models.py — dicts with ``role`` "user" (``text``), "assistant"
(``text``, ``calls``) and "tool" (``id``, ``name``, ``text``) — and each HTTP provider renders it
into its own wire format. Failures are ``ProviderError`` with a reason a person can act on
(``HTTP 500 from URL: ...``, ``no reply from URL within 2s``, ``malformed reply ...``); nothing
here raises anything else but the run's own limits (SenseLimitError): a request waits for its
reply at most until its own ``timeout`` or the end of the run's --timeout, whichever comes
first, however slowly the server sends it, and reads no more of a reply than --max-string
could hold (sensevm/world/bounded_http.py, docs/limits.md).

The HTTP providers speak the OpenAI chat-completions protocol (api.openai.com, and any server
that implements it: Ollama, LM Studio, vLLM, llama.cpp) and Anthropic's messages protocol, with
the standard library's urllib, so the VM needs no vendor SDK.
"""

from __future__ import annotations

import json
import os
from _thread import allocate_lock
from typing import Any, NamedTuple, Optional


class ProviderError(Exception):
    """A provider call failed; the message is the reason."""


class ToolCallingUnsupported(ProviderError):
    """This provider cannot call tools."""


class ProviderConfigError(Exception):
    """``inference(...)`` was given something the provider cannot work with."""


class ToolCall(NamedTuple):
    id: str
    name: str
    arguments: Any        # a dict when the model sent a well-formed JSON object


class Turn(NamedTuple):
    text: Optional[str]
    calls: list


# ----------------------------------------------------------------------------- mock

class MockProvider:
    """Offline and deterministic: the template with ``{prompt}`` filled in (str.format rules)."""

    capability = None

    def __init__(self, template: str, confidence: float):
        self.template = template
        self.confidence = confidence

    def complete(self, prompt: str):
        try:
            return self.template.format(prompt=prompt), self.confidence
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            # The reference formats the same way and reports the host's exception as is.
            raise ProviderError(f"{type(exc).__name__}: {exc}") from None

    def turn(self, conversation, tools) -> Turn:
        raise ToolCallingUnsupported("MockModelProvider does not support tool-calling")

    def state(self) -> dict:
        return {"kind": "mock", "template": self.template, "confidence": self.confidence}


# ----------------------------------------------------------------------------- scripted

class ScriptedProvider:
    """Replays the model turns of a JSON file, in order, one per ``ask`` or tool-call round.

    The file is ``{"name": NAME, "turns": [TURN, ...]}`` or just ``[TURN, ...]``; a TURN is
    ``{"text": STRING, "confidence": NUMBER?}`` or ``{"tool_calls": [{"name": TOOL,
    "arguments": {...}, "id": STRING?}, ...]}``. In a text turn, ``{results}`` stands for the
    tool results of the previous round, joined by newlines (so a demo can show what the tools
    said). Everything the model was sent is kept in ``received``, for tests.
    """

    capability = "model.scripted"

    def __init__(self, name: str, turns: list, path: str):
        self.name = name
        self.turns = turns
        self.path = path
        self.used = 0
        self.received: list = []
        self.lock = allocate_lock()

    @classmethod
    def load(cls, path: str) -> "ScriptedProvider":
        shown = os.path.basename(path)
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except OSError as exc:
            raise ProviderConfigError(f"inference(\"scripted\"): cannot read '{path}': "
                                      f"{exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ProviderConfigError(f"inference(\"scripted\"): '{path}' is not UTF-8") from None
        except json.JSONDecodeError as exc:
            raise ProviderConfigError(f"inference(\"scripted\"): '{path}' is not valid JSON: "
                                      f"{exc.msg} at line {exc.lineno} column {exc.colno}") \
                from None
        name = os.path.splitext(shown)[0]
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"name", "turns"})
            if unknown:
                raise ProviderConfigError(f"inference(\"scripted\"): '{path}': unknown key(s) "
                                          f"{', '.join(unknown)} -- expected name, turns")
            name = data.get("name", name)
            if not isinstance(name, str):
                raise ProviderConfigError(f"inference(\"scripted\"): '{path}': 'name' must be "
                                          "a string")
            data = data.get("turns")
        if not isinstance(data, list):
            raise ProviderConfigError(f"inference(\"scripted\"): '{path}': expected a list of "
                                      "turns (or an object with 'turns')")
        turns = [cls._turn(path, i, t) for i, t in enumerate(data, 1)]
        return cls(name, turns, path)

    @staticmethod
    def _turn(path: str, number: int, turn) -> dict:
        where = f"inference(\"scripted\"): '{path}': turn {number}"
        if not isinstance(turn, dict):
            raise ProviderConfigError(f"{where} must be an object")
        if ("text" in turn) == ("tool_calls" in turn):
            raise ProviderConfigError(f"{where} must have exactly one of 'text' and 'tool_calls'")
        unknown = sorted(set(turn) - {"text", "confidence", "tool_calls"})
        if unknown:
            raise ProviderConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
        if "text" in turn:
            if not isinstance(turn["text"], str):
                raise ProviderConfigError(f"{where}: 'text' must be a string")
            conf = turn.get("confidence")
            if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float))):
                raise ProviderConfigError(f"{where}: 'confidence' must be a number")
            return {"text": turn["text"], "confidence": None if conf is None else float(conf)}
        if "confidence" in turn:
            raise ProviderConfigError(f"{where}: 'confidence' belongs to a text turn")
        calls = turn["tool_calls"]
        if not isinstance(calls, list) or not calls:
            raise ProviderConfigError(f"{where}: 'tool_calls' must be a non-empty list")
        parsed = []
        for k, call in enumerate(calls, 1):
            if (not isinstance(call, dict) or not isinstance(call.get("name"), str)
                    or not set(call) <= {"name", "arguments", "id"}):
                raise ProviderConfigError(f"{where}: tool call {k} must be an object with a "
                                          "string 'name', and 'arguments' and 'id' optional")
            parsed.append(ToolCall(str(call.get("id", f"call_{number}_{k}")), call["name"],
                                   call.get("arguments", {})))
        return {"calls": parsed}

    def state(self) -> dict:
        return {"kind": "scripted", "path": self.path, "used": self.used}

    def _next(self, kind: str) -> dict:
        with self.lock:
            if self.used >= len(self.turns):
                raise ProviderError(f"the script '{os.path.basename(self.path)}' has no more "
                                    f"turns ({len(self.turns)} used)")
            self.used += 1
            return self.turns[self.used - 1]

    def complete(self, prompt: str):
        self.received.append([{"role": "user", "text": prompt}])
        turn = self._next("text")
        if "calls" in turn:
            raise ProviderError(f"turn {self.used} of '{os.path.basename(self.path)}' asks for "
                                "tool calls, but ask() offers the model no tools")
        return turn["text"].replace("{results}", ""), turn["confidence"]

    def turn(self, conversation, tools) -> Turn:
        self.received.append([dict(m) for m in conversation])
        turn = self._next("turn")
        if "calls" in turn:
            return Turn(None, list(turn["calls"]))
        results = []
        for message in reversed(conversation):
            if message["role"] != "tool":
                break
            results.append(message["text"])
        return Turn(turn["text"].replace("{results}", "\n".join(reversed(results))), [])


# ----------------------------------------------------------------------------- HTTP

# A reply's bytes per character of the longest String it may carry: JSON writes a character
# outside the BMP as two \uXXXX escapes. And room for the reply's own fields.
REPLY_BYTES_PER_CHAR = 12
REPLY_SLACK = 1 << 20


def post_json(url: str, payload: dict, headers: dict, timeout: float) -> Any:
    """POST JSON and return the decoded JSON reply, or raise ProviderError saying why not."""
    import urllib.error
    import urllib.request
    from sensevm.runtime import values as V
    from sensevm.world.bounded_http import FAILURES, failure, read_at_most, urlopen
    from sensevm.base.errors import SenseLimitError
    from sensevm.runtime.conversions import int_reader
    from sensevm.world.deadline import Deadline
    deadline = Deadline(timeout, V.BUDGET)
    limit = REPLY_BYTES_PER_CHAR * V.MAX_STRING + REPLY_SLACK
    body = json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json", **headers})
    try:
        with urlopen(request, deadline) as reply:
            raw = read_at_most(reply, limit)
    except urllib.error.HTTPError as exc:
        try:
            detail = _excerpt(exc.read(4096) if exc.fp is not None else b"")
        except OSError:         # (it too stops at the deadline)
            detail = ""
        raise ProviderError(f"HTTP {exc.code} from {url}" + (f": {detail}" if detail else "")) \
            from None
    except FAILURES as exc:
        why = failure(exc)
        raise (_no_reply(url, deadline) if why is None
               else ProviderError(f"cannot reach {url}: {why}")) from None
    if raw is None:
        raise SenseLimitError(f"string size limit exceeded (a reply of more than {limit} bytes "
                              f"from {url}; the limit is {V.MAX_STRING} characters)", "string")
    try:
        return json.loads(raw.decode("utf-8"), parse_int=int_reader(V.BUDGET))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProviderError(f"malformed reply from {url}: not JSON: {_excerpt(raw)!r}") from None


def _no_reply(url: str, deadline):
    """The error of a request whose deadline passed: the run's time limit if it was that."""
    return (deadline.run_out(f"a reply from {url}")
            or ProviderError(f"no reply from {url} within {deadline.timeout:g}s"))


def _excerpt(raw: bytes, limit: int = 200) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _dig(reply, url: str, *path):
    """reply[path...], or a ProviderError naming the first step that is missing."""
    node, shown = reply, ""
    for step in path:
        shown += f"[{step}]" if isinstance(step, int) else (f".{step}" if shown else step)
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            raise ProviderError(f"malformed reply from {url}: no {shown}") from None
    return node


def _arguments(text):
    """Tool-call arguments as the model sent them: a JSON object in a string, usually."""
    if isinstance(text, dict):
        return text
    try:
        return json.loads(text) if isinstance(text, str) and text.strip() else {}
    except json.JSONDecodeError:
        return text            # models.py answers the model that this is not an object


class RemoteSpec(NamedTuple):
    default_model: str
    key_env: str
    options: tuple
    make: Any


_REMOTE_OPTIONS = ("api_key_env", "base_url", "max_tokens", "temperature", "timeout")


class HTTPProvider:
    """What the HTTP providers share: their settings, and how a paused agent saves them."""

    KIND = ""
    BASE_ENV = ""                 # the environment variable that may name the server
    DEFAULT_BASE = ""

    def __init__(self, model_id, api_key, key_env, base_url, temperature, max_tokens, timeout):
        self.model_id = model_id
        self.api_key = api_key
        self.key_env = key_env
        self.given_base_url = base_url
        self.base_url = (base_url or os.environ.get(self.BASE_ENV)
                         or self.DEFAULT_BASE).rstrip("/")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout

    def state(self) -> dict:
        # The key itself is never written down: a restored provider reads its variable again.
        return {"kind": self.KIND, "model_id": self.model_id, "key_env": self.key_env,
                "base_url": self.given_base_url, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "timeout": self.timeout}


class OpenAIProvider(HTTPProvider):
    """The chat-completions protocol; ``base_url`` names any server that implements it."""

    capability = "model.openai"
    KIND = "openai"
    BASE_ENV = "OPENAI_BASE_URL"
    DEFAULT_BASE = "https://api.openai.com/v1"

    @property
    def url(self) -> str:
        return self.base_url + "/chat/completions"

    def _post(self, messages, tools=None) -> dict:
        payload: dict[str, Any] = {"model": self.model_id, "messages": messages}
        if tools:
            payload["tools"] = [{"type": "function", "function": t} for t in tools]
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if self.max_tokens is not None:
            # api.openai.com's newer models refuse max_tokens; other servers only know it.
            key = "max_completion_tokens" if self.base_url == self.DEFAULT_BASE else "max_tokens"
            payload[key] = self.max_tokens
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return post_json(self.url, payload, headers, self.timeout)

    def complete(self, prompt: str):
        reply = self._post([{"role": "user", "content": prompt}])
        content = _dig(reply, self.url, "choices", 0, "message").get("content")
        if content is not None and not isinstance(content, str):
            raise ProviderError(f"malformed reply from {self.url}: content is not text")
        return content or "", None

    def turn(self, conversation, tools) -> Turn:
        reply = self._post(self._wire(conversation), tools)
        message = _dig(reply, self.url, "choices", 0, "message")
        if not isinstance(message, dict):
            raise ProviderError(f"malformed reply from {self.url}: message is not an object")
        calls = []
        for raw in message.get("tool_calls") or []:
            name = _dig(raw, self.url, "function", "name")
            calls.append(ToolCall(str(raw.get("id", "")), str(name),
                                  _arguments(raw["function"].get("arguments"))))
        content = message.get("content")
        return Turn(content if isinstance(content, str) else None, calls)

    @staticmethod
    def _wire(conversation) -> list:
        out = []
        for m in conversation:
            if m["role"] == "user":
                out.append({"role": "user", "content": m["text"]})
            elif m["role"] == "assistant":
                message: dict[str, Any] = {"role": "assistant", "content": m["text"]}
                if m["calls"]:
                    message["tool_calls"] = [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                        for c in m["calls"]]
                out.append(message)
            else:
                out.append({"role": "tool", "tool_call_id": m["id"], "content": m["text"]})
        return out


class AnthropicProvider(HTTPProvider):
    """Anthropic's messages protocol."""

    capability = "model.anthropic"
    KIND = "anthropic"
    BASE_ENV = "ANTHROPIC_BASE_URL"
    DEFAULT_BASE = "https://api.anthropic.com"
    VERSION = "2023-06-01"

    def __init__(self, model_id, api_key, key_env, base_url, temperature, max_tokens, timeout):
        super().__init__(model_id, api_key, key_env, base_url, temperature,
                         max_tokens if max_tokens is not None else 1024,   # the API requires it
                         timeout)

    @property
    def url(self) -> str:
        return self.base_url + "/v1/messages"

    def _post(self, messages, tools=None) -> dict:
        payload: dict[str, Any] = {"model": self.model_id, "max_tokens": self.max_tokens,
                                   "messages": messages}
        if tools:
            payload["tools"] = [{"name": t["name"], "description": t["description"],
                                 "input_schema": t["parameters"]} for t in tools]
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        headers = {"anthropic-version": self.VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return post_json(self.url, payload, headers, self.timeout)

    def _blocks(self, reply) -> list:
        blocks = _dig(reply, self.url, "content")
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            raise ProviderError(f"malformed reply from {self.url}: content is not a list of "
                                "blocks")
        return blocks

    def complete(self, prompt: str):
        blocks = self._blocks(self._post([{"role": "user", "content": prompt}]))
        return "".join(b.get("text", "") for b in blocks if b.get("type") == "text"), None

    def turn(self, conversation, tools) -> Turn:
        blocks = self._blocks(self._post(self._wire(conversation), tools))
        calls = [ToolCall(str(b.get("id", "")), str(b.get("name", "")), b.get("input", {}))
                 for b in blocks if b.get("type") == "tool_use"]
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        return Turn(text, calls)

    @staticmethod
    def _wire(conversation) -> list:
        out: list = []
        for m in conversation:
            if m["role"] == "user":
                out.append({"role": "user", "content": m["text"]})
            elif m["role"] == "assistant":
                blocks: list = [{"type": "text", "text": m["text"]}] if m["text"] else []
                blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                            "input": c.arguments if isinstance(c.arguments, dict) else {}}
                           for c in m["calls"]]
                out.append({"role": "assistant", "content": blocks})
            else:
                result = {"type": "tool_result", "tool_use_id": m["id"], "content": m["text"]}
                # Every result of one round goes back in one user message.
                if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                    out[-1]["content"].append(result)
                else:
                    out.append({"role": "user", "content": [result]})
        return out


def restore(state: dict):
    """The provider a saved ``state()`` describes (a paused agent's, in a new process)."""
    kind = state["kind"]
    if kind == "mock":
        return MockProvider(state["template"], state["confidence"])
    if kind == "scripted":
        try:
            provider = ScriptedProvider.load(state["path"])
        except ProviderConfigError as err:
            raise ProviderError(str(err)) from None
        provider.used = state["used"]
        return provider
    spec = REMOTE[kind]
    return spec.make(model_id=state["model_id"], api_key=os.environ.get(state["key_env"]) or None,
                     key_env=state["key_env"], base_url=state["base_url"],
                     temperature=state["temperature"], max_tokens=state["max_tokens"],
                     timeout=state["timeout"])


REMOTE = {
    "anthropic": RemoteSpec("claude-sonnet-5", "ANTHROPIC_API_KEY", _REMOTE_OPTIONS,
                            AnthropicProvider),
    "openai": RemoteSpec("gpt-4o", "OPENAI_API_KEY", _REMOTE_OPTIONS, OpenAIProvider),
}
