"""Fairness, counted in operations: one principal's flood does not hold up another's write.

Each test runs a flooder (long waits, huge bodies, many pins, costly CEL) and a victim's single
write, and counts what the flooder got done before the victim's write completed — never a
wall-clock window. The HTTP ones run the real app under uvicorn on a loopback socket bound
before the server starts (connections queue in the backlog: nothing to wait for).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import claimgraph
from claimgraph.core import rules
from claimgraph.http.app import create_app
from claimgraph.http.limits import HttpLimits
from claimgraph.projections.retention import PinRegistry
from claimgraph.service.graph import Graph
from claimgraph.service.resolvers import RESOLVER_LIMITS, run_resolvers
from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import TOKENS, token_file

DATA = ROOT / "tests" / "data" / "hostile"
CLAIM = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}


@contextmanager
def _serve(g: Graph, limits: HttpLimits) -> Iterator[tuple[str, Any]]:
    """The real app over ``g`` under uvicorn; yields (base URL, app)."""
    import uvicorn

    app = create_app(g, token_file(), limits=limits)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    yield g
    g.close()


def _client(url: str, who: str | None, timeout: float = 120.0) -> httpx.Client:
    headers = {"authorization": f"Bearer {TOKENS[who]}"} if who else {}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout)


class Tally:
    """What the flooder finished, with a condition to wait on (no sleeps)."""

    def __init__(self) -> None:
        self.done: list[int] = []
        self.cond = threading.Condition()

    def add(self, status: int) -> None:
        with self.cond:
            self.done.append(status)
            self.cond.notify_all()

    def wait_for(self, pred: Callable[[list[int]], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: pred(self.done), timeout=300), self.done

    def snapshot(self) -> list[int]:
        with self.cond:
            return list(self.done)


@pytest.mark.timeout(300)
def test_long_waits_do_not_hold_up_another_principals_write(graph: Graph) -> None:
    """60 reads by one principal wait for a version two writes away (before: they took the
    40 workers writes run on, and a write waited for them to time out). Now 4 hold wait
    slots and 56 are refused at once (429); the victim's write completes while all 4 still
    wait — 0 of the flooder's waits finished first — and the write after it releases them."""
    limits = HttpLimits()
    with _serve(graph, limits) as (url, app):
        target = graph.head() + 2
        tally = Tally()

        def flood(_: int) -> None:
            with _client(url, "intern") as c:
                r = c.get(
                    "/v1/edge",
                    params={**CLAIM, "at": target, "timeout": 30},
                )
                tally.add(r.status_code)

        with ThreadPoolExecutor(60) as pool:
            futures = [pool.submit(flood, i) for i in range(60)]
            tally.wait_for(lambda done: len(done) >= 60 - limits.max_waits)
            assert set(tally.snapshot()) == {429}
            assert app.state.context.waits.held("intern") == limits.max_waits
            with _client(url, "inventory") as victim:
                r = victim.post("/v1/commands/claim", json=CLAIM)
            assert r.status_code == 200, r.text
            assert tally.snapshot().count(429) == len(tally.snapshot())  # no wait finished
            assert graph.head() == target - 1
            graph.assert_("depends_on", "service:a", "service:c", agent="tracer")  # → target
            for f in futures:
                f.result()
        assert sorted(tally.snapshot()) == [200] * limits.max_waits + [429] * 56


@pytest.mark.timeout(300)
def test_a_body_flood_reads_at_most_the_cap_and_the_victim_writes_meanwhile(
    graph: Graph,
) -> None:
    """Four threads upload 100 MB bodies with no token, over and over: each is refused having
    read at most max_body bytes of it (before: all of it, twice, before the 401), and the
    victim's write completes while the flood goes on, within a few of its uploads."""
    limits = HttpLimits(max_body=1024 * 1024)
    stop = threading.Event()
    tally = Tally()
    sent = [0]

    def body() -> Iterator[bytes]:
        chunk = b" " * 65536
        for _ in range(1600):  # 100 MiB: never cut short (a short body would be a valid size)
            sent[0] += len(chunk)
            yield chunk

    def flood(_: int) -> None:
        with _client(url, None) as c:
            while not stop.is_set():
                try:
                    status = c.post("/v1/commands/claim", content=body()).status_code
                except httpx.TransportError:
                    status = 0  # the server closed the connection mid-upload, as it should
                tally.add(status)

    with _serve(graph, limits) as (url, app), ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(flood, i) for i in range(4)]
        tally.wait_for(lambda done: len(done) >= 4)
        before = len(tally.snapshot())
        with _client(url, "inventory") as victim:
            r = victim.post("/v1/commands/claim", json=CLAIM)
        during = len(tally.snapshot()) - before
        stop.set()
        for f in futures:
            f.result()
        assert r.status_code == 200, r.text
        assert during <= 40, during  # a few uploads per flooding thread, not the flood
        assert set(tally.snapshot()) <= {0, 413}
        stats = app.state.gate
        assert stats.too_large >= 4
        assert stats.most_read_of_refused <= limits.max_body
    assert graph.logs.commands.end() == 2  # the schema and the victim's claim: nothing else


