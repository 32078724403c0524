"""Three agents share a claimgraph through MCP, hit a quarantine, and one escalates.

Built on the OpenAI Agents SDK's tool calling: each agent is an ``agents.Agent`` whose tools
are claimgraph's MCP tools (``MCPServerStreamableHttp`` against ``/mcp`` of a served graph,
each agent with its own bearer token — identity comes from the connection, never from a tool
argument). A scripted model stands in for the LLM, so this runs without an API key: it plays
each agent's turns, choosing tool calls from what the previous tools returned, and checks its
arguments against the tool definitions ``claimgraph tools --format openai`` prints (the same
schemas a real model is given).

    python examples/agents_quarantine.py   # prints every tool call, its result, the transcript

1. ``inventory-agent`` asserts that service:checkout owns database:orders.
2. ``dba-agent`` finds grants saying service:billing owns it: the governor quarantines the
   database's one owner slot (conflict policy ``quarantine``).
3. ``sre-agent`` (a resolver) must know who owns the database before a migration; it reads
   ``unknown`` with the conflict id, looks at the conflicting claims, and escalates to a
   person with its reason. Every agent's run replays identically afterwards.

To use a real model, drop ``model=ScriptedModel(...)`` (and set OPENAI_API_KEY).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from agents import Agent, RunHooks, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.mcp import MCPServerStreamableHttp
from agents.models.interface import Model
from agents.usage import Usage
from jsonschema import Draft202012Validator
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.http.auth import Principal, TokenFile, token_digest
from claimgraph.mcp.toolspec import tool_definitions
from claimgraph.mcp.transports import mount

SCHEMA = """
principals: {admins: [platform-admin], resolvers: [sre-agent]}
node_types: [service, database]
edge_types:
  - name: owns                 # a database has one owning service
    subject: service
    object: database
    writers: [{agent: inventory-agent, task: "*"}, {agent: dba-agent, task: "audit-*"}]
    cardinality: one-to-many
    conflict_policy: quarantine
    on_stale: quarantine
