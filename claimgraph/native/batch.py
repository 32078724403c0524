"""One native call per batch: decide, encode, fold and stage the projection rows of commands.

:func:`decide_batch` is what the embedded runtime runs per batch of command records. On the
native core it makes one call (:class:`claimgraph.native._rust.Batch`) per run of commands the
native path covers — decode, decide, encode, fold and the rows ``Projector.stage`` would write, byte
for byte — and finishes each command a step declines in Python: the Python governor decides
it, the Python codec encodes it, ``GraphState.evolve`` folds it, ``Projector.stage`` writes its
rows; then the native call resumes with the next command. Without the native module it is that
Python loop alone, the specification. Every hand-back is counted by step and reason in
:data:`claimgraph.native.decide.DECLINED` (``decide``), :data:`~claimgraph.native.decide
.FOLD_DECLINED` (``fold``) and :data:`ROWS_DECLINED` (``rows``). A projection whose row layout
the native rows do not write (:data:`claimgraph.native.IMPLEMENTS` ``layouts``) is staged by
the Python loop, every record counted as ``layout``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Any, Protocol

from claimgraph.core import wire
from claimgraph.core.governor import decide as python_decide
from claimgraph.core.model import Decision
from claimgraph.core.state import Changes, GraphState
from claimgraph.native import IMPLEMENTS, module
from claimgraph.native.codec import native_codecs
from claimgraph.native.decide import (
    DECIDED,
    DECLINED,
    FOLD_DECLINED,
    FOLDED,
    _fold,
    _hot,
    _precheck,
    revision,
)

__all__ = ["REPLAYED", "ROWS_DECLINED", "STAGED", "Record", "Stager", "decide_batch", "fold_batch"]

STAGED: Counter[str] = Counter()  # command type → rows staged natively
ROWS_DECLINED: Counter[str] = Counter()  # why the native rows handed a decision to Python
REPLAYED: Counter[str] = Counter()  # logged decisions folded: "native", or why Python did


class Record(Protocol):
    """A command log record (``claimgraph.logs.base.LogRecord``)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def value(self) -> bytes: ...


class Layout(Protocol):
    """The store a projector writes (``claimgraph.projections.projector.ProjectionStore``)."""

    def layout(self) -> int: ...


class Stager(Protocol):
    """What the batch call stages rows into (``claimgraph.projections.projector.Projector``)."""

    index_inputs: bool
    _staged_records: dict[str, tuple[bytes, dict[str, Any], str]]

    @property
    def store(self) -> Layout: ...
    def stage(self, version: int, d: Decision, ch: Changes) -> None: ...
    def staged_natively(self, count: int, last_version: int) -> None: ...


_LAYOUTS = frozenset(IMPLEMENTS.get("layouts", ()))  # the row layouts the native rows write


def _rows_native(projector: Stager | None, n: int) -> bool:
    """Whether the native rows write the layout of ``projector``'s store (else Python's)."""
    if projector is None or projector.store.layout() in _LAYOUTS:
        return True
    ROWS_DECLINED["layout"] += n
    return False


@cache
def _batch() -> Any:
    nc = native_codecs()
    if module is None or nc is None:
        return None
    readers = {h: c for h, (record, c) in nc.readers.items() if record == "decision"}
    return module.Batch(_hot(), _fold(), nc.writers["decision"], readers)


def _python(
    state: GraphState,
    rec: Record,
    version: int,
    projector: Stager | None,
    partition: int | None,
    limit: int | None,
    operator: str | None = None,
) -> tuple[Decision, bytes] | None:
    """One command by the Python core (None: its decision is longer than ``limit``)."""
    d = python_decide(
        state, rec.value, rec.offset, rec.timestamp, partition=partition, operator=operator
    )
    data = wire.encode_decision(d)
    if limit is not None and len(data) > limit:
        return None
    ch = state.evolve(d, version, data)
    if projector is not None:
        projector.stage(version, d, ch)
    return d, data


def decide_batch(
    state: GraphState,
    records: Sequence[Record],
    version: int,
    projector: Stager | None,
    *,
    partition: int | None = None,
    limit: int | None = None,
    operator: str | None = None,
) -> tuple[list[Decision], list[bytes]]:
    """Decide ``records`` in order at versions ``version, version + 1, ...``, fold each into
    ``state`` and stage its rows in ``projector``; return the decisions and their bytes.

    ``partition``: the Kafka partition deciding (placement is checked, as by ``decide``), and
    ``operator`` the one its ``place`` commands are accepted from (the native path decides no
    ``place``: it hands them to Python with it).
    ``limit``: stop before the first command whose decision takes more bytes, leaving it
    undecided and unfolded (fewer decisions than records are returned); the caller decides
    what to do with it.
    """
    batch = _batch()
    if batch is None or not _rows_native(projector, len(records)):
        out: list[Decision] = []
        encoded: list[bytes] = []
        for rec in records:
            done = _python(state, rec, version, projector, partition, limit, operator)
            if done is None:
                break
            out.append(done[0])
            encoded.append(done[1])
            version += 1
        return out, encoded
    return _native(batch, state, records, version, projector, partition, limit, operator)


