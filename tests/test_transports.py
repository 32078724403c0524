"""Issue 25's reproductions, each through a real surface: checks beneath the transports, runs
as explicit handles that need no transport session, clients that honour the limits.

MCP is driven by the official ``mcp`` client and by ``langchain-mcp-adapters``' stateless
quick start (``get_tools()``: a session per tool call) against a real server; HTTP through
the real app (``httpx.ASGITransport``) and the SDK.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import claimgraph
from claimgraph.errors import LimitError
from claimgraph.http.app import create_app
from claimgraph.service.graph import Graph
from claimgraph.service.limits import Limits
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file
from tests.mcp_fixtures import result, served

# the first article's quarantine, with a blocked-read threshold of 3
QUARANTINE = SCHEMA.replace(
    "    conflict_policy: quarantine\n    on_stale: quarantine\n",
    "    conflict_policy: quarantine\n    on_stale: quarantine\n"
    "    quarantine: {max_blocked_reads: 3, on_exit: escalate}\n",
    1,
)

Open = Callable[..., AbstractAsyncContextManager[ClientSession]]


def _opener(url: str) -> Open:
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


async def _call(s: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    return result(await s.call_tool(tool, args))


async def _error(s: ClientSession, tool: str, **args: Any) -> str:
    """A tool error's text, without the SDK's "Error executing tool NAME: " before it."""
    r = await s.call_tool(tool, args)
    assert r.isError, r.content
    text = str(r.content[0].text)  # type: ignore[union-attr]
    return text.removeprefix(f"Error executing tool {tool}: ")


def _quarantine(g: Graph) -> str:
    """Two writers disagree about who owns database:d: the conflict's id."""
    assert g.assert_("owns", "service:a", "database:d", agent="inventory").kind == "accepted"
    r = g.assert_("owns", "service:b", "database:d", agent="dba", task="audit-owners")
    assert r.kind == "quarantined", r.decision
    return r.decision["conflict_id"] or ""


def _until(condition: Callable[[], bool]) -> None:
    """Spin until ``condition`` holds: synchronised on what is observed, never on a clock."""
    while not condition():
        time.sleep(0)  # yield to the threads that make it true


def _blocked(g: Graph) -> list[dict[str, Any]]:
    return [d for _, d in g.decisions(0, 10_000) if d["command_type"] == "read_blocked"]


def test_mcp_meets_the_limits_http_meets(tmp_path: Path) -> None:
    """Why 1: MCP runs count against max_pins (a third live run of one principal is 429's
    too_many, wherever the first two were started), end_run refuses a status past its bound,
    and tool arguments are strict: "0.5" and true are not confidences."""
    limits = Limits(max_pins=2)
    with served(tmp_path / "g", limits=limits) as (url, g, _sessions):
        open_ = _opener(url)

        async def go() -> None:
            async with open_("inventory") as a, open_("inventory") as b:
                one = await _call(a, "start_run")
                await _call(b, "start_run")
                msg = await _error(a, "start_run")  # a's start_run ends its own run first...
                assert msg.startswith("too_many: ") and "--max-pins" in msg, msg
                # ...only after the new one is pinned: the refused start left both runs live
                assert (await _call(a, "run_info"))["run_id"] == one["run_id"]
                big = await _error(b, "end_run", status="x" * 2_000_000)
                assert "status" in big, big[:200]
                for bad in ("0.5", True):
                    msg = await _error(
                        a, "assert_edge", edge_type="depends_on", subject="service:a",
                        object="service:b", confidence=bad,
                    )  # fmt: skip
                    assert "confidence" in msg, msg
                await _call(a, "end_run")
                await _call(b, "end_run")

        anyio.run(go)
        assert not [p for p in g.pins.live() if p.holder == "inventory"]
        assert not [d for _, d in g.decisions(0, 100) if d["command_type"] == "claim"]


