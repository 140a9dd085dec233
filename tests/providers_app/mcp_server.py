"""A tiny MCP server over stdio for the discovery tests: one tool and one prompt, made with the MCP SDK."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("tess-test-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.prompt()
def triage(incident: str) -> str:
    """Draft a triage note for an incident."""
    return f"Triage the incident {incident}: who is affected, since when, what changed."


if __name__ == "__main__":
    server.run("stdio")
