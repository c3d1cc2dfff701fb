"""MCP servers (spec 18.6): ``connect_mcp()``, the McpServer and McpTool values, and the bridge
that runs a server's client session.

``connect_mcp(name, command, args, capability?)`` starts ``command args`` as a subprocess that
speaks the Model Context Protocol over stdio, through the official ``mcp`` SDK (an optional
extra: ``pip install mcp``). The SDK is asynchronous (anyio); each server gets a ``Bridge``: a
background thread running an event loop of its own, in which one task opens the transport and
the session, lists the tools and then waits to be told to stop. Calls from the VM are handed to
that loop and waited for with a timeout, so to Sense code a server is an ordinary synchronous
value. Each wait ends at its timeout or at the end of the run's --timeout, whichever comes first
(deadline.Deadline); the latter is the run's time-limit error, naming the server.

Policy (docs/mcp.md):

* connecting needs the capability ``mcp.connect`` granted explicitly, like ``python.import``
  (lexical rule and call chain, spec 21.2; refused in a dry run without --dry-run-allow),
  checked before any process starts;
* every call of one of the server's tools needs the capability given to ``connect_mcp`` (if
  any), checked against the code that asks (``ask_with_tools``), and is audited
  ``tool 'server.tool' -> called|denied|failed`` with the caller's lineage;
* a result is outside content: labelled untrusted (origin ``("untrusted", "server.tool")``)
  for the second look.

Servers are closed by ``.close()``, at the end of ``VM.run`` and at interpreter exit. Nothing
here imports ``mcp``, ``anyio`` or even ``asyncio`` until ``connect_mcp`` runs.
"""

from __future__ import annotations

from sensevm.base.errors import SenseLimitError, SensePolicyError, SenseRuntimeError
from sensevm.guard import policy as P
from sensevm.guard import provenance as PV
from sensevm.runtime import values as V
from sensevm.world.deadline import Deadline

CONNECT_CAPABILITY = "mcp.connect"
DEFAULT_TIMEOUT = 30.0          # seconds: each tool call (timeout: option), and at least the handshake
CLOSE_TIMEOUT = 10.0
INSTALL_HINT = ("install it with 'pip install mcp' "
                "(or 'pip install \"sense-compiled[mcp]\"')")

_USAGE = ("connect_mcp() expects (name: String, command: String, args: Array<String>, "
          "capability: String = nil)")

_OPEN: set = set()              # bridges not closed yet, closed at exit
_ATEXIT = False


def _error(message: str, located: bool = False) -> SenseRuntimeError:
    return SenseRuntimeError(message, located=located)


class BridgeError(Exception):
    """A failure of the connection or of a call, worded for a person (no traceback)."""


