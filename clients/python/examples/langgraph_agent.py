"""A LangChain/LangGraph agent whose tool calls a human reviews through actiongate.

    pip install 'actiongate[langgraph]' langchain-openai
    export ACTIONGATE_URL=http://127.0.0.1:8080 ACTIONGATE_KEY=<agent key>
    export OPENAI_API_KEY=... [OPENAI_BASE_URL=...] [MODEL=gpt-4.1-mini]
    python langgraph_agent.py "delete /tmp/old-report.txt"

`HumanInTheLoopMiddleware` pauses the agent before `delete_file` runs. The
gate turns the interrupt's tool calls into actiongate actions, waits for the
operators, and resumes with `Command(resume={"decisions": [...]})`: approve,
or reject with the operator's reason as the message the model gets.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from actiongate import Client
from actiongate.langgraph import HitlGate


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    Path(path).unlink()
    return f"deleted {path}"


def main(task: str) -> str:
    agent = create_agent(
        ChatOpenAI(model=os.environ.get("MODEL", "gpt-4.1-mini")),
        tools=[delete_file],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"delete_file": {"allowed_decisions": ["approve", "reject"]}})
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    with Client() as client:
        gate = HitlGate(client, wait=float(os.environ.get("GATE_WAIT", "300")))
        gate.tool("delete_file", tool="file", detail=lambda a: f"delete {a['path']}")
        result = agent.invoke({"messages": [{"role": "user", "content": task}]}, config)
        while result.get("__interrupt__"):
            result = agent.invoke(gate.resume(result), config)
    return str(result["messages"][-1].content)


if __name__ == "__main__":
    print(main(" ".join(sys.argv[1:]) or "delete old-report.txt"))
