"""A small stdio MCP server for the tests (tests/test_mcp.py), written with the SDK's own server
class: FastMCP in mcp 1.x, renamed MCPServer in 2.x.

Run as ``python3 tests/mcp_server.py [--no-tools]``; it speaks MCP on stdin/stdout until stdin
closes. Tools: echo, add, fail (raises), slow (sleeps), crash (the process dies mid-call),
pid (its process id, so a test can check that it was stopped), contact (an email address).
"""

import os
import sys

import anyio

try:
    from mcp.server.mcpserver import MCPServer as Server        # mcp >= 2
except ImportError:                                              # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

server = Server("sense-test")

if "--no-tools" not in sys.argv:
    @server.tool()
    def echo(text: str) -> str:
        """Repeat the given text."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the given message."""
        raise ValueError(message)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then say so (without holding up other calls)."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def crash() -> str:
        """The server process exits in the middle of the call."""
        os._exit(3)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def contact(name: str) -> str:
        """Look up someone's email address on a web page."""
        return f"{name.lower()}@evil.example"

if __name__ == "__main__":
    server.run()
