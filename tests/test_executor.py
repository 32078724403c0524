"""The executor runs a model's tool calls (OpenAI chat and responses, Anthropic) through the
MCP tools over an SDK graph, and answers in each vendor's result shape: what it writes and
reads is what the SDK writes and reads; a bad call is a result the model reads, never an
exception in the host's loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

import claimgraph
from claimgraph.mcp.executor import Executor
from claimgraph.service.graph import Graph
from tests.http_fixtures import TOKENS
from tests.mcp_fixtures import served


def _chat(name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _responses(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": "r1", "name": name, "arguments": json.dumps(args)}


def _anthropic(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "a1", "name": name, "input": args}


EDGE = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}


def test_each_vendor_call_writes_and_reads_as_the_sdk_does(graph: Graph) -> None:
    with Executor(graph, agent="inventory") as ex:
        wrote = ex.call(_anthropic("assert_edge", **EDGE, confidence=0.8, evidence=["e1"]))
        assert wrote["type"] == "tool_result" and wrote["tool_use_id"] == "a1"
        assert wrote["is_error"] is False, wrote
        receipt = json.loads(wrote["content"])
        assert receipt["decision"] == "accepted"
        read = ex.call(_chat("read_edge", **EDGE))
        assert (read["role"], read["tool_call_id"]) == ("tool", "c1")
        answer = json.loads(read["content"])
        assert answer["state"] == "present" and answer["version"] == receipt["version"]
        done = ex.call(_responses("retract_claim", claim_id=receipt["claim_id"], reason="gone"))
        assert done["type"] == "function_call_output" and done["call_id"] == "r1"
        assert json.loads(done["output"])["decision"] == "retired"
    # what the SDK sees: the claim the tool wrote, as the tool described it, then retired
    info = graph.claim_info(receipt["claim_id"], at=receipt["version"])
    assert info is not None and (info["agent"], info["confidence"]) == ("inventory", 0.8)
    assert info["evidence"] == ["e1"]
    assert graph.edge("depends_on", "service:a", "service:b").state == "absent"


def test_a_bad_call_is_a_result_with_its_reason_not_an_exception(graph: Graph) -> None:
    with Executor(graph, agent="inventory") as ex:
        bad = ex.call(_anthropic("assert_edge", **EDGE, confidence="0.5"))
        assert bad["is_error"] is True and "confidence" in bad["content"], bad
        unknown = ex.call(_chat("drop_tables"))
        assert "Unknown tool" in json.loads(unknown["content"])["error"]
        broken = {
            "id": "c2",
            "type": "function",
            "function": {"name": "read_edge", "arguments": "{"},
        }
        err = json.loads(ex.call(broken)["content"])["error"]
        assert err.startswith("invalid_field: "), err
        deep = _chat("read_edge")
        deep["function"]["arguments"] = "[" * 10_000 + "]" * 10_000
        assert "nested more than" in json.loads(ex.call(deep)["content"])["error"]
    assert not [d for _, d in graph.decisions(0, 100) if d["command_type"] == "claim"]


def test_over_a_served_graph_the_tokens_principal_calls_and_is_refused(tmp_path: Path) -> None:
    """Over claimgraph.connect the principal is the token's: a writer's resolve is refused
    by the server and recorded; the async form answers as the sync one."""
    with served(tmp_path / "g") as (url, g, _sessions):
        client = claimgraph.connect(url, token=TOKENS["inventory"])
        try:
            with Executor(client) as ex:
                assert ex.principal.agent == "inventory"
                refused = ex.call(_chat("resolve_conflict", conflict_id="cf-x", winner=None))
                out = json.loads(refused["content"])
                assert (out["decision"], out["reason"]) == ("refused", "not_resolver"), out

                async def both() -> dict[str, Any]:
                    return await ex.acall(_responses("read_edge", **EDGE))

                read = json.loads(anyio.run(both)["output"])
                assert read["state"] == "absent", read
        finally:
            client.close()
        refusals = [d for _, d in g.decisions(0, 100) if d["reason"] == "not_resolver"]
        assert refusals and refusals[-1]["agent"] == "inventory"


def test_the_executor_block_runs(tmp_path: Path) -> None:
    """docs/how-to/agents.md's executor example runs as written against a served graph: a
    model's two calls (OpenAI's and Anthropic's) become two result messages."""
    from tests.docs_text import block

    code = block("python", "from claimgraph.mcp.executor import Executor")
    calls = [_chat("read_edge", **EDGE), _anthropic("assert_edge", **EDGE)]
    with served(tmp_path / "g") as (url, g, _sessions):
        scope: dict[str, Any] = {
            "claimgraph": claimgraph, "URL": url, "TOKEN": TOKENS["inventory"],
            "response_tool_calls": calls, "messages": [],
        }  # fmt: skip
        exec(code, scope)
        first, second = scope["messages"]
        assert json.loads(first["content"])["state"] == "absent"
        assert second["is_error"] is False and '"accepted"' in second["content"], second
        assert g.edge("depends_on", "service:a", "service:b").state == "present"
