"""The executor under the port contract (issue #32): over every synchronous implementation of
the graph port — embedded, HTTP, Kafka, attached — a model's tool calls run through the
executor write what the SDK's calls write and read what the SDK reads at the same version."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claimgraph.mcp.executor import Executor
from claimgraph.service.principals import Principal
from tests.conftest import SCHEMA
from tests.test_graph_port import AsAgent, port  # noqa: F401  (the contract's fixture)

EDGE = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}
SDK_EDGE = ("depends_on", "service:a", "service:b")


def _executor(as_agent: AsAgent, agent: str, roles: frozenset[str] = frozenset()) -> Executor:
    g = as_agent(agent)
    if hasattr(g, "whoami"):  # served: the token's principal
        return Executor(g)
    return Executor(g, Principal(agent, ("*",), roles, "test"))


def _call(ex: Executor, name: str, **args: Any) -> dict[str, Any]:
    msg = ex.call({"type": "tool_use", "id": "t", "name": name, "input": args})
    assert msg["is_error"] is False, (name, msg["content"])
    out: dict[str, Any] = json.loads(msg["content"])
    return out


@pytest.mark.parametrize("port", ["embedded", "http", "kafka", "attached"], indirect=True)
def test_the_executor_writes_and_reads_as_the_sdk_does(port: AsAgent) -> None:  # noqa: F811
    admin = port("admin")
    admin.wait(admin.publish_schema(SCHEMA, agent="admin"), timeout=30)
    sdk = port("inventory")
    inv, tracer = _executor(port, "inventory"), _executor(port, "tracer")
    reviewer = _executor(port, "reviewer", frozenset({"resolver"}))
    try:
        wrote = _call(inv, "assert_edge", **EDGE, confidence=0.8, evidence=["e1"])
        assert wrote["decision"] == "accepted"
        sdk.wait_for(wrote["version"], timeout=30)
        info = sdk.claim_info(wrote["claim_id"], at=wrote["version"])
        assert info is not None
        assert (info["agent"], info["confidence"], info["evidence"]) == ("inventory", 0.8, ["e1"])

        denied = _call(tracer, "deny_edge", **EDGE, reasoning="traced")
        assert denied["decision"] == "quarantined" and denied["conflict_id"]
        sdk.wait_for(denied["version"], timeout=30)
        for v in (wrote["version"], denied["version"]):
            got = _call(inv, "read_edge", **EDGE, at=v)
            want = sdk.edge(*SDK_EDGE, at=v)
            assert (got["version"], got["state"], got["conflict_id"]) == (
                v,
                want.state,
                want.conflict_id,
            )
        near = _call(inv, "conflicts_near", node="service:a")
        assert [c["conflict_id"] for c in near["conflicts"]] == [
            q["conflict_id"] for q in sdk.quarantine(at=near["version"])
        ]
        hood = _call(inv, "neighbors", node="service:a", at=denied["version"])
        want_n = sdk.neighbors("service:a", at=denied["version"])
        assert len(hood["neighbors"]) == len(want_n) == 1
        assert hood["neighbors"][0]["state"] == want_n[0].state == "unknown"

        verdict = _call(
            reviewer, "resolve_conflict", conflict_id=denied["conflict_id"],
            winner=wrote["claim_id"], rationale="the trace was stale",
        )  # fmt: skip
        assert verdict["decision"] == "resolved", verdict
        sdk.wait_for(verdict["version"], timeout=30)
        after = _call(inv, "read_edge", **EDGE)
        assert after["state"] == sdk.edge(*SDK_EDGE, at=after["version"]).state == "present"
    finally:
        for ex in (inv, tracer, reviewer):
            ex.close()
