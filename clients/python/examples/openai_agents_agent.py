"""An OpenAI Agents SDK agent whose dangerous tool waits for a human.

    pip install 'actiongate[openai-agents]'
    export ACTIONGATE_URL=http://127.0.0.1:8080 ACTIONGATE_KEY=<agent key>
    export OPENAI_API_KEY=... [OPENAI_BASE_URL=...] [MODEL=gpt-4.1-mini]
    python openai_agents_agent.py "delete /tmp/old-report.txt"

`delete_file` is gated: its `needs_approval` asks actiongate, which allows,
denies, or asks a human. When it asks, the run is interrupted; the gate
waits for the operator's decision and approves or rejects the call in the
run state, and the run resumes. A rejection reaches the model as the tool's
result, with the operator's reason.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from actiongate import AsyncClient
from actiongate.openai_agents import AgentsGate


async def main(task: str) -> str:
    set_tracing_disabled(True)  # no trace upload: everything stays local
    async with AsyncClient() as client:
        gate = AgentsGate(client, wait=float(os.environ.get("GATE_WAIT", "300")))

        @function_tool(
            needs_approval=gate.needs_approval("delete_file", tool="file", detail=lambda a: f"delete {a['path']}")
        )
        def delete_file(path: str) -> str:
            """Delete a file."""
            Path(path).unlink()
            return f"deleted {path}"

        model = OpenAIChatCompletionsModel(
            model=os.environ.get("MODEL", "gpt-4.1-mini"),
            openai_client=AsyncOpenAI(),
        )
        agent = Agent(name="janitor", instructions="You tidy up files.", tools=[delete_file], model=model)
        result = await gate.run(agent, task)
        return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(main(" ".join(sys.argv[1:]) or "delete old-report.txt")))