@pytest.mark.timeout(300)
def test_many_pins_are_bounded_per_principal_and_a_pin_costs_the_same_at_any_count(
    graph: Graph,
) -> None:
    """One principal starts runs 1000 per request until refused at max_pins (429, nothing of
    that request appended); another principal's run still starts and its write lands. Taking
    a pin costs the same number of SQLite VM steps with 0 or 3000 live pins (O(log n): the
    work is in index descents, not in rewriting every pin, as pins.json was)."""
    limits = HttpLimits(max_pins=3000)
    steps: list[int] = []

    def count(con: sqlite3.Connection) -> None:
        steps.append(0)

        def tick() -> int:
            steps[-1] += 1
            return 0

        con.set_progress_handler(tick, 1)

    graph.pins.on_connect = count
    graph.pins.pin(0, owner="warm-up")  # creates the tables
    steps.clear()
    graph.pins.pin(0, owner="probe-empty", holder="probe")
    cost_empty = steps[-1]
    with _serve(graph, limits) as (url, _app):
        statuses = []
        with _client(url, "intern") as flooder:
            for batch in range(4):
                events = [
                    {"run_id": f"run-{batch}-{i}", "seq": 0, "kind": "start",
                     "pinned_version": 0, "time": 1, "payload": "{}"}
                    for i in range(1000)
                ]  # fmt: skip
                statuses.append(flooder.post("/v1/runs/events", json={"events": events}))
        assert [r.status_code for r in statuses] == [200, 200, 200, 429]
        assert statuses[-1].json()["limit"] == "--max-pins"
        runs_before = len(graph.run_events())
        with (
            claimgraph.connect(url, token=TOKENS["inventory"]) as victim,
            victim.run(agent="inventory") as run,
        ):
            receipt = run.assert_("depends_on", "service:a", "service:b")
        assert receipt.kind == "accepted"
        assert len(graph.run_events()) == runs_before + 3  # start, write, end
    live = graph.pins.live()
    assert len([p for p in live if p.holder == "intern"]) == 3000
    steps.clear()
    graph.pins.pin(0, owner="probe-full", holder="probe")
    cost_full = steps[-1]
    assert cost_full <= cost_empty + 8, (cost_empty, cost_full)
    graph.pins.on_connect = None


def test_a_costly_rule_takes_a_bounded_share_of_a_resolver_pass(tmp_path: Path) -> None:
    """Five conflicts under cel-nested.yaml's exponential rule, and the victim's conflict:
    one pass decides all six, and the hostile ones together take at most 5 x max_steps
    evaluation steps (counted by the metered evaluator), so the victim's verdict waits for a
    bounded amount of work, not for 10^6 evaluations each."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="payments")
    g.publish_schema((DATA / "cel-nested.yaml").read_text(), agent="payments-admin")
    for t in range(6):
        for i in range(10):
            g.assert_("routed_to", f"ticket:t{t}", f"team:x{i}", agent=f"a{i}",
                      confidence=0.95 if i == 9 else 0.5)  # fmt: skip
    visits = [0]
    original = rules._Metered._visit_tree

    def counted(self: Any, tree: Any) -> Any:
        visits[0] += 1
        return original(self, tree)

    rules._Metered._visit_tree = counted  # type: ignore[method-assign]
    try:
        done = run_resolvers(g, agent="resolver-bot")
    finally:
        rules._Metered._visit_tree = original  # type: ignore[method-assign]
    assert len(done) == 6 and all(v.resolver == "rules:confident" for _, v, _ in done)
    max_steps = RESOLVER_LIMITS.rules.max_steps
    confident = visits[0] - 6 * (max_steps + 1)  # each explode stops one visit past its budget
    assert 0 < confident < max_steps, visits[0]
    g.close()


def test_trace_limits_per_run_refuse_the_request_whole(graph: Graph) -> None:
    """A run's trace is bounded per run: past max_run_trace events the request is refused
    (413, naming the limit) and nothing of it is appended."""
    limits = HttpLimits(max_run_trace=5, max_run_events=10)
    app = create_app(graph, token_file(), limits=limits)
    with claimgraph.connect("http://t", token=TOKENS["tracer"], app=app) as c:
        http = c._http

        def post(seqs: range) -> httpx.Response:
            events = [
                {"run_id": "r", "seq": s, "kind": "tool", "pinned_version": 0, "time": 1,
                 "payload": json.dumps({"s": s})}
                for s in seqs
            ]  # fmt: skip
            return http.post("/v1/runs/events", json={"events": events})

        assert post(range(3)).status_code == 200
        r = post(range(3, 6))
        assert r.status_code == 413 and r.json()["limit"] == "--max-run-trace"
        assert len(graph.run_events("r")) == 3
        assert post(range(11)).json()["limit"] == "--max-run-events"
        assert post(range(3, 5)).status_code == 200
        assert len(graph.run_events("r")) == 5


def test_pin_registry_imports_an_older_pins_json(tmp_path: Path) -> None:
    """A pins.json left by an older claimgraph is taken over once (its horizon and live
    pins), then renamed, so upgrading never drops a live run's pin."""
    doc = {
        "horizon": 7,
        "pins": {
            "a1": {"pin_id": "a1", "version": 9, "owner": "run-1", "created_at": 1,
                   "expires_at": 2**62},
            "b2": {"pin_id": "b2", "version": 8, "owner": "run-2", "created_at": 1,
                   "expires_at": 2},
        },
    }  # fmt: skip
    (tmp_path / "pins.json").write_text(json.dumps(doc))
    reg = PinRegistry(tmp_path)
    assert [(p.pin_id, p.version) for p in reg.live()] == [("a1", 9)]
    assert reg.horizon() == 7
    assert not (tmp_path / "pins.json").exists()
    assert (tmp_path / "pins.json.imported").exists()
