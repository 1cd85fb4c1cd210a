"""A small third-party stdio MCP server, written with the official Python
SDK, for the proxy tests. UPSTREAM_ECHO_DESCRIPTION changes the echo tool's
definition; UPSTREAM_EXTRA_TOOL=1 adds a tool that was not there at first."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("upstream-test")


@server.tool(description=os.environ.get("UPSTREAM_ECHO_DESCRIPTION", "Echo the text back."))
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Delete a file (pretends to).")
def remove(path: str) -> str:
    return f"removed {path}"


if os.environ.get("UPSTREAM_EXTRA_TOOL") == "1":

    @server.tool(description="A tool that appeared later.")
    def late(text: str) -> str:
        return f"late: {text}"


if __name__ == "__main__":
    server.run("stdio")