def test_an_mcp_session_is_ended_only_by_its_own_principal(tmp_path: Path) -> None:
    """Why 3: a DELETE /mcp (or any request) naming another principal's session id is a 404
    that never reaches it; the victim goes on, and its owner's DELETE ends it."""
    with served(tmp_path / "g") as (url, _g, sessions):
        open_ = _opener(url)

        async def go() -> None:
            async with open_("inventory") as victim:
                (sid,) = [k[1] for k in sessions._sessions] or [None]
                if sid is None:  # the session is made on its first tool call
                    await _call(victim, "run_info")
                    ((_, sid),) = list(sessions._sessions)
                async with httpx.AsyncClient() as c:
                    h = {"Authorization": f"Bearer {TOKENS['tracer']}", "mcp-session-id": sid}
                    r = await c.delete(f"{url}/mcp", headers=h)
                    assert r.status_code == 404 and r.json()["reason"] == "not_found"
                    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
                    h2 = {**h, "accept": "application/json, text/event-stream"}
                    r = await c.post(f"{url}/mcp", json=call, headers=h2)
                    assert r.status_code == 404
                info = await _call(victim, "run_info")  # the victim's session is alive
                assert info["agent"] == "inventory"

        anyio.run(go)
        assert sessions.live() == []  # its own client's DELETE (on close) ended it


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_sdk_run_of_a_pattern_only_token_reports_its_blocked_reads(
    tmp_path: Path, flavour: str
) -> None:
    """Why 4: an SDK run over HTTP whose read met a quarantine ends cleanly for a token whose
    tasks do not include '' (dba: audit-*): the report carries the run's task."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    conflict = _quarantine(g)
    app = create_app(g, token_file())
    try:
        if flavour == "sync":
            with (
                claimgraph.connect("http://t", TOKENS["dba"], app=app) as h,
                h.run(task="audit-owners") as run,
            ):
                assert run.slot("owns", "database:d", direction="in").state == "unknown"
                assert run.edge("owns", "service:b", "database:d").state == "unknown"
            run_id = run.run_id
        else:

            async def go() -> str:
                from claimgraph.sdk.aio_http import aconnect

                h = await aconnect("http://t", TOKENS["dba"], app=app)
                async with h, h.run(task="audit-owners") as run:
                    e = await run.edge("owns", "service:b", "database:d")
                    assert e.state == "unknown"
                return run.run_id

            run_id = asyncio.run(go())
        (d,) = _blocked(g)
        assert (d["kind"], d["agent"], d["task"], d["run_id"], d["target"]) == (
            "accepted", "dba", "audit-owners", run_id, conflict,
        )  # fmt: skip
        assert not [x for _, x in g.decisions(0, 100) if x["command_type"] == "refused"]
    finally:
        g.close()


def test_the_stateless_langgraph_quick_start_reads_five_times_one_blocked_read(
    tmp_path: Path,
) -> None:
    """Why 5, with langchain-mcp-adapters' documented quick start (get_tools(): a session
    per tool call): five reads of a quarantined slot record one blocked read and start no
    run, so an agent polling three times no longer escalates a max_blocked_reads: 3 conflict;
    a run it starts is a handle the next call (another session) names."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    with served(tmp_path / "g", schema=QUARANTINE) as (url, g, _sessions):
        conflict = _quarantine(g)
        runs_before = len(g.runs())
        client = MultiServerMCPClient(
            {
                "claimgraph": {
                    "url": f"{url}/mcp",
                    "transport": "streamable_http",
                    "headers": {"Authorization": f"Bearer {TOKENS['tracer']}"},
                }
            }
        )

        async def go() -> tuple[list[dict[str, Any]], dict[str, Any], str]:
            tools = {t.name: t for t in await client.get_tools()}

            async def invoke(name: str, **args: Any) -> dict[str, Any]:
                content = await tools[name].ainvoke(args)
                text = content if isinstance(content, str) else content[0]["text"]
                return dict(json.loads(text))

            reads = [
                await invoke("read_slot", edge_type="owns", node="database:d", direction="in")
                for _ in range(5)
            ]
            started = await invoke("start_run")
            in_run = await invoke(
                "read_edge", edge_type="owns", subject="service:a", object="database:d",
                run_id=started["run_id"],
            )  # fmt: skip
            ended = await invoke("end_run", run_id=started["run_id"])
            return reads, in_run, ended["ended"]

        reads, in_run, ended = anyio.run(go)
        assert {(r["state"], r["conflict_id"]) for r in reads} == {("unknown", conflict)}
        # each says the version it was read at: head, which the first one's report moved
        first = reads[0]["version"]
        assert [r["version"] for r in reads] == [first] + [first + 1] * 4
        outside = [d for d in _blocked(g) if d["run_id"] is None]
        assert [(d["kind"], d["agent"]) for d in outside] == [("accepted", "tracer")]
        row = g.conflict(conflict)
        assert row is not None and row["escalated_at"] is None  # polling is not escalation
        assert (in_run["state"], in_run["version"]) == ("unknown", first + 1)
        (summary,) = g.runs()[runs_before:]  # one run: the one it started
        assert (summary.run_id, summary.live, summary.reads) == (ended, False, 1)
        assert g.replay_run(ended).identical


def test_a_pattern_only_token_is_told_to_start_a_run_with_a_task(tmp_path: Path) -> None:
    """Why 6: a write of a session whose token has only patterns (audit-*) is not sent with
    task '' (rejected unauthorized, without a hint): the tool result says to call
    start_run(task=...); in that run the write is decided."""
    with served(tmp_path / "g") as (url, g, _sessions):

        async def go() -> tuple[dict[str, Any], dict[str, Any]]:
            async with _opener(url)("dba") as s:
                args = {"edge_type": "owns", "subject": "service:b", "object": "database:d"}
                hint = await _call(s, "assert_edge", **args)
                run = await _call(s, "start_run", task="audit-owners")
                done = await _call(s, "assert_edge", **args, run_id=run["run_id"])
                await _call(s, "end_run")
                return hint, done

        hint, done = anyio.run(go)
        assert hint["decision"] == "needs_task" and "start_run(task=" in hint["explain"]
        assert "audit-*" in hint["explain"]
        assert done["decision"] == "accepted", done
        claims = [d for _, d in g.decisions(0, 100) if d["command_type"] == "claim"]
        assert [(d["agent"], d["task"]) for d in claims] == [("dba", "audit-owners")]


