"""Retention: GC by version keeps every read at or above the horizon and refuses reads below it;
pins hold the horizon back; the horizon by age comes from the log's times."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import claimgraph
from claimgraph.errors import ConfigError, NotFoundError, VersionPruned
from claimgraph.projections.retention import (
    PinRegistry,
    gc_graph,
    horizon_of,
    parse_age,
    version_at_time,
)
from claimgraph.projections.rows import HISTORY, META
from claimgraph.service.audit import audit, digest_at
from claimgraph.service.graph import Graph, open_graph
from tests.conftest import SCHEMA
from tests.test_properties import examples, graph_after

from .strategies import Stream, streams


def reads_at(graph: Graph, stream: Stream, v: int) -> dict[str, Any]:
    """Every read the stream can ask at version ``v``, as plain data."""
    r = graph.reader
    out: dict[str, Any] = {"digest": digest_at(r, v), "schema": r.schema_row(v)}
    for e in stream.edges:
        s, o = (e[1], e[2]), (e[3], e[4])
        out[f"edge {e}"] = r.edge(e[0], s, o, v, halt=False).as_dict()
        out[f"history {e}"] = r.history(e[0], s, o, v)
    for node in stream.nodes:
        for direction in ("out", "in"):
            for et in (None, *stream.edge_types):
                got = r.neighbors(node, v, edge_type=et, direction=direction, halt=False)
                out[f"nb {node} {direction} {et}"] = [n.as_dict() for n in got]
                if et is not None:
                    slot = r.slot(et, node, v, direction, halt=False)
                    out[f"slot {node} {direction} {et}"] = slot.as_dict()
    for c in stream.commands:
        if c is not None and c.get("command_id"):
            out[f"claim {c['command_id']}"] = r.claim(c["command_id"], v)
            out[f"conflict {c['command_id']}"] = r.conflict("cf:" + c["command_id"], v)
    out["quarantine"] = r.quarantine(v, include_closed=True)
    return out


def all_keys(db: Any) -> list[bytes]:
    """Every key of a RocksDB, in order."""
    it = db.iter()
    it.seek_to_first()
    out = []
    while it.valid():
        out.append(it.key())
        it.next()
    return out


def entity_rows_below(graph: Graph, horizon: int) -> dict[bytes, int]:
    """For each versioned entity, how many of its rows are below ``horizon``."""
    from claimgraph.projections.rows import version_of

    counts: dict[bytes, int] = {}
    for k in all_keys(graph.projection.db):
        if k[:1] in (META, HISTORY, b"I"):
            continue
        if version_of(k) < horizon:
            counts[k[:-8]] = counts.get(k[:-8], 0) + 1
    return counts


def raises_pruned(read: Callable[[], object], horizon: int) -> bool:
    try:
        read()
    except VersionPruned as exc:
        return exc.horizon == horizon and str(horizon) in str(exc)
    return False


@examples(60)
@given(streams(), st.integers(0, 45), st.lists(st.integers(0, 45), max_size=3))
def test_gc_keeps_every_read_at_or_above_the_horizon(
    stream: Stream, h: int, extra: list[int]
) -> None:
    """For random logs and horizons: reads at V >= H are identical before and after GC (history
    keeps its entries >= H), reads below H raise VersionPruned, and at most one row per entity
    survives below H."""
    with graph_after(stream, 2048, None) as graph:
        head = graph.head()
        h = min(h, head)
        versions = sorted({min(x, head) for x in extra} | {h, head})
        before = {v: reads_at(graph, stream, v) for v in versions if v >= h}
        rep = gc_graph(graph, horizon=h)
        assert rep.horizon == h == graph.horizon()
        for v, want in before.items():
            for k, val in want.items():
                if k.startswith("history"):
                    val = [e for e in val if e["version"] >= h]
                assert reads_at(graph, stream, v)[k] == val, f"{k} at v{v} after gc to {h}"
        assert all(n == 1 for n in entity_rows_below(graph, h).values())
        if h > 0:
            e = stream.edges[0] if stream.edges else ("t", "a", "b", "c", "d")
            v = h - 1
            r = graph.reader
            assert raises_pruned(lambda: r.edge(e[0], (e[1], e[2]), (e[3], e[4]), v), h)
            assert raises_pruned(lambda: graph.quarantine(at=v), h)
            assert raises_pruned(lambda: r.history(e[0], (e[1], e[2]), (e[3], e[4]), v), h)
            assert raises_pruned(lambda: list(r.rows_at(v)), h)
            assert raises_pruned(lambda: graph.claim_info("c0", at=v), h)


def _busy_graph(tmp_path: Path, n: int = 60) -> Graph:
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    for i in range(n):
        g.assert_(
            "runs_in", "service:api", f"environment:e{i % 3}", agent="release", task="promote"
        )
        g.assert_("depends_on", f"service:s{i % 7}", "service:db", agent="inventory")
    return g


def test_gc_shrinks_the_projection_and_audit_still_passes(tmp_path: Path) -> None:
    """GC deletes rows and history below the horizon; audit compares what is retained."""
    g = _busy_graph(tmp_path)
    try:
        n_before = sum(1 for _ in all_keys(g.projection.db))
        head = g.head()
        edge = ("runs_in", "service:api", "environment:e0")
        before = {v: g.edge(*edge, at=v) for v in range(head - 9, head + 1)}
        rep = gc_graph(g, keep=10)
        assert rep.horizon == head - 9 and rep.deleted > 0
        assert sum(1 for _ in all_keys(g.projection.db)) == n_before + 1 - rep.deleted  # + horizon
        hist = g.history("runs_in", "service:api", "environment:e0")
        assert hist and all(e["version"] >= rep.horizon for e in hist)
        assert {v: g.edge(*edge, at=v) for v in before} == before  # retained versions intact
        with pytest.raises(VersionPruned, match=f"horizon is {rep.horizon}"):
            g.edge("runs_in", "service:api", "environment:e0", at=rep.horizon - 1)
        rep2 = audit(g)
        assert rep2.head == head and all(v >= rep.horizon for v in rep2.digests)
        # the horizon never moves back, and writes continue above it
        assert gc_graph(g, horizon=1).horizon == rep.horizon
        g.assert_("runs_in", "service:api", "environment:e9", agent="release", task="promote")
        assert g.edge("runs_in", "service:api", "environment:e9").state == "present"
    finally:
        g.close()


def test_a_pinned_run_keeps_its_version_through_gc(tmp_path: Path) -> None:
    """A live pin holds the horizon at its version; once unpinned (or expired) GC passes it."""
    g = _busy_graph(tmp_path)
    try:
        pinned = 20
        want = g.neighbors("service:s3", at=pinned, direction="out")
        pin = g.pins.pin(pinned, owner="run-42", lease=600)
        rep = gc_graph(g, keep=5)
        assert rep.horizon == pinned and rep.held_by == pin
        assert g.neighbors("service:s3", at=pinned, direction="out") == want
        with pytest.raises(VersionPruned):
            g.pins.pin(pinned - 1, owner="late-run")  # already below the horizon
        assert g.pins.unpin(pin.pin_id)
        rep = gc_graph(g, keep=5)
        assert rep.horizon == g.head() - 4 and rep.held_by is None
        with pytest.raises(VersionPruned):
            g.neighbors("service:s3", at=pinned, direction="out")
    finally:
        g.close()


def test_a_run_pins_its_version_until_it_ends(tmp_path: Path) -> None:
    """graph.run() takes the retention pin itself: GC stops at the run's version while the run
    lives, its reads there stay exact, and the pin goes when the run ends."""
    g = _busy_graph(tmp_path)
    try:
        with g.run(agent="auditor", task="check", lease=600) as run:
            assert run.pin is not None and run.pin.version == run.version == g.head()
            want = run.neighbors("service:s3")
            for i in range(30):  # the graph moves on
                g.assert_("depends_on", f"service:s{i % 7}", f"service:x{i}", agent="tracer")
            rep = gc_graph(g, keep=1)
            assert rep.horizon == run.version and rep.held_by == run.pin
            assert run.neighbors("service:s3") == want
        assert g.pins.live() == []
        assert gc_graph(g, keep=1).horizon == g.head()
    finally:
        g.close()


def test_pins_expire_with_their_lease(tmp_path: Path) -> None:
    """A pin whose lease ran out no longer holds retention back (a crashed run)."""
    now = [1_000_000]
    reg = PinRegistry(tmp_path, clock=lambda: now[0])
    p = reg.pin(5, owner="run-1", lease=10)
    assert reg.live() == [p]
    assert reg.advance(50) == (5, p)
    now[0] += 9_999
    assert reg.renew(p.pin_id, 10).expires_at == now[0] + 10_000
    now[0] += 10_001
    assert reg.live() == []
    assert reg.advance(50) == (50, None)
    with pytest.raises(NotFoundError, match="no live pin"):
        reg.renew(p.pin_id, 10)


def test_horizon_by_age_uses_the_log_times(tmp_path: Path) -> None:
    """--keep-age picks the first version appended at or after now - age."""
    g = _busy_graph(tmp_path, n=5)
    try:
        times = [r.timestamp for r in g.logs.decisions.read(0, 100)]
        cut = times[6]
        rep = gc_graph(g, keep_age_ms=1000, now_ms=cut + 1000)
        assert rep.horizon == min(v for v, t in enumerate(times) if t >= cut)
        assert horizon_of(g.projection.db) == rep.horizon
    finally:
        g.close()
    assert version_at_time(lambda v: [1, 1, 5, 9][v], 4, 5) == 2
    assert version_at_time(lambda v: [1, 1, 5, 9][v], 4, 10) == 4
    assert parse_age("30d") == 30 * 86_400_000
    with pytest.raises(ConfigError, match="not an age"):
        parse_age("30 days")


def test_bad_horizons_are_clear_errors(tmp_path: Path) -> None:
    """A horizon above head, a negative one, or none at all is a ConfigError, not a GC."""
    g = _busy_graph(tmp_path, n=3)
    try:
        with pytest.raises(ConfigError, match="above head"):
            gc_graph(g, horizon=g.head() + 1)
        with pytest.raises(ConfigError, match="exactly one"):
            gc_graph(g)
        with pytest.raises(ConfigError, match="at least 1"):
            gc_graph(g, keep=0)
        assert g.horizon() == 0
    finally:
        g.close()


def test_horizon_survives_reopen(tmp_path: Path) -> None:
    """The horizon is stored in the projection: a reopened graph still refuses pruned reads."""
    g = _busy_graph(tmp_path, n=10)
    h = gc_graph(g, keep=3).horizon
    g.close()
    g = open_graph(tmp_path / "g")
    try:
        assert g.horizon() == h
        with pytest.raises(VersionPruned):
            g.quarantine(at=h - 1)
    finally:
        g.close()


def test_retired_claims_stay_readable_at_every_retained_version(tmp_path: Path) -> None:
    """A claim retracted before the horizon still reads as retired at the horizon and after,
    and an edge retired after the horizon reads present before its retirement."""
    g = _busy_graph(tmp_path, n=0)
    try:
        old = g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        g.retract(old.command_id, agent="inventory")
        late = g.assert_("depends_on", "service:a", "service:c", agent="inventory")
        for i in range(10):
            g.assert_("depends_on", f"service:x{i}", "service:y", agent="tracer")
        h = gc_graph(g, horizon=late.version + 2).horizon
        retired = g.retract(late.command_id, agent="inventory")
        for v in (h, retired.version - 1, retired.version):
            assert g.claim_info(old.command_id, at=v)["status"] == "retired"
            assert g.edge("depends_on", "service:a", "service:b", at=v).state == "absent"
        assert g.edge("depends_on", "service:a", "service:c", at=h).state == "present"
        assert g.claim_info(late.command_id, at=retired.version)["status"] == "retired"
        assert g.edge("depends_on", "service:a", "service:c").state == "absent"
    finally:
        g.close()
