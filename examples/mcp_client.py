"""The official MCP Python client as the host: `claimgraph mcp` over stdio, as a desktop host
or an IDE runs it, with every tool call and its result printed.

The host starts ``claimgraph --data DIR mcp --agent tracer`` as a subprocess and speaks MCP to
it over stdin/stdout (``mcp.client.stdio``). No model is involved: the host itself plays the
agent's turns, so each step shows what a model would send and get back.

    python examples/mcp_client.py     # prints the tool list and every call with its result

1. ``tools/list``: the tracer's tools — no resolver tool, as the schema names no resolver
   — with ``edge_type`` an enum of the schema's edge types.
2. ``start_run`` pins a version; ``read_edge`` in it says ``absent``.
3. ``assert_edge`` in the run (its claim based on the pinned version); a read of another
   edge still answers at the pinned version; ``deny_edge`` of an edge type the schema does
   not have is a recorded rejection with its reason — results the model reads, not crashes.
4. ``end_run``: the run's trace replays identically.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import claimgraph

SCHEMA = """
principals: {admins: [platform-admin]}
node_types: [service]
edge_types:
  - name: depends_on
    subject: service
    object: service
    writers: [{agent: tracer, task: "*"}]
    cardinality: many-to-many
    conflict_policy: quarantine
"""

EDGE = {"edge_type": "depends_on", "subject": "service:checkout", "object": "service:billing"}


def _short(value: Any, limit: int = 150) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def session(data: Path, out: Callable[[str], None]) -> dict[str, Any]:
    """Drive one MCP session over stdio; what each call returned, by tool."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}  # this checkout's claimgraph
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "claimgraph", "--data", str(data), "mcp", "--agent", "tracer"],
        env=env,
    )
    results: dict[str, Any] = {}
    async with stdio_client(server) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        listed = await s.list_tools()
        names = [t.name for t in listed.tools]
        out(f"tools/list: {len(names)} tools: {', '.join(names)}")
        edge_type = next(t for t in listed.tools if t.name == "read_edge").inputSchema
        results["edge_types"] = edge_type["properties"]["edge_type"].get("enum")

        async def call(name: str, **args: Any) -> dict[str, Any]:
            out(f"-> {name}({_short(args)})")
            r = await s.call_tool(name, args)
            answer = r.structuredContent
            if answer is None:  # an error: its text, reason code first
                text = "".join(getattr(c, "text", "") for c in r.content)
                answer = {"error": text}
            out(f"<- {name}: {_short(answer)}")
            results.setdefault(name, []).append(answer)
            return answer

        run = await call("start_run", task="trace")
        await call("read_edge", **EDGE, run_id=run["run_id"])
        await call(
            "assert_edge",
            **EDGE,
            evidence=["trace:4f1c"],
            reasoning="checkout called billing in trace 4f1c",
            run_id=run["run_id"],
        )
        await call("read_edge", **{**EDGE, "object": "service:nowhere"}, run_id=run["run_id"])
        # an edge type the listing's enum does not offer: the governor decides, and records why
        await call("deny_edge", **{**EDGE, "edge_type": "calls"}, run_id=run["run_id"])
        await call("end_run", run_id=run["run_id"])
    return results


def main(data: Path, out: Callable[[str], None] = print) -> dict[str, Any]:
    """A graph with a schema, one MCP session against it; what it returned and the replay."""
    with claimgraph.open(data, create=True) as g:
        g.publish_schema(SCHEMA, agent="platform-admin", source="examples/mcp_client")
    results = asyncio.run(session(data, out))
    run_id = results["start_run"][0]["run_id"]
    with claimgraph.open(data) as g:
        results["replay"] = g.replay_run(run_id).identical
        results["claim"] = g.claim_info(results["assert_edge"][0]["claim_id"])
    out(f"run {run_id} replays identically: {results['replay']}")
    return results


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        res = main(Path(d) / "graph")
    sys.exit(0 if res["replay"] else 1)
