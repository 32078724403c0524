"""The async SDK: RocksDB work happens on the graph's worker threads, never the event loop;
async runs trace and report blocked reads like sync ones. (The graph port's contract suite
runs the async SDK too: tests/test_graph_port.py, async-embedded and async-http.)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx

import claimgraph
from claimgraph.http.app import create_app
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


def test_embedded_reads_and_writes_run_on_worker_threads(tmp_path: Path) -> None:
    """The reader and the writer are called from claimgraph-io threads, not the loop's."""
    seen: list[tuple[str, str]] = []

    async def go() -> None:
        g = await claimgraph.aopen(tmp_path / "g", create=True)
        loop_thread = threading.current_thread().name
        reader, sync = g.sync.reader, g.sync  # type: ignore[attr-defined]
        edge, submit = reader.edge, sync.submit

        def spy_edge(*a: Any, **kw: Any) -> Any:
            seen.append(("edge", threading.current_thread().name))
            return edge(*a, **kw)

        def spy_submit(*a: Any, **kw: Any) -> Any:
            seen.append(("submit", threading.current_thread().name))
            return submit(*a, **kw)

        reader.edge, sync.submit = spy_edge, spy_submit
        await g.publish_schema(SCHEMA, agent="admin")
        r = await g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        assert (await g.edge("depends_on", "service:a", "service:b", at=r.version)).state == (
            "present"
        )
        await g.aclose()
        assert all(name != loop_thread for _, name in seen)

    asyncio.run(go())
    assert {k for k, _ in seen} == {"edge", "submit"}
    assert all(name.startswith("claimgraph-io") for _, name in seen), seen


def test_a_blocked_wait_does_not_block_the_loop(tmp_path: Path) -> None:
    """While one coroutine waits for a version, another writes it on the same loop."""

    async def go() -> int:
        g = await claimgraph.aopen(tmp_path / "g", create=True)
        r = await g.publish_schema(SCHEMA, agent="admin")
        waiting = asyncio.create_task(g.wait_for(r.version + 1, timeout=30))
        await asyncio.sleep(0)  # a yield, not a wait: the task hands the wait to a worker
        await g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        head = await waiting
        await g.aclose()
        return head

    assert asyncio.run(go()) >= 1


def test_async_runs_trace_replay_and_report_blocked_reads(tmp_path: Path) -> None:
    """An async run over HTTP reads at its pin, traces, replays, and reports what it hit."""
    sync = claimgraph.open(tmp_path / "g", create=True, graph="test")
    sync.publish_schema(SCHEMA, agent="admin")
    app = create_app(sync, token_file())

    async def go() -> str:
        inv = await claimgraph.aconnect("http://t", TOKENS["inventory"], app=app)
        tracer = await claimgraph.aconnect("http://t", TOKENS["tracer"], app=app)
        assert isinstance(inv._http, httpx.AsyncClient)
        await inv.assert_("depends_on", "service:a", "service:b", agent="inventory")
        d = await tracer.deny("depends_on", "service:a", "service:b", agent="tracer")
        assert d.kind == "quarantined"
        async with inv.run(agent="inventory", task="audit") as run:
            e = await run.edge("depends_on", "service:a", "service:b")
            assert e.state == "unknown"
            p = await run.paths("service:a", "service:b")
            assert p.paths[0].state == "unknown"
            w = await run.assert_("depends_on", "service:b", "service:c", confidence=0.7)
            assert w.decision["kind"] == "accepted"
        assert (await inv.replay_run(run.run_id)).identical
        claim = await inv.claim_info(w.command_id)
        assert claim is not None and claim["run_id"] == run.run_id
        await inv.aclose()
        await tracer.aclose()
        return run.run_id

    run_id = asyncio.run(go())
    blocked = [d for _, d in sync.decisions(0, 50) if d["command_type"] == "read_blocked"]
    assert [d["agent"] for d in blocked] == ["inventory"]
    kinds = [e["kind"] for e in sync.run_events(run_id)]
    assert kinds == ["start", "read", "read", "write", "end"]
    sync.close()