def test_connect_takes_the_tokens_agent_and_task_and_lists_unknown_routes(
    tmp_path: Path,
) -> None:
    """Why 6: connect() and aconnect() write as the token's agent in its one literal task
    (assert_() without agent= or task=); POST /v1/commands/assert is a 404 that lists the
    command types (the route is /v1/commands/claim)."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    app = create_app(g, token_file())
    try:
        with claimgraph.connect("http://t", TOKENS["release-bot"], app=app) as h:
            r = h.assert_("runs_in", "service:a", "environment:prod")
            assert (r.kind, r.decision["agent"], r.decision["task"]) == (
                "accepted", "release-bot", "promote",
            )  # fmt: skip
            with h.run() as run:
                assert (run.agent, run.task) == ("release-bot", "promote")

        async def go() -> Any:
            from claimgraph.sdk.aio_http import aconnect

            async with await aconnect("http://t", TOKENS["release-bot"], app=app) as h:
                return await h.assert_("runs_in", "service:b", "environment:prod")

        r2 = asyncio.run(go())
        assert (r2.kind, r2.decision["task"]) == ("accepted", "promote")

        async def unknown() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.post(
                    "/v1/commands/assert",
                    json={"edge_type": "owns", "subject": "service:a", "object": "database:d"},
                    headers={"Authorization": f"Bearer {TOKENS['inventory']}"},
                )

        resp = asyncio.run(unknown())
        body = resp.json()
        assert resp.status_code == 404 and "claim" in body["command_types"]
        assert "/v1/commands/claim" in body["detail"], body["detail"]
    finally:
        g.close()


def test_the_sdk_retries_a_429_after_its_retry_after(tmp_path: Path) -> None:
    """Why 6: a request refused 429 (the principal's requests in flight: max_requests 1,
    one held by a wait for a version not yet applied) is retried after Retry-After, through
    the transport's retries, and succeeds once the held one is done; with retries=0 it
    raises at once."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    app = create_app(g, token_file(), limits=Limits(max_requests=1))
    try:
        h = claimgraph.connect("http://t", TOKENS["inventory"], app=app)
        impatient = claimgraph.connect("http://t", TOKENS["inventory"], app=app, retries=0)
        target = g.head() + 1
        waited: list[int] = []
        waiter = threading.Thread(target=lambda: waited.append(h.wait_for(target, 30.0)))
        waiter.start()
        _until(lambda: app.state.requests.held("inventory") == 1)
        with pytest.raises(LimitError) as exc:
            impatient.head()
        assert exc.value.status == 429
        refused_before = app.state.gate.too_many
        answered: list[int] = []
        reader = threading.Thread(target=lambda: answered.append(h.head()))
        reader.start()
        _until(lambda: app.state.gate.too_many > refused_before)  # its first try: refused
        g.assert_("depends_on", "service:a", "service:b", agent="inventory")  # the wait ends
        waiter.join(30)
        reader.join(30)
        assert waited and answered == [target]
        h.close()
        impatient.close()
    finally:
        g.close()


def test_the_sdk_retries_a_503_with_bounded_backoff_and_the_same_command(tmp_path: Path) -> None:
    """Why 6: a write answered 503 (the directory's writer accepts no writes: a StorageError)
    is retried with bounded backoff, at most ``retries`` times, every time the same command
    (its command_id), and then raises; a read of the same server answers meanwhile."""
    from claimgraph.errors import StorageError
    from claimgraph.service.attached import AttachedGraph

    held = claimgraph.open(tmp_path / "g", create=True, graph="test")  # the lock, no socket
    held.publish_schema(SCHEMA, agent="admin")
    attached = AttachedGraph(held.path, held.name, writer_wait=0)
    seen: list[dict[str, Any]] = []
    app = create_app(attached, token_file(), request_log=seen.append)
    bodies: list[bytes] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        """The real app, with each POST body it is sent written down (what a retry sends)."""

        async def receiving() -> Any:
            message = await receive()
            if scope["method"] == "POST" and message.get("body"):
                bodies.append(message["body"])
            return message

        await app(scope, receiving, send)

    try:
        with claimgraph.connect(
            "http://t", TOKENS["inventory"], app=recording, retries=2, retry_wait=0.01
        ) as h:
            with pytest.raises(StorageError):
                h.assert_("depends_on", "service:a", "service:b", command_id="once")
            assert h.head() == held.head()
        posts = [x for x in seen if x["method"] == "POST"]
        assert [x["status"] for x in posts] == [503, 503, 503]  # the first try and 2 retries
        assert len(bodies) == 3 and len(set(bodies)) == 1  # one command, sent three times
        assert json.loads(bodies[0])["command_id"] == "once"
        assert held.claim_info("once") is None and held.head() == 0
    finally:
        attached.close()
        held.close()
