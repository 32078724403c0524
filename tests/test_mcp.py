"""The MCP server end to end, with the mcp SDK's own client over both transports.

Three agents work through MCP — two claim the one owner of a database (a quarantine), a third
reads unknown, looks at the conflict and tries to escalate without the role (refused and
recorded) — then a resolver resolves through MCP; every session's run replays identically.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import TOKENS
from tests.mcp_fixtures import result, served

Open = Callable[[str], AbstractAsyncContextManager[ClientSession]]


def _http(url: str) -> Open:
    @asynccontextmanager
    async def open_(agent: str) -> AsyncIterator[ClientSession]:
        headers = {"Authorization": f"Bearer {TOKENS[agent]}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as client,
            streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            yield s

    return open_


def _stdio(url: str) -> Open:
    @asynccontextmanager
    async def open_(agent: str) -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "claimgraph", "mcp", "--url", url, "--token", TOKENS[agent]],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s

    return open_


async def call(s: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    return result(await s.call_tool(tool, args))


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_three_agents_quarantine_a_resolver_resolves_runs_replay(
    tmp_path: Path, transport: str
) -> None:
    """Through MCP: a quarantine, an unknown read, a recorded refusal, a resolution, replay."""
    with served(tmp_path / "g") as (url, g, _sessions):
        open_ = (_http if transport == "http" else _stdio)(url)
        runs: list[str] = []

        async def scenario() -> None:
            async with open_("inventory") as inv, open_("dba") as dba, open_("tracer") as tr:
                await call(inv, "start_run")  # runs are explicit: each agent starts its own
                a = await call(
                    inv, "assert_edge", edge_type="owns", subject="service:a",
                    object="database:d", confidence=0.9, evidence=["cmdb#1"],
                    reasoning="the CMDB says so",
                )  # fmt: skip
                assert a["decision"] == "accepted", a
                info = await call(dba, "start_run", task="audit-owners")
                assert info["task"] == "audit-owners"
                b = await call(
                    dba, "assert_edge", edge_type="owns", subject="service:b",
                    object="database:d", confidence=0.8, evidence=["grants-audit"],
                )  # fmt: skip
                assert b["decision"] == "quarantined", b
                conflict = b["conflict_id"]
                assert conflict and conflict in b["explain"]
                await call(tr, "start_run")  # pinned now, at head: the quarantine is in it
                e = await call(
                    tr, "read_edge", edge_type="owns", subject="service:a", object="database:d"
                )
                assert (e["state"], e["conflict_id"]) == ("unknown", conflict), e
                assert "escalate_conflict" in e["explain"]
                near = await call(tr, "conflicts_near", node="database:d")
                (c,) = near["conflicts"]
                assert {x["agent"] for x in c["claims"]} == {"inventory", "dba"}
                paths = await call(tr, "find_paths", src="service:a", dst="database:d")
                assert paths["paths"][0]["state"] == "unknown"
                refused = await call(tr, "escalate_conflict", conflict_id=conflict, reason="x")
                assert (refused["decision"], refused["reason"]) == ("refused", "not_resolver")
                bad = await tr.call_tool(
                    "read_edge", {"edge_type": "ownz", "subject": "service:a",
                                  "object": "database:d"},
                )  # fmt: skip
                assert bad.isError and "not defined by the graph schema" in str(bad.content)
                for s in (inv, dba, tr):
                    runs.append((await call(s, "run_info"))["run_id"])
                    await call(s, "end_run")
            async with open_("reviewer") as rev:
                grants = await rev.read_resource("claimgraph://grants")  # type: ignore[arg-type]
                assert '"resolver"' in grants.contents[0].text  # type: ignore[union-attr]
                schema = await rev.read_resource("claimgraph://schema")  # type: ignore[arg-type]
                assert "depends_on" in schema.contents[0].text  # type: ignore[union-attr]
                r = await call(
                    rev, "resolve_conflict", conflict_id=conflict, winner=a["claim_id"],
                    rationale="the CMDB is the source of truth",
                )  # fmt: skip
                assert r["decision"] == "resolved", r
                fresh = await call(rev, "start_run")
                assert fresh["pinned_version"] >= r["version"]
                e2 = await call(
                    rev, "read_edge", edge_type="owns", subject="service:a", object="database:d"
                )
                assert e2["state"] == "present"
                runs.append(fresh["run_id"])
                await call(rev, "end_run")

        anyio.run(scenario)
        refusals = [d for _, d in g.decisions(0, 100) if d["command_type"] == "refused"]
        assert [(d["agent"], d["reason"]) for d in refusals] == [("tracer", "not_resolver")]
        summaries = {s.run_id: s for s in g.runs()}
        for run_id in runs:
            assert not summaries[run_id].live
            assert g.replay_run(run_id).identical
        assert summaries[runs[2]].reads >= 3  # the tracer's reads are traced


def test_http_mcp_needs_a_token(tmp_path: Path) -> None:
    """Without a valid bearer token /mcp answers 401 before any session exists."""
    with served(tmp_path / "g") as (url, _g, sessions):
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        r = httpx.post(f"{url}/mcp", json=body, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401 and r.json()["reason"] == "unauthenticated"
        assert sessions.live() == []


def test_stdio_on_an_embedded_directory_as_the_local_owner(tmp_path: Path) -> None:
    """claimgraph mcp --agent on a data directory: one session, a run, replayable."""
    import claimgraph

    data = tmp_path / "g"
    with claimgraph.open(data, create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "claimgraph",
            "--data",
            str(data),
            "mcp",
            "--agent",
            "inventory",
            "--task",
            "reconcile",  # a server started for one run: its first call starts it
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )

    async def go() -> str:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            tools = {t.name for t in (await s.list_tools()).tools}
            assert {"read_edge", "assert_edge", "find_paths"} <= tools
            # the schema makes inventory no resolver: a local owner is offered what it gives
            assert not {"escalate_conflict", "resolve_conflict"} & tools
            w1 = await call(
                s, "assert_edge", edge_type="depends_on", subject="service:a",
                object="service:b",
            )  # fmt: skip
            assert w1["decision"] == "accepted"
            info = await call(s, "run_info")
            assert info["pinned_version"] == 0  # the run pinned head before the write
            e = await call(
                s, "read_edge", edge_type="depends_on", subject="service:a", object="service:b"
            )
            assert e["state"] == "absent" and e["version"] == 0  # read at the pinned version
            grants = await s.read_resource("claimgraph://grants")  # type: ignore[arg-type]
            assert '"local-owner"' in grants.contents[0].text  # type: ignore[union-attr]
            await call(s, "end_run")
            return str(info["run_id"])

    run_id = anyio.run(go)
    with claimgraph.open(data) as g:
        (w,) = [e for e in g.run_events(run_id) if e["kind"] == "write"]
        assert g.replay_run(run_id).identical
        claim = g.claim_info(json.loads(w["payload"])["command_id"])
        assert claim is not None
        assert (claim["agent"], claim["run_id"], claim["based_on_version"]) == (
            "inventory", run_id, 0,
        )  # fmt: skip
