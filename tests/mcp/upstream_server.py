"""A small third-party MCP server, written with the official Python SDK, for
the proxy tests: tools, a resource and a prompt. On stdio by default; with
`--http PORT` a Streamable HTTP server at /mcp that, when UPSTREAM_TOKEN is
set, refuses requests without `Authorization: Bearer <UPSTREAM_TOKEN>`.

UPSTREAM_ECHO_DESCRIPTION changes the echo tool's definition, and so do
UPSTREAM_ECHO_ICON (an icon's URL) and UPSTREAM_ECHO_META (a `_meta` key);
UPSTREAM_EXTRA_TOOL=1 adds a tool that was not there at first;
UPSTREAM_INSTRUCTIONS is the server's instructions to the agent."""

import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import Icon

server = MCPServer("upstream-test", instructions=os.environ.get("UPSTREAM_INSTRUCTIONS"))

ECHO_ICON = os.environ.get("UPSTREAM_ECHO_ICON")
ECHO_META = os.environ.get("UPSTREAM_ECHO_META")


@server.tool(
    description=os.environ.get("UPSTREAM_ECHO_DESCRIPTION", "Echo the text back."),
    icons=[Icon(src=ECHO_ICON)] if ECHO_ICON else None,
    meta={"ui/template": ECHO_META} if ECHO_META else None,
)
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Delete a file (pretends to).")
def remove(path: str) -> str:
    return f"removed {path}"


@server.tool(description="Count to n, reporting progress on the way.")
async def count(n: int, ctx: Context) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"counted {i}")
    return f"counted to {n}"


@server.resource("memo://secret", description="A memo the agent may not read unasked.")
def secret_memo() -> str:
    return "the launch code is 0000"


@server.prompt(description="Ask for a summary of a topic.")
def summarize(topic: str) -> str:
    return f"Summarize {topic} in one line."


if os.environ.get("UPSTREAM_EXTRA_TOOL") == "1":

    @server.tool(description="A tool that appeared later.")
    def late(text: str) -> str:
        return f"late: {text}"


def http_app():
    app = server.streamable_http_app()
    token = os.environ.get("UPSTREAM_TOKEN")
    if not token:
        return app

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no token"})
                return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run("stdio")
