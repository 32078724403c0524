"""Batched writes: ``POST /v1/commands``, the SDK's batched submit, MCP ``write_claims``.

A batch is decided in order in one write; each item is checked as its own route checks it (a
refusal is recorded), and a batch past its bound is refused whole with nothing recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.http.limits import HttpLimits
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, SdkFactory, token_file
from tests.mcp_fixtures import result, served


def _graph(tmp: Path) -> claimgraph.Graph:
    g = claimgraph.open(tmp / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    return g


def _post(app: Any, agent: str, body: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKENS[agent]}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as c:
            return await c.post("/v1/commands", json=body)

    return anyio.run(go)


def _claim(i: int, **kw: Any) -> dict[str, Any]:
    return {"type": "claim", "edge_type": "depends_on", "subject": f"service:s{i}",
            "object": "service:db", "command_id": f"b-{i}", **kw}  # fmt: skip


def test_a_batch_is_decided_in_order_with_each_items_own_status(tmp_path: Path) -> None:
    """POST /v1/commands as inventory: two claims accepted, one acting as another agent
    refused (403, recorded as `refused`), a grant without the admin role refused (403), a
    retract of an unknown claim rejected (404): five results in order, at consecutive
    versions, each with the status its own route answers."""
    g = _graph(tmp_path)
    head = g.head()
    items = [
        _claim(1),
        _claim(2, agent="tracer"),
        {"type": "grant", "grantee_agent": "intern", "edge_type": "depends_on"},
        {"type": "retract", "claim_id": "no-such-claim"},
        _claim(3),
    ]
    r = _post(create_app(g, token_file()), "inventory", {"commands": items})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    got = [(x["status"], x["decision"]["command_type"], x["decision"]["reason"]) for x in res]
    assert got == [
        (200, "claim", "new"),
        (403, "refused", "agent_mismatch"),
        (403, "refused", "not_admin"),
        (404, "retract", "unknown_claim"),
        (200, "claim", "new"),
    ]
    assert [x["version"] for x in res] == list(range(head + 1, head + 6))
    assert g.head() == head + 5
    assert g.edge("depends_on", "service:s3", "service:db").state == "present"
    assert g.edge("depends_on", "service:s2", "service:db").state == "absent"
    g.close()


def test_a_batch_past_max_batch_is_refused_whole_and_records_nothing(tmp_path: Path) -> None:
    """With max_batch 2, three items answer 413 too_large naming --max-batch, and the graph's
    head does not move; two items are decided."""
    g = _graph(tmp_path)
    head = g.head()
    app = create_app(g, token_file(), limits=HttpLimits(max_batch=2))
    r = _post(app, "inventory", {"commands": [_claim(i) for i in range(3)]})
    assert r.status_code == 413 and r.json()["reason"] == "too_large", r.text
    assert "--max-batch" in r.text and g.head() == head
    r = _post(app, "inventory", {"commands": [_claim(i) for i in range(2)]})
    assert r.status_code == 200 and g.head() == head + 2
    g.close()


def test_a_batch_item_of_an_unknown_type_is_invalid_and_records_nothing(tmp_path: Path) -> None:
    """An item whose type no client may send (tick) or that does not exist makes the whole
    request a 422 before anything is recorded."""
    g = _graph(tmp_path)
    head = g.head()
    app = create_app(g, token_file())
    for bad in ({"type": "tick"}, {"type": "nope"}, {"edge_type": "depends_on"}):
        r = _post(app, "inventory", {"commands": [_claim(1), bad]})
        assert r.status_code == 422, r.text
    assert g.head() == head
    g.close()


def test_sdk_submit_sends_batches_and_returns_receipts_in_order(
    sdk: tuple[SdkFactory, claimgraph.Graph],
) -> None:
    """submit of 25 built claims with batch 10 (three requests over HTTP) returns 25 receipts
    in order at consecutive versions, identical in shape to the embedded graph's."""
    as_agent, g = sdk
    c = as_agent("inventory")
    head = g.head()
    from claimgraph.sdk.http import HttpGraph

    built = [
        {"type": "claim", "command_id": f"k-{i}", "graph": "test", "agent": "inventory",
         "task": "", "run_id": None, "edge_type": "depends_on", "subject_type": "service",
         "subject_id": f"s{i}", "object_type": "service", "object_id": "db",
         "polarity": "assert", "confidence": 0.5, "evidence": [], "reasoning": "",
         "asserted_at": 1, "based_on_version": None, "properties": {}}
        for i in range(25)
    ]  # fmt: skip
    receipts = c.submit(built, batch=10) if isinstance(c, HttpGraph) else c.submit(built)
    assert [r.command_id for r in receipts] == [f"k-{i}" for i in range(25)]
    assert [r.version for r in receipts] == list(range(head + 1, head + 26))
    assert {r.kind for r in receipts} == {"accepted"}


