"""A pydantic-ai agent whose `delete_file` tool needs approval, decided
through actiongate (`pip install actiongate[pydantic-ai]`).

    ACTIONGATE_URL=http://127.0.0.1:8080 ACTIONGATE_KEY=agk_... python pydantic_ai_agent.py build/

The model here is pydantic-ai's own FunctionModel, scripted to call the
tool once and then say what the tool answered, so the example runs with no
model API; swap in any real model. Approve or deny the request
(`actiongate pending`, the page, a chat) while it waits.
"""

import asyncio
import os
import sys

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actiongate import AsyncClient
from actiongate.pydantic_ai import PydanticAIGate

PATH = sys.argv[1] if len(sys.argv) > 1 else "build/"


def scripted(messages, info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"tool said: {returns[-1].model_response_str()}")])
    return ModelResponse(parts=[ToolCallPart("delete_file", {"path": PATH}, tool_call_id="call-1")])


agent = Agent(FunctionModel(scripted), output_type=[str, DeferredToolRequests])


@agent.tool_plain(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file or folder."""
    return f"deleted {path}"


async def main() -> None:
    async with AsyncClient() as client:
        gate = PydanticAIGate(client, wait=float(os.environ.get("GATE_WAIT", "300")))
        result = await gate.run(agent, f"delete {PATH}")
        print(result.output)


asyncio.run(main())
