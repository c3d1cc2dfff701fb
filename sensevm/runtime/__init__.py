"""sensevm.runtime: the virtual machine that runs verified bytecode.

Values, core builtins, frames, the dispatch loop (tier 1), compiled frames (tier 2), sessions
in a run, limits and workers.

Imports guard, bytecode and base. What it needs from the world above it (agents, models,
memory, MCP, Python, saved state) the world installs into runtime.services."""
