"""sensevm.world: what reaches outside the VM, and the table that installs it into the runtime.

Agents and their saved state, models and providers, memory, MCP servers, Python interop, HTTP
with deadlines.

Imports runtime and everything below it. ``install()`` gives a VM these builtins and services
(runtime.services); the commands call it before they run a program, and a VM made without it
runs pure programs only."""

from __future__ import annotations

from sensevm.runtime import services
from sensevm.runtime.values import Builtin


def _agents():
    from sensevm.world import agents
    return agents


def _models():
    from sensevm.world import models
    return models


def _memory():
    from sensevm.world import memory
    return memory


def _mcp():
    from sensevm.world import mcp
    return mcp


def _later(load, function: str):
    """``function`` of the module ``load()`` imports, at the first call: agents, models, memory
    and MCP each bring a module that most programs never use, and importing them all made
    every start-up a fifth slower."""
    def call(*args):
        return getattr(load(), function)(*args)
    call.__name__ = call.__qualname__ = function
    call.deferred = (load.__name__.lstrip("_"), function)
    return call


# The builtins the world implements. A frames builtin is called as fn(vm, frame, args) (see
# Builtin); the declarations with an '@' are what the compiler emits for a declaration.
BUILTINS = [
    Builtin("start", _later(_agents, "b_start"), 1, frames=True),
    Builtin("resume", _later(_agents, "b_resume"), None, frames=True),
    Builtin("pause", _later(_agents, "b_pause"), None, frames=True),
    Builtin("ask_human", _later(_agents, "b_ask_human"), 1, frames=True),
    Builtin("send", _later(_agents, "b_send"), 2, frames=True),
    Builtin("receive", _later(_agents, "b_receive"), None, frames=True),
    Builtin("inference", _later(_models, "b_inference"), None, labels=True),
    Builtin("ask", _later(_models, "b_ask"), 1, frames=True),
    Builtin("ask_with_tools", _later(_models, "b_ask_with_tools"), 2, frames=True),
    Builtin("skill", _later(_models, "b_skill"), 3),
    Builtin("@model", _later(_models, "b_model_decl"), 2),
    Builtin("@set", _later(_models, "b_set"), 2),
    Builtin("ask_with_memory", _later(_memory, "b_ask_with_memory"), 2, frames=True),
    Builtin("@memory", _later(_memory, "b_memory_decl"), 3, frames=True),
    Builtin("connect_mcp", _later(_mcp, "b_connect_mcp"), None, labels=True),
]


def _import_python(vm, frame, name):
    from sensevm.world.interop import import_module
    return import_module(vm, frame, name)


def _save_agent(vm, agent, directory):
    from sensevm.world.persist import save_agent
    return save_agent(vm, agent, directory)


def _await_agent(vm, agent):
    return _agents().await_agent(vm, agent)


def _close_servers(servers):
    _mcp().close_all(servers)


def _natives():
    from sensevm.world.stdlib_native import REGISTRY
    return REGISTRY


def install() -> None:
    """Give every VM made from now on the world's builtins and services (idempotent)."""
    if not services.installed:
        services.install(builtins=BUILTINS, import_python=_import_python,
                         save_agent=_save_agent, await_agent=_await_agent,
                         close_servers=_close_servers, natives=_natives)
