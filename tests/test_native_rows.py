"""The native batch call (decide, fold and projection rows) against its specification.

Each command stream is decided twice into real RocksDB projections: once by the Python core
command by command (``governor.decide``, the Python codec, ``GraphState.evolve``,
``Projector.stage``), once by :func:`claimgraph.native.batch.decide_batch` in batches of
random sizes (one native call per run of covered commands, Python for the rest). The
decisions' bytes, the folded states' digests and every projection row — key and value, byte
for byte — must be equal. Under ``CI=true`` these tests fail if the native module is not
loaded.
"""

from __future__ import annotations

import math
import struct
import tempfile
from contextlib import nullcontext
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from claimgraph.core.governor import decide as python_decide
from claimgraph.core.snapshot import state_digest
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_command, encode_decision
from claimgraph.logs.base import LogRecord
from claimgraph.native import batch as nb
from claimgraph.native import decide as native
from claimgraph.native import module
from claimgraph.projections.projector import ProjectionStore, Projector
from claimgraph.projections.rows import version_of
from tests.native_support import require_native, tiny_spill
from tests.strategies import GRAPH, T0, Stream, stream_of, streams
from tests.test_native_core import hot_streams

pytestmark = pytest.mark.usefixtures("_native")


@pytest.fixture
def _native() -> None:
    require_native()


def _rows(store: ProjectionStore) -> list[tuple[bytes, bytes]]:
    out = []
    it = store.db.iter()
    it.seek_to_first()
    while it.valid():
        out.append((bytes(it.key()), bytes(it.value())))
        it.next()
    return out


def run_both(records: list[bytes], times: list[int], cuts: list[int]) -> None:
    """Decide ``records`` by both paths, flushing after each batch ``cuts`` delimits."""
    recs = [LogRecord(i, t, r) for i, (r, t) in enumerate(zip(records, times, strict=True))]
    bounds = sorted({0, len(recs), *(c % (len(recs) + 1) for c in cuts)})
    with tempfile.TemporaryDirectory() as tmp:
        stores = [ProjectionStore(Path(tmp) / n, create=True) for n in ("py", "nat", "re")]
        try:
            py, nat, re = (
                GraphState(GRAPH, native_tables=False),
                GraphState(GRAPH),
                GraphState(GRAPH),
            )
            ppy, pnat, pre = (Projector(s, g) for s, g in zip(stores, (py, nat, re), strict=True))
            logged: list[LogRecord] = []
            for a, b in pairwise(bounds):
                want = []
                for rec in recs[a:b]:
                    d = python_decide(py, rec.value, rec.offset, rec.timestamp)
                    data = encode_decision(d)
                    ppy.stage(rec.offset, d, py.evolve(d, rec.offset, data))
                    want.append(data)
                ds, got = nb.decide_batch(nat, recs[a:b], a, pnat)
                assert got == want, f"decisions of {a}..{b} differ"
                assert [encode_decision(d) for d in ds] == want
                logged += [LogRecord(a + i, 0, x) for i, x in enumerate(want)]
                ppy.flush()
                pnat.flush()
                assert state_digest(nat) == state_digest(py)
                assert stores[1].applied() == stores[0].applied() == b - 1
            assert _rows(stores[1]) == _rows(stores[0])
            # the replay of the logged decisions (restart, audit rebuild, Kafka projector),
            # in the same batches, the first batch's rows already applied
            applied = bounds[1] - 1 if len(bounds) > 2 else -1
            if applied >= 0:
                nb.fold_batch(re, logged[: bounds[1]], None, len(logged))
                ppy_rows = dict(_rows(stores[0]))
                for k, v in ppy_rows.items():  # the rows the first batch wrote
                    if k[:1] != b"M" and version_of(k, v) <= applied:
                        stores[2].db.put(k, v)
            for a, b in pairwise(bounds):
                if b - 1 <= applied:
                    continue
                ds = nb.fold_batch(re, logged[a:b], pre, applied)
                assert [encode_decision(d) for d in ds] == [r.value for r in logged[a:b]]
                pre.flush()
            assert state_digest(re) == state_digest(py)
            assert _rows(stores[2]) == _rows(stores[0])
        finally:
            for s in stores:
                s.close()
    assert native.DECLINED["error"] == 0 and nb.ROWS_DECLINED["error"] == 0


def test_the_batch_call_is_native_on_ci() -> None:
    assert nb._batch() is not None


_CUTS = st.lists(st.integers(0, 60), max_size=4)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), _CUTS)
def test_mixed_streams_stage_the_same_rows(s: Stream, cuts: list[int]) -> None:
    """The strategies' streams: conflicts, grants, resolves, garbage (mostly handed back)."""
    run_both(list(s.records), list(s.times), cuts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), _CUTS)
def test_mixed_streams_stage_the_same_rows_with_a_tiny_spill(s: Stream, cuts: list[int]) -> None:
    """The same, the native tables keeping 2 claims in memory and the rest in the spill."""
    with tiny_spill():
        run_both(list(s.records), list(s.times), cuts)


