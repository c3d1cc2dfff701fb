"""What the VM needs from the world layer above it, installed by that layer (world.install).

Its builtins, Python imports, saving and awaiting agents, closing MCP servers.

The runtime never imports the world: the world registers what it provides here, the way a
C interpreter's table of built-in modules is filled in by whoever links it. A VM made before
(or without) ``install`` runs pure programs: the world's builtins are not in its scope, and
the services below refuse with a clear error instead of reaching outside.
"""

from __future__ import annotations

from sensevm.base.errors import SenseImportError, SenseRuntimeError

# The Builtin rows the world adds to every VM's outermost scope (agents, models, memory, MCP).
PROVIDED: list = []
# The standard library's natives, name -> (kind, capability, function(vm, args)), installed by
# the world (sensevm/world/stdlib_native.py; the contract: sensevm/bytecode/natives.py).
# Filled at the first NATIVE a run executes (a program that uses no std module never loads them).
NATIVES: dict = {}
_load_natives = None


def native(name: str):
    """The registry's row (kind, capability, function) for ``name``, or None."""
    if not NATIVES and _load_natives is not None:
        NATIVES.update(_load_natives())
    return NATIVES.get(name)
installed = False


def import_python(vm, frame, name: str):
    """IMPORT_PYTHON's handler: the capability check and the import (world.interop)."""
    raise SenseImportError(f"cannot import python module {name!r}: this VM runs without the "
                           "world layer (sensevm.world.install)")


def save_agent(vm, agent, directory: str) -> str:
    """Write a paused or ended agent's state into ``directory`` (world.persist)."""
    raise SenseRuntimeError("cannot save agents: this VM runs without the world layer",
                            located=False)


def await_agent(vm, agent):
    """``await`` on an agent (world.agents)."""
    raise SenseRuntimeError("cannot await agents: this VM runs without the world layer",
                            located=False)


def close_servers(servers) -> None:
    """Close the MCP servers a run connected (world.mcp); without the world there are none."""


def install(*, builtins, import_python, save_agent, await_agent, close_servers,
            natives=None) -> None:
    # natives: a function returning the registry of natives (called at the first NATIVE).
    """Called once by the world layer; a second call replaces the first."""
    global installed
    PROVIDED[:] = builtins
    global _load_natives
    NATIVES.clear()
    _load_natives = natives
    names = globals()
    names.update(import_python=import_python, save_agent=save_agent, await_agent=await_agent,
                 close_servers=close_servers)
    installed = True
