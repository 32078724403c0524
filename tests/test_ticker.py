"""serve's ticker writes a tick only when a quarantine deadline is due, never on an idle graph."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import claimgraph
from claimgraph.service.graph import Graph
from claimgraph.service.ticker import DeadlineTicker, next_deadline
from tests.conftest import SCHEMA
from tests.test_governance import MIN, REFUNDS, Clock, _open, _refund


def _ticks(g: Graph) -> list[int]:
    return [v for v, d in g.decisions(0, 10_000) if d["command_type"] == "tick"]


@contextmanager
def _running(ticker: DeadlineTicker) -> Iterator[DeadlineTicker]:
    stop = threading.Event()
    t = threading.Thread(target=ticker.run, args=(stop,), daemon=True)
    t.start()
    try:
        yield ticker
    finally:
        stop.set()
        t.join(30)


def test_an_idle_graph_gets_no_ticks(tmp_path: Path) -> None:
    """Over many observed wakeups, a graph with no deadline to meet (an open conflict whose
    edge type has none included) gets no tick at all."""
    with claimgraph.open(tmp_path / "g", create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        g.assert_("lead_of", "team:a", "service:s", agent="x", task="org")
        r = g.assert_("lead_of", "team:b", "service:s", agent="y", task="org")
        assert r.kind == "quarantined"  # open, but lead_of declares no deadline
        ticker = DeadlineTicker(g, interval=0.005)
        with _running(ticker):
            assert ticker.wait_wakeups(50, 60)
        assert ticker.due is None
        assert (ticker.ticks, _ticks(g), g.head()) == (0, [], r.version)


def test_a_due_deadline_gets_exactly_the_tick_that_fires_it(tmp_path: Path) -> None:
    """Before the deadline: no tick over many wakeups. Once the log's clock passes it: one
    tick, which exits the conflict; then none again."""
    clock = Clock()
    g = _open(tmp_path, REFUNDS, clock)
    try:
        _refund(g, "R-1", "REJECT", "risk-control-agent", 0.8)
        a = _refund(g, "R-1", "APPROVE", "experience-agent", 0.8)
        conflict = g.conflict(a.decision["conflict_id"] or "")
        assert conflict is not None
        assert next_deadline(g, g.head()) == conflict["opened_time"] + 15 * MIN
        ticker = DeadlineTicker(g, interval=0.005, clock=clock)
        with _running(ticker):
            assert ticker.wait_wakeups(50, 60)
            assert _ticks(g) == []
            clock.now += 15 * MIN  # the refund's 15m deadline passes
            head = g.wait_for(a.version + 1, 60)  # the ticker's tick lands
            seen = ticker.wakeups
            assert ticker.wait_wakeups(seen + 50, 60)
        [v] = _ticks(g)
        assert v == head == g.head() == a.version + 1
        [d] = [d for ver, d in g.decisions(v, 1)]
        [x] = d["exits"]
        assert (x["conflict_id"], x["trigger"], x["action"]) == (
            a.decision["conflict_id"], "deadline", "fallback",
        )  # fmt: skip
        assert ticker.due is None and ticker.ticks == 1
    finally:
        g.close()


def test_a_log_clock_behind_the_tickers_gets_one_tick_per_interval(tmp_path: Path) -> None:
    """If the log's time lags the ticker's clock, the tick it wrote exits nothing and the
    deadline still looks due: it waits an interval before the next tick, never loops."""
    clock = Clock()
    g = _open(tmp_path, REFUNDS, clock)
    try:
        _refund(g, "R-1", "REJECT", "risk-control-agent", 0.8)
        _refund(g, "R-1", "APPROVE", "experience-agent", 0.8)
        ahead = DeadlineTicker(g, interval=3600, clock=lambda: clock.now + 20 * MIN)
        receipts = [ahead.step() for _ in range(5)]
        assert receipts[0] is not None and receipts[0].decision["exits"] == []
        assert receipts[1:] == [None] * 4
        assert len(_ticks(g)) == 1 and ahead.due is not None
    finally:
        g.close()