def describe(exc: BaseException) -> str:
    """``Type: message`` of the innermost cause of ``exc`` (task groups wrap the real error)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ----------------------------------------------------------------------------- the bridge

class Bridge:
    """One server process and its client session, owned by a background thread's event loop."""

    def __init__(self, label: str, command: str, args: list, timeout: float):
        import asyncio
        import threading
        self.label = label
        self.command = command
        self.args = list(args)
        self.timeout = timeout
        self.tools: list = []           # (name, description, input schema), as listed
        self.failure: str | None = None  # why the session ended, if it ended by itself
        self.closed = False
        self.stopped = False            # the loop has finished (closed, failed or died)
        self._session = None
        self._stop = None               # an asyncio.Event, made in the loop
        self._main = None               # the loop's session task
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"sense-mcp-{label}",
                                        daemon=True)

    # -- the background thread

    def _run(self) -> None:
        import asyncio
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            self._main = loop.create_task(self._serve())
            if self.closed:                     # closed while this thread was starting
                self._main.cancel()
            loop.run_until_complete(self._main)
        except BaseException as exc:            # noqa: BLE001 - reported to the VM's thread
            if self.failure is None and not self.closed:
                self.failure = describe(exc)
        finally:
            if self.failure is None and not self.closed:
                self.failure = "the server closed the connection"
            # Calls still in flight (the server died under them) end now, cancelled.
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.stopped = True
            loop.close()
            self._ready.set()

    async def _serve(self) -> None:
        import asyncio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        self._stop = asyncio.Event()
        params = StdioServerParameters(command=self.command, args=self.args)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                self.tools = [(t.name, t.description or "", _field(t, "input_schema",
                                                                   "inputSchema") or {})
                              for t in listed.tools]
                self._session = session
                self._ready.set()
                await self._stop.wait()
        # The session ended because close() asked it to.

    # -- the VM's side

    @property
    def what(self) -> str:
        return f"MCP server '{self.label}'"

    def _out_of_time(self, err: SenseLimitError) -> SenseLimitError:
        """The run's time-limit error, which the clock's alarm raises in whatever wait the main
        thread is in (starting the thread, waiting for a reply), worded to name the server."""
        budget = V.BUDGET
        return err if budget is None else budget.out_of_time(self.what)

    def start(self) -> list:
        """Start the server and wait for the handshake and its list of tools."""
        wait = max(self.timeout, DEFAULT_TIMEOUT)      # starting may take longer than a call
        deadline = Deadline(wait, V.BUDGET)
        try:
            self._thread.start()
            ready = self._ready.wait(max(deadline.left(), 0))
        except SenseLimitError as err:
            self.close()
            raise self._out_of_time(err) from None
        if not ready:
            self.close()
            error = deadline.run_out(self.what)
            if error is not None:
                raise error
            raise BridgeError(f"TimeoutError: no answer from the server within {wait:g}s")
        if self._session is None or self.stopped:
            self.close()
            raise BridgeError(self.failure or "the server closed the connection")
        return self.tools

    def call(self, tool: str, arguments: dict) -> str:
        """Call one tool; its text content joined. A tool-level error raises too."""
        import asyncio
        import concurrent.futures as cf
        if self.closed:
            raise BridgeError(f"the connection to '{self.label}' is closed")
        if self.stopped:
            raise BridgeError(f"the server has stopped ({self.failure})")
        try:
            future = asyncio.run_coroutine_threadsafe(
                self._session.call_tool(tool, arguments), self._loop)
        except RuntimeError:                    # the loop closed just now
            raise BridgeError(f"the server has stopped ({self.failure})") from None
        deadline = Deadline(self.timeout, V.BUDGET)
        try:
            result = future.result(max(deadline.left(), 0))
        except cf.TimeoutError:
            future.cancel()
            error = deadline.run_out(self.what)
            if error is not None:
                raise error from None
            raise BridgeError(f"TimeoutError: no reply within {self.timeout:g}s") from None
        except SenseLimitError as err:
            future.cancel()
            raise self._out_of_time(err) from None
        except cf.CancelledError:
            raise BridgeError(f"the server stopped during the call ({self.failure})") from None
        except Exception as exc:                # noqa: BLE001 - the SDK's errors, as text
            if self.stopped:
                raise BridgeError(f"the server stopped during the call ({self.failure})") \
                    from None
            raise BridgeError(describe(exc)) from None
        text = "".join(getattr(block, "text", "") for block in result.content
                       if getattr(block, "type", None) == "text")
        if _field(result, "is_error", "isError"):
            raise BridgeError("RuntimeError: " + (text or f"MCP tool '{tool}' failed with no "
                                                          "error message"))
        return V.sized_string(text)

    def close(self) -> None:
        """Stop the session and the server process; idempotent."""
        if self.closed:
            return
        self.closed = True
        _OPEN.discard(self)
        if not self._thread.ident:
            self._loop.close()                  # never started
            return
        if self.stopped:
            return
        # Running, or only starting (the clock's alarm can interrupt start() in its wait for
        # the thread): told to stop either way, here or by _run itself.
        try:
            if self._stop is not None and self._session is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
            elif self._main is not None:        # still connecting: nothing to wait for
                self._loop.call_soon_threadsafe(self._main.cancel)
        except RuntimeError:                    # the loop has already closed
            pass
        from time import monotonic
        end = monotonic() + CLOSE_TIMEOUT
        while self._thread.is_alive() and end > monotonic():
            try:
                self._thread.join(end - monotonic())
            except SenseLimitError:     # the run's clock, repeating once it has run out
                pass