def _erase(claim_id: str, i: int) -> bytes:
    cmd: Any = {"type": "erase", "command_id": f"e{i}", "graph": GRAPH, "agent": "admin",
                "task": "", "claim_id": claim_id, "reason": "PR-1"}  # fmt: skip
    return encode_command(cmd)


_ERASES = st.lists(st.tuples(st.integers(1, 60), st.sampled_from(("c0", "c1", "ç2"))), max_size=2)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hot_streams(), _CUTS, _ERASES)
def test_hot_streams_stage_the_same_rows(
    stream: tuple[list[bytes], list[int]], cuts: list[int], erases: list[tuple[int, str]]
) -> None:
    """What ingest sees, mostly native end to end; erases within a batch scrub the claim rows
    the native call staged earlier in it."""
    records, times = stream
    for n, (at, claim) in enumerate(erases):
        at = min(at, len(records))
        records.insert(at, _erase(claim, n))
        times.insert(at, times[at - 1])
    with tiny_spill() if len(cuts) % 2 else nullcontext():  # half the examples spill
        run_both(records, times, cuts)


def test_a_plain_stream_is_staged_natively() -> None:
    """New claims, updates and retracts of one's own claims: every command but the schema's
    publish is decided, folded and staged in the native call, in one call per batch."""
    from tests.test_native_core import _hot_schema

    commands: list[dict[str, Any]] = []
    for i in range(60):
        commands.append({"type": "claim", "command_id": f"c{i}", "graph": GRAPH, "agent": "w1",
                         "task": "t1", "run_id": None, "edge_type": "runs_in",
                         "subject_type": "svc", "subject_id": f"s{i % 20}", "object_type": "env",
                         "object_id": f"e{i % 3}", "polarity": "assert", "confidence": 0.25,
                         "evidence": ["log#1"], "reasoning": "seen", "asserted_at": T0 + i,
                         "based_on_version": None, "properties": {"z": "1", "a": "2"}})  # fmt: skip
    retract = {"type": "retract", "command_id": "r1", "graph": GRAPH, "agent": "w1",
               "task": "t1", "run_id": None, "claim_id": "c59", "reason": "gone"}  # fmt: skip
    commands.append(retract)
    s = stream_of(_hot_schema("many-to-one", "last-write-wins-with-timestamp"), commands)
    native.reset_counts()
    nb.STAGED.clear()
    nb.ROWS_DECLINED.clear()
    nb.REPLAYED.clear()
    run_both(list(s.records), list(s.times), [1, 31])
    assert nb.REPLAYED == {"native": 61, "fold:kind": 1}, nb.REPLAYED
    assert native.DECLINED == {"no_schema": 1}
    assert nb.STAGED == {"claim": 60, "retract": 1}
    assert not nb.ROWS_DECLINED and not native.FOLD_DECLINED


def test_row_json_is_pydantic_s() -> None:
    """The native JSON writer writes what ``pydantic_core.to_json`` writes."""
    assert module is not None
    values: list[Any] = [1e-7, 1e16, 1e15, 1e21, 1e-4, 1e-5, 1.5e-5, 1e-6, 123.0, -0.0, 0.0,
                         5e-324, 1.7976931348623157e308, 0.1 + 0.2, 2**63, -(2**63), 2**64 - 1,
                         "a\x00\x1f\x7f\u2028é\"\\/\b\t\n\f\r", [1, (2, None)],
                         {"a": True, "b": False, "ñ": {}}]  # fmt: skip
    for i in range(20000):
        x = struct.unpack("<d", struct.pack("<Q", (i * 0x9E3779B97F4A7C15) % 2**64))[0]
        if math.isfinite(x):
            values.append(x)
        values.append((i % 997) / 997 * 10.0 ** (i % 30 - 10))
    for v in values:
        assert module.row_json(v) == to_json(v), repr(v)
    for v in (float("nan"), float("inf"), 2**64, b"x", {1: 2}, object()):
        assert module.row_json(v) is None  # declined: Python's dumps writes (or refuses) it


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hot_streams(), st.integers(700, 1400))
def test_the_batch_stops_before_a_decision_too_long(
    stream: tuple[list[bytes], list[int]], limit: int
) -> None:
    """``limit`` (the Kafka governor's record size): the batch stops before the first command
    whose decision is longer, deciding and folding exactly what Python does before it."""
    records, times = stream
    recs = [LogRecord(i, t, r) for i, (r, t) in enumerate(zip(records, times, strict=True))]
    py, nat = GraphState(GRAPH, native_tables=False), GraphState(GRAPH)
    want = []
    for rec in recs:
        d = python_decide(py, rec.value, rec.offset, rec.timestamp)
        data = encode_decision(d)
        if len(data) > limit:
            break
        py.evolve(d, rec.offset, data)
        want.append(data)
    _, got = nb.decide_batch(nat, recs, 0, None, limit=limit)
    assert got == want
    assert state_digest(nat) == state_digest(py)