def test_sdk_batch_with_a_refused_item_raises_after_recording_the_batch(tmp_path: Path) -> None:
    """Over HTTP, a batch whose second item acts as another agent raises AuthError
    (agent_mismatch) once the batch is answered; every item of it was decided."""
    g = _graph(tmp_path)
    c = claimgraph.connect("http://t", token=TOKENS["inventory"], app=create_app(g, token_file()))
    head = g.head()
    built = [
        {"type": "claim", "command_id": f"m-{i}", "graph": "test", "agent": agent,
         "task": "", "run_id": None, "edge_type": "depends_on", "subject_type": "service",
         "subject_id": f"s{i}", "object_type": "service", "object_id": "db",
         "polarity": "assert", "confidence": 0.5, "evidence": [], "reasoning": "",
         "asserted_at": 1, "based_on_version": None, "properties": {}}
        for i, agent in enumerate(["inventory", "tracer", "inventory"])
    ]  # fmt: skip
    with pytest.raises(claimgraph.AuthError) as info:
        c.submit(built)
    assert info.value.reason == "agent_mismatch"
    assert g.head() == head + 3
    assert g.edge("depends_on", "service:s2", "service:db").state == "present"
    c.close()
    g.close()


def test_mcp_write_claims_writes_several_claims_in_one_call(tmp_path: Path) -> None:
    """write_claims over MCP (streamable HTTP, as inventory): three claims in one call, one
    result per claim in order; each write is in the run's trace (the run the session started),
    based on the run's pinned version; more than 100 claims is a tool error and writes
    nothing."""
    with served(tmp_path / "g") as (url, g, _sessions):

        async def go() -> tuple[dict[str, Any], bool, int]:
            headers = {"Authorization": f"Bearer {TOKENS['inventory']}"}
            async with (
                httpx.AsyncClient(headers=headers, timeout=30) as client,
                streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                claims = [
                    {"edge_type": "depends_on", "subject": f"service:w{i}",
                     "object": "service:db", "confidence": 0.7, "evidence": ["probe"]}
                    for i in range(3)
                ]  # fmt: skip
                claims[1]["polarity"] = "deny"
                await s.call_tool("start_run", {})
                out = result(await s.call_tool("write_claims", {"claims": claims}))
                head = g.head()
                big = await s.call_tool("write_claims", {"claims": [claims[0]] * 101})
                info = result(await s.call_tool("run_info", {}))
                await s.call_tool("end_run", {})
                return out | {"run_id": info["run_id"]}, bool(big.isError), head

        out, big_failed, head = anyio.run(go)
        assert [x["decision"] for x in out["results"]] == ["accepted", "accepted", "accepted"]
        assert big_failed and g.head() == head
        writes = [e for e in g.run_events(out["run_id"]) if e["kind"] == "write"]
        assert len(writes) == 3
        claim = g.claim_info(out["results"][1]["claim_id"])
        assert claim is not None and claim["polarity"] == "deny"
        assert (claim["agent"], claim["run_id"]) == ("inventory", out["run_id"])


def test_read_edges_answers_each_edge_as_get_edge_does_at_one_version(tmp_path: Path) -> None:
    """POST /v1/read/edges at a pinned version gives, in order, what GET /v1/edge gives for
    each edge at that version (present, absent, unknown); past max_batch it is 413, and
    without a token 401."""
    g = _graph(tmp_path)
    v0 = g.assert_("depends_on", "service:a", "service:b", agent="inventory").version
    g.deny("depends_on", "service:a", "service:b", agent="tracer")  # quarantined: unknown
    g.assert_("depends_on", "service:c", "service:b", agent="inventory")
    app = create_app(g, token_file(), limits=HttpLimits(max_batch=3))
    edges = [
        {"edge_type": "depends_on", "subject": s, "object": "service:b"}
        for s in ("service:a", "service:c", "service:zz")
    ]

    async def go() -> tuple[list[httpx.Response], list[Any]]:
        headers = {"Authorization": f"Bearer {TOKENS['tracer']}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
        ) as c:
            rs = [
                await c.post("/v1/read/edges", json={"edges": edges}),
                await c.post("/v1/read/edges", json={"edges": edges, "at": v0}),
                await c.post("/v1/read/edges", json={"edges": edges * 2}),
                await c.post(
                    "/v1/read/edges", json={"edges": edges}, headers={"Authorization": ""}
                ),
            ]
            singles = [
                (await c.get("/v1/edge", params={**e, "at": rs[0].json()["version"]})).json()
                for e in edges
            ]
            return rs, singles

    rs, singles = anyio.run(go)
    assert rs[0].status_code == 200 and rs[0].json()["edges"] == singles
    assert [e["state"] for e in singles] == ["unknown", "present", "absent"]
    at_v0 = rs[1].json()
    assert at_v0["version"] == v0
    assert [e["state"] for e in at_v0["edges"]] == ["present", "absent", "absent"]
    assert rs[2].status_code == 413 and rs[2].json()["reason"] == "too_large"
    assert rs[3].status_code == 401
    g.close()


def _read_edges_graph(g: claimgraph.Graph) -> tuple[list[tuple[str, str, str]], int]:
    """Edges present, quarantined (unknown) and absent, and the version before the conflict."""
    v0 = g.assert_("depends_on", "service:a", "service:b", agent="inventory").version
    g.deny("depends_on", "service:a", "service:b", agent="tracer")  # quarantined: unknown
    g.assert_("depends_on", "service:c", "service:b", agent="inventory")
    g.assert_("owns", "service:c", "database:d", agent="inventory")
    edges = [
        ("depends_on", "service:a", "service:b"),
        ("depends_on", "service:c", "service:b"),
        ("owns", "service:c", "database:d"),
        ("depends_on", "service:zz", "service:b"),
    ]
    return edges, v0


def test_sdk_read_edges_over_a_real_server_equals_single_reads(tmp_path: Path) -> None:
    """The sync and async SDK's read_edges, against uvicorn on a socket, answer at every
    version what edge() answers edge by edge (and what the embedded graph answers); a run's
    read_edges is served at its pinned version and traced as edge reads that replay; more
    edges than --max-batch is a LimitError naming the limit; a future version times out."""
    from claimgraph.errors import InputError, LimitError
    from claimgraph.sdk.aio_http import aconnect

    with served(tmp_path / "g") as (url, g, _sessions):
        edges, v0 = _read_edges_graph(g)
        head = g.head()
        with claimgraph.connect(url, token=TOKENS["tracer"]) as c:
            for v in range(-1, head + 1):
                singles = [c.edge(*e, at=v) for e in edges]
                assert c.read_edges(edges, at=v) == singles == g.read_edges(edges, at=v)
            assert [e.state for e in c.read_edges(edges)] == [
                "unknown", "present", "present", "absent",
            ]  # fmt: skip
            with pytest.raises(LimitError, match="1001 edges in one request; at most 1000"):
                c.read_edges([edges[0]] * 1001)
            with pytest.raises(claimgraph.VersionNotYetAvailable):
                c.read_edges(edges, at=head + 5, timeout=0.1)
            for reader in (c, g):  # malformed input: a named error before any read
                with pytest.raises(InputError, match="edge 1 of read_edges is"):
                    reader.read_edges([edges[0], ("owns", "service:a")])
                with pytest.raises(InputError, match="is not a node"):
                    reader.read_edges([("owns", "checkout", "database:d")])
            g.assert_("owns", "service:a", "database:d", agent="inventory")  # after the pin
            with c.run(agent="tracer", task="t", snapshot=claimgraph.Snapshot(v0, "s")) as run:
                pinned = run.read_edges([*edges, ("owns", "service:a", "database:d")])
            assert [e.state for e in pinned] == ["present"] + ["absent"] * 4
            assert pinned == [
                c.edge(*e, at=v0) for e in [*edges, ("owns", "service:a", "database:d")]
            ]
            reads = [e for e in g.run_events(run.run_id) if e["kind"] == "read"]
            assert len(reads) == 5 and all('"op": "edge"' in e["payload"] for e in reads)
            assert g.replay_run(run.run_id).identical

        async def go() -> tuple[list[Any], list[Any], str]:
            a = await aconnect(url, token=TOKENS["tracer"])
            try:
                batch = await a.read_edges(edges, at=v0 + 1)
                singles = [await a.edge(*e, at=v0 + 1) for e in edges]
                snap = claimgraph.Snapshot(v0, "s2")
                async with a.run(agent="tracer", task="t", snapshot=snap) as run:
                    assert await run.read_edges(edges) == g.read_edges(edges, at=v0)
                assert (await a.replay_run(run.run_id)).identical
                try:
                    await a.read_edges([edges[0]] * 1001)
                except LimitError as exc:
                    return batch, singles, str(exc)
                return batch, singles, ""
            finally:
                await a.aclose()

        batch, singles, err = anyio.run(go)
        assert batch == singles == g.read_edges(edges, at=v0 + 1)
        assert batch[0].state == "unknown"
        assert "at most 1000" in err and "--max-batch" in err


def test_mcp_read_edges_answers_as_read_edge_does_in_one_call(tmp_path: Path) -> None:
    """read_edges over MCP (streamable HTTP): one answer per edge, in order, equal to
    read_edge's at the run's pinned version, each traced as an edge read that replays; with
    ``at`` it reads there (traced as a tool call); more than 100 edges is a tool error."""
    with served(tmp_path / "g") as (url, g, _sessions):
        edges, v0 = _read_edges_graph(g)
        items = [{"edge_type": t, "subject": s, "object": o} for t, s, o in edges]

        async def go() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], bool, str]:
            headers = {"Authorization": f"Bearer {TOKENS['tracer']}"}
            async with (
                httpx.AsyncClient(headers=headers, timeout=30) as client,
                streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                await s.call_tool("start_run", {})  # reads in a run: at its pinned version
                batch = result(await s.call_tool("read_edges", {"edges": items}))
                singles = [result(await s.call_tool("read_edge", i)) for i in items]
                old = result(await s.call_tool("read_edges", {"edges": items, "at": v0}))
                big = await s.call_tool("read_edges", {"edges": items * 26})
                info = result(await s.call_tool("run_info", {}))
                await s.call_tool("end_run", {})
                return batch, singles, old, bool(big.isError), info["run_id"]

        batch, singles, old, big_failed, run_id = anyio.run(go)
        assert batch["edges"] == singles
        assert [e["state"] for e in singles] == ["unknown", "present", "present", "absent"]
        assert old["version"] == v0
        assert [e["state"] for e in old["edges"]] == ["present", "absent", "absent", "absent"]
        assert big_failed
        events = g.run_events(run_id)
        assert sum(e["kind"] == "read" for e in events) == 8  # four in the batch, four single
        assert [e for e in events if e["kind"] == "tool" and "read_edges" in e["payload"]]
        assert g.replay_run(run_id).identical