def _field(obj, *names):
    """The first of ``names`` that ``obj`` has (the SDK renamed camelCase fields in 2.0)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def close_all(servers=None) -> None:
    """Close ``servers`` (McpServer values), or every bridge still open."""
    if servers is None:
        for bridge in list(_OPEN):
            bridge.close()
        return
    for server in list(servers):
        server.close()


def _at_exit() -> None:
    close_all()


# ----------------------------------------------------------------------------- values

class McpServer:
    """A connection to a running MCP server: ``.name``, ``.tools``, ``.close()``."""

    __slots__ = ("name", "capability", "tools", "bridge")
    type_name = "McpServer"

    def __init__(self, name: str, capability, bridge: Bridge):
        self.name = name
        self.capability = capability
        self.bridge = bridge
        self.tools = [McpTool(self, n, d, s) for n, d, s in bridge.tools]

    def __str__(self) -> str:
        return f"<mcp server {self.name} ({len(self.tools)} tools)>"

    def sense_member(self, vm, name: str):
        if name == "name":
            return self.name
        if name == "tools":
            return self.tools
        if name == "close":
            return BoundClose(self)
        raise _error(f"mcp server '{self.name}' has no member '{name}'", located=True)

    def member_names(self):
        return ["close", "name", "tools"]

    def close(self) -> None:
        self.bridge.close()

    def save_refusal(self) -> str:
        return (f"it holds MCP server '{self.name}' (a connection to a running process cannot "
                "be saved; connect again after resuming)")


class BoundClose:
    """``server.close``: a function value that closes the connection (nil; idempotent)."""

    __slots__ = ("server",)
    type_name = "Function"
    is_function = True
    is_builtin = True
    labels = False

    def __init__(self, server: McpServer):
        self.server = server

    @property
    def name(self) -> str:
        return f"{self.server.name}.close"

    def __str__(self) -> str:
        return f"<builtin {self.name}>"

    def sense_call(self, vm, frame, args) -> bool:
        if args:
            raise _error(f"'{self.name}' expects 0 argument(s), got {len(args)}", located=True)
        if not self.server.bridge.closed:
            self.server.close()
            _record_server(vm, frame, self.server.name, "closed")
        frame.stack.append(None)
        return False

    def save_refusal(self) -> str:
        return self.server.save_refusal()


class McpTool:
    """One tool a server listed. A Tool for ``ask_with_tools`` and ``skill``; it has no Sense
    body, no members, and is not callable from code (as the reference)."""

    __slots__ = ("server", "name", "description", "schema")
    type_name = "Tool"
    host_name = "McpTool"       # the reference's class, named by its "not JSON serializable"

    def __init__(self, server: McpServer, name: str, description: str, schema: dict):
        self.server = server
        self.name = name
        self.description = description
        self.schema = schema

    @property
    def qualified(self) -> str:
        """``server.tool``: what a model sees and what the audit log names."""
        return f"{self.server.name}.{self.name}"

    def __str__(self) -> str:
        return f"<mcp tool {self.qualified}>"

    def save_refusal(self) -> str:
        return self.server.save_refusal()

    def model_spec(self) -> dict:
        """How the tool is described to a model: the server's own schema, verbatim."""
        return {"name": self.qualified,
                "description": self.description or "(no description provided)",
                "parameters": self.schema or {"type": "object", "properties": {}}}

    def call_for_model(self, vm, frame, arguments: dict):
        """A call a model asked for, made for code running in ``frame``: capability (checked
        against the caller's scope and call chain, audited when denied), the remote call,
        audit ``called`` or ``failed``. The result is a String labelled untrusted."""
        name = self.qualified
        line = frame.pos.line
        cap = self.server.capability
        if cap is not None and not P.allowed(cap, frame.scope, frame):
            _record(vm, frame, name, "denied", line, f"capability '{cap}' denied by policy")
            raise SensePolicyError(f"mcp tool '{name}' requires capability '{cap}', which is "
                                   "denied by policy")
        try:
            text = self.server.bridge.call(self.name, arguments)
        except BridgeError as err:
            # The server's own words: outside content, as its results are.
            said = PV.only(PV.untrusted(name)) if vm.look is not None else PV.EMPTY
            _record(vm, frame, name, "failed", line, str(err), said)
            raise _error(f"mcp tool '{name}' failed: {err}", located=True).quoting(said) \
                from None
        except SenseLimitError as err:      # a limit of the run: it stops the program
            _record(vm, frame, name, "failed", line, err.message)
            raise
        _record(vm, frame, name, "called", line)
        look = vm.look
        if look is None:
            return text
        look.live = True
        return PV.label(text, PV.only(PV.untrusted(name)))


def _record(vm, frame, name: str, event: str, line, detail=None, quoting=None) -> None:
    from sensevm.guard.audit import AuditRecord
    vm.audit.append_quoting(AuditRecord.make(f"tool '{name}'", name, "tool", event, detail,
                                             line, vm.lineage(frame)), quoting)