def _native(
    batch: Any,
    state: GraphState,
    records: Sequence[Record],
    version: int,
    projector: Any,
    partition: int | None,
    limit: int | None,
    operator: str | None,
) -> tuple[list[Decision], list[bytes]]:
    recs = records if type(records) is list else list(records)
    decisions: list[Decision] = []
    encoded: list[bytes] = []
    i, n = 0, len(recs)
    while i < n:
        why = _precheck(state, None, partition)
        if why is not None:
            DECLINED[why] += 1
            done = _python(state, recs[i], version, projector, partition, limit, operator)
            if done is None:
                break
            decisions.append(done[0])
            encoded.append(done[1])
            i += 1
            version += 1
            continue
        nxt, ds, es, tail = batch.run(state, projector, recs, i, version, revision(state), limit)
        done_n = nxt - i
        if done_n:
            decisions.extend(ds)
            encoded.extend(es)
            for d in ds:
                kind = d["command_type"]
                DECIDED[kind] += 1
                FOLDED[kind] += 1
                if projector is not None:
                    STAGED[kind] += 1
            if projector is not None:
                projector.staged_natively(done_n, version + done_n - 1)
            version += done_n
        i = nxt
        if tail is None:
            continue
        step, why = tail[0], tail[1]
        rec = recs[i]
        if step == "size":
            break  # decided natively, too long: left to the caller, unfolded
        if step == "decide":
            DECLINED[why] += 1
            done = _python(state, rec, version, projector, partition, limit, operator)
            if done is None:
                break
            d, data = done
        else:
            d = tail[2]
            DECIDED[d["command_type"]] += 1
            data = wire.encode_decision(d) if step == "encode" else tail[3]
            if limit is not None and len(data) > limit:
                break
            if step in ("encode", "fold"):
                FOLD_DECLINED[why] += 1
                ch = state.evolve(d, version, data)
            else:
                FOLDED[d["command_type"]] += 1
                ROWS_DECLINED[why] += 1
                ch = tail[4]
            if projector is not None:
                projector.stage(version, d, ch)
        decisions.append(d)
        encoded.append(data)
        i += 1
        version += 1
    return decisions, encoded


def fold_batch(
    state: GraphState, records: Sequence[Record], projector: Stager | None, applied: int
) -> list[Decision]:
    """Fold logged decisions (``value``: the bytes, ``offset``: the version) into ``state``
    and stage the rows of those above ``applied``; return the decisions. One native call per
    run of decisions the native path decodes, folds and stages; Python for the rest."""
    batch = _batch()
    recs = records if type(records) is list else list(records)
    if batch is None or not _rows_native(projector, len(recs)):
        out: list[Decision] = []
        for rec in recs:
            d = wire.decode_decision(rec.value)
            ch = state.evolve(d, rec.offset, rec.value)
            if projector is not None and rec.offset > applied:
                projector.stage(rec.offset, d, ch)
            out.append(d)
        return out
    return _native_fold(batch, state, recs, projector, applied)


def _native_fold(
    batch: Any, state: GraphState, recs: list[Any], projector: Any, applied: int
) -> list[Decision]:
    decisions: list[Decision] = []
    i, n = 0, len(recs)
    while i < n:
        nxt, ds, staged, tail = batch.fold(state, projector, recs, i, applied)
        decisions.extend(ds)
        REPLAYED["native"] += nxt - i
        if staged:
            projector.staged_natively(staged, recs[nxt - 1].offset)
        i = nxt
        if tail is None:
            continue
        rec = recs[i]
        step, why = tail[0], tail[1]
        REPLAYED[f"{step}:{why}"] += 1
        d = wire.decode_decision(rec.value) if step == "decode" else tail[2]
        if step == "rows":
            ROWS_DECLINED[why] += 1
            ch = tail[3]
        else:
            ch = state.evolve(d, rec.offset, rec.value)
        if projector is not None and rec.offset > applied:
            projector.stage(rec.offset, d, ch)
        decisions.append(d)
        i += 1
    return decisions