"""

AGENTS = {
    "inventory-agent": Principal("inventory-agent", ("reconcile",)),
    "dba-agent": Principal("dba-agent", ("audit-grants",)),
    "sre-agent": Principal("sre-agent", ("migrate",), frozenset({"resolver"})),
}

# -- a scripted model: plays an agent's turns from what its tools returned ------------------

Step = Callable[[list[dict[str, Any]]], tuple[str, Any]]  # tool outputs so far → next move
OPENAI_TOOLS = {t["function"]["name"]: t["function"] for t in tool_definitions("openai")}


def _outputs(items: str | list[Any]) -> list[dict[str, Any]]:
    """The tool results in the conversation so far, as dicts."""
    out: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        d = item if isinstance(item, dict) else item.model_dump()
        if d.get("type") != "function_call_output":
            continue
        raw = d["output"]
        if isinstance(raw, list):  # a list of output items: their text
            raw = "".join(x.get("text", "") for x in raw)
        value = json.loads(raw) if isinstance(raw, str) else raw
        if isinstance(value, dict) and set(value) == {"result"}:
            value = value["result"]
        if isinstance(value, dict) and value.get("type") == "text":
            value = json.loads(value["text"])
        out.append(value)
    return out


class ScriptedModel(Model):
    """A model that follows a script; its tool calls must fit the tools' JSON schemas."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.turn = 0

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kw: Any,
    ) -> ModelResponse:
        kind, value = self.steps[self.turn](_outputs(input))
        self.turn += 1
        offered = {t.name for t in tools}
        if kind == "call":
            name, args = value
            assert name in offered, f"{name} is not among the agent's tools"
            Draft202012Validator(OPENAI_TOOLS[name]["parameters"]).validate(args)
            item: Any = ResponseFunctionToolCall(
                id=f"fc_{uuid.uuid4().hex}",
                call_id=f"call_{uuid.uuid4().hex}",
                name=name,
                arguments=json.dumps(args),
                type="function_call",
                status="completed",
            )
        else:
            item = ResponseOutputMessage(
                id=f"msg_{uuid.uuid4().hex}",
                role="assistant",
                status="completed",
                type="message",
                content=[ResponseOutputText(text=value, type="output_text", annotations=[])],
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def call(name: str, **args: Any) -> Step:
    return lambda outs: ("call", (name, args))


def say(text: str | Callable[[list[dict[str, Any]]], str]) -> Step:
    return lambda outs: ("final", text(outs) if callable(text) else text)


def _conflict(outs: list[dict[str, Any]]) -> str:
    return str(next(o["conflict_id"] for o in reversed(outs) if o.get("conflict_id")))


SCRIPTS: dict[str, tuple[str, list[Step]]] = {
    "inventory-agent": (
        "Record which service owns database:orders.",
        [
            call(
                "assert_edge",
                edge_type="owns",
                subject="service:checkout",
                object="database:orders",
                confidence=0.9,
                evidence=["cmdb:orders"],
                reasoning="The CMDB lists checkout as the owner.",
            ),
            say(lambda o: f"Recorded: {o[-1]['decision']} at version {o[-1]['version']}."),
        ],
    ),
    "dba-agent": (
        "Audit database grants and record owners.",
        [
            call(
                "assert_edge",
                edge_type="owns",
                subject="service:billing",
                object="database:orders",
                confidence=0.8,
                evidence=["pg_grants:orders"],
                reasoning="Only billing holds write grants on orders.",
            ),
            say(lambda o: f"My claim was {o[-1]['decision']}: {o[-1]['explain']}"),
        ],
    ),
    "sre-agent": (
        "Before migrating database:orders, find its owner.",
        [
            call("read_slot", edge_type="owns", node="database:orders", direction="in"),
            lambda outs: (
                ("call", ("conflicts_near", {"node": "database:orders"}))
                if outs[-1]["state"] == "unknown"
                else ("final", f"Owner: {outs[-1]['holds']}")
            ),
            lambda outs: (
                "call",
                (
                    "escalate_conflict",
                    {
                        "conflict_id": _conflict(outs),
                        "reason": "Migration of database:orders is blocked: "
                        + " vs ".join(
                            f"{c['agent']} says {c['edge']}"
                            for c in outs[-1]["conflicts"][0]["claims"]
                        ),
                    },
                ),
            ),
            say(lambda o: f"Escalated {_conflict(o)}: {o[-1]['decision']}; waiting for a person."),
        ],
    ),
}

# -- a served graph (the API with MCP at /mcp), in this process -------------------------------


@contextmanager
def serve(data: Path, tokens: dict[str, str]) -> Iterator[tuple[str, Any]]:
    g = claimgraph.open(data, create=True, graph="example")
    if g.schema_info() is None:
        g.publish_schema(SCHEMA, agent="platform-admin", source="examples/agents_quarantine")
    token_file = TokenFile({token_digest(t): AGENTS[a] for a, t in tokens.items()})
    app = create_app(g, token_file)
    mount(app)  # MCP at /mcp, through the app's service layer (the same tokens and limits)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    up = threading.Event()

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            up.set()

    server = Server(uvicorn.Config(app, log_level="warning"))
    t = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    t.start()
    if not up.wait(30):
        raise RuntimeError("the server did not start")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", g
    finally:
        server.should_exit = True
        t.join(30)
        g.close()


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PrintCalls(RunHooks[Any]):
    """Print every tool call an agent makes and the result it gets back."""

    def __init__(self, agent: str, out: Callable[[str], None]) -> None:
        self.agent, self.out = agent, out

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        args = getattr(context, "tool_arguments", "")
        self.out(f"[{self.agent}] -> {tool.name}({_short(args)})")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        self.out(f"[{self.agent}] <- {tool.name}: {_short(str(result))}")


async def run_agent(url: str, agent: str, token: str, say_: Callable[[str], None]) -> str:
    task, steps = SCRIPTS[agent]
    params = {"url": f"{url}/mcp", "headers": {"Authorization": f"Bearer {token}"}}
    async with MCPServerStreamableHttp(
        params,
        name="claimgraph",
        use_structured_content=True,
        cache_tools_list=True,  # type: ignore[arg-type]
    ) as mcp:
        a = Agent(
            name=agent,
            instructions="You keep the shared graph right. Never guess an unknown edge.",
            mcp_servers=[mcp],
            model=ScriptedModel(steps),
        )
        # each agent works in a run it starts (the dba in its audit task); the session
        # remembers it, so the tool calls below need not name it
        await mcp.call_tool("start_run", {"task": "audit-grants"} if agent == "dba-agent" else {})
        result = await Runner.run(a, task, hooks=PrintCalls(agent, say_))
        info = await mcp.call_tool("end_run", {})
        say_(f"[{agent}] {result.final_output}")
        return str(json.loads(info.content[0].text)["ended"])  # type: ignore[union-attr]


def main(data: Path, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the three agents against a graph in ``data``; return what happened."""
    set_tracing_disabled(True)
    tokens = {a: f"example-{a}-{uuid.uuid4().hex}" for a in AGENTS}
    with serve(data, tokens) as (url, g):
        out(f"graph {g.name!r} served at {url} (MCP at /mcp); {len(OPENAI_TOOLS)} tools per agent")
        runs = [asyncio.run(run_agent(url, a, tokens[a], out)) for a in SCRIPTS]
        escalations = g.escalations()
        replays = {r: g.replay_run(r).identical for r in runs}
    out(f"escalated conflicts: {[e['conflict_id'] for e in escalations]}")
    out(f"runs replay identically: {all(replays.values())}")
    return {"runs": runs, "escalations": escalations, "replays": replays}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        res = main(Path(d) / "graph")
    sys.exit(0 if res["escalations"] and all(res["replays"].values()) else 1)