def _record_server(vm, frame, name: str, event: str, detail=None) -> None:
    """Connections are recorded host-side only (the durable trail), so ``audit_log()`` keeps
    the reference's lines."""
    from sensevm.guard.audit import AuditRecord
    vm.audit.append(AuditRecord.make(f"mcp server '{name}'", name, "mcp", event, detail,
                                     frame.pos.line if frame is not None else None,
                                     vm.lineage(frame) if frame is not None else (), True))


# ----------------------------------------------------------------------------- connect_mcp()

def _command_line(command: str, argv: list) -> str:
    """The process a connection starts, as a shell would show it (quoted where it must be)."""
    import shlex
    return shlex.join([command, *argv])


def _is_str(v) -> bool:
    return type(v) is str or type(v) is PV.LStr


def b_connect_mcp(vm, args, labels=None):
    global _ATEXIT
    labels = labels or {}
    if not 3 <= len(args) <= 4:
        raise _error(_USAGE)
    name, command, argv = args[0], args[1], args[2]
    capability = args[3] if len(args) == 4 else None
    if not _is_str(name):
        raise _error("connect_mcp()'s name argument must be a String")
    if not _is_str(command):
        raise _error("connect_mcp()'s command argument must be a String")
    if type(argv) is not list or not all(_is_str(a) for a in argv):
        raise _error("connect_mcp()'s args argument must be an Array of Strings")
    if capability is not None and not _is_str(capability):
        raise _error("connect_mcp()'s capability argument must be a String")
    unknown = sorted(set(labels) - {"timeout"})
    if unknown:
        raise _error(f"connect_mcp(): unknown option(s) {', '.join(unknown)} -- supported: "
                     "timeout")
    timeout = PV.plain(labels.get("timeout", DEFAULT_TIMEOUT))
    if type(timeout) not in (int, float) or timeout <= 0:
        raise _error("connect_mcp()'s timeout option must be a positive number of seconds")
    name, command = PV.plain(name), PV.plain(command)
    argv = [PV.plain(a) for a in argv]
    capability = PV.plain(capability) if capability is not None else None

    # Starting a host process hands the program the host, as python.import does: it needs an
    # explicit allow, and in a dry run the command line's leave too (policy.host_refusal).
    frame = vm.frame
    why = P.host_refusal(CONNECT_CAPABILITY, frame.scope if frame is not None else None, frame,
                         vm.dry_run, vm.dry_run_allow)
    if why is not None:
        how = {P.DENY: f"capability '{CONNECT_CAPABILITY}' denied by policy",
               P.DRY_RUN: f"a dry run without --dry-run-allow {CONNECT_CAPABILITY}"}.get(
                   why, f"capability '{CONNECT_CAPABILITY}' not allowed by any policy")
        _record_server(vm, frame, name, "denied",
                       f"{how}; command: {_command_line(command, argv)}")
        if why == P.DENY and frame is not None:     # the deciding rule, where, the chain
            raise P.denial(f"connect_mcp() to '{name}'", CONNECT_CAPABILITY, frame.scope, frame)
        raise SensePolicyError(f"connect_mcp() to '{name}' "
                               f"{P.refusal_text(CONNECT_CAPABILITY, why)}")
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise _error("connect_mcp() needs the 'mcp' Python package, which is not installed -- "
                     + INSTALL_HINT) from None

    bridge = Bridge(name, command, argv, float(timeout))
    try:
        bridge.start()
    except BridgeError as err:
        _record_server(vm, frame, name, "failed", str(err))
        raise _error(f"connect_mcp() failed to connect to '{name}': {err}") from None
    except SenseLimitError as err:              # the run's time is up (start closed it)
        _record_server(vm, frame, name, "failed", err.message)
        raise
    except Exception as err:                    # noqa: BLE001 - e.g. no threads left
        bridge.close()
        _record_server(vm, frame, name, "failed", describe(err))
        raise _error(f"connect_mcp() failed to connect to '{name}': {describe(err)}") from None
    _OPEN.add(bridge)
    if not _ATEXIT:
        import atexit
        atexit.register(_at_exit)
        _ATEXIT = True
    server = McpServer(name, capability, bridge)
    servers = getattr(vm, "mcp_servers", None)      # closed when the run ends
    if servers is not None:
        servers.append(server)
    _record_server(vm, frame, name, "connected",
                   f"{_command_line(command, argv)} ({len(server.tools)} tools)")
    return server
