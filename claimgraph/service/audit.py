"""verify (re-run the governor) and audit (re-project the decisions log) for the embedded graph.

* **verify**: decide every command of the commands log again, from an empty state, and check
  that each decision's bytes equal the decisions log's, one decision per command (a decision
  logged with an older version of its schema is compared in that version's bytes).
* **audit**: fold the decisions log into a fresh projection and compare it with the live one,
  row by row (every version at once) and as digests of the whole graph at head and at
  sampled versions. Any difference names the first version at which the two disagree.

Both report progress through a ``progress(done, total)`` callback and raise
:class:`IntegrityError` on a difference. Both can check a range of versions: verify folds the
decisions before the range (from the newest checkpoint below it, if any) and re-decides the
range; audit re-projects up to the range's end and compares the rows written inside the range
plus the digest of the whole graph at its start, which together fix every read in the range
(``audit --at V`` is the range [V, V]). A projection GC'd to a horizon is compared with a
re-projection GC'd to the same horizon. Memory stays bounded by the folded state: logs are
read in batches, the re-projection goes to a scratch RocksDB on disk, and comparisons stream.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocksdict import Rdict

from claimgraph.core.governor import decide
from claimgraph.core.model import Progress
from claimgraph.core.state import GraphState
from claimgraph.core.wire import decode_decision, encode_decision, same_decision
from claimgraph.errors import ConfigError, DecodeError, IntegrityError, VersionPruned
from claimgraph.logs.rocks import estimated_keys, rocksdb_errors, valid, write
from claimgraph.projections.damage import projection_place
from claimgraph.projections.projector import ProjectionStore, Projector
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.retention import catch_up, collect, horizon_of
from claimgraph.projections.rows import META, version_of
from claimgraph.service.chain import check_chain
from claimgraph.service.graph import Graph

if TYPE_CHECKING:
    from claimgraph.service.attached import AttachedGraph
from claimgraph.streams.embedded import GOVERNOR_POSITION, fold_decisions

__all__ = ["AuditReport", "VerifyReport", "audit", "digest_at", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What verify checked."""

    commands: int
    decisions: int
    start: int = 0  # the versions re-decided: [start, start + decisions - 1]

    def as_dict(self) -> dict[str, int | bool]:
        return {
            "ok": True,
            "start": self.start,
            "commands": self.commands,
            "decisions": self.decisions,
        }


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What audit compared."""

    head: int
    rows: int
    digests: dict[int, str] = field(default_factory=dict)
    start: int = 0  # the versions compared: [start, head]
    horizon: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": True,
            "start": self.start,
            "head": self.head,
            "horizon": self.horizon,
            "rows": self.rows,
            "digests": {str(k): v for k, v in self.digests.items()},
        }


def _range(lo: int | None, hi: int | None, last: int, horizon: int = 0) -> tuple[int, int]:
    a = horizon if lo is None else lo
    b = last if hi is None else hi
    if a < 0 or b < a:
        raise ConfigError(f"the version range [{a}, {b}] is empty")
    if b > last:
        raise ConfigError(f"version {b} is above head v{last}")
    if a < horizon:
        raise VersionPruned(a, horizon)
    return a, b


def _state_before(
    graph: Graph | AttachedGraph, version: int, progress: Progress | None
) -> GraphState:
    """The folded state just before ``version``: newest checkpoint below it, then the log."""
    from claimgraph.projections.checkpoints import resume

    state, start = GraphState(graph.name), 0
    if version > 0:

        def record_at(v: int) -> bytes | None:
            rec = graph.logs.decisions.get(v)
            return rec.value if rec is not None else None

        found = resume(graph.path / "checkpoints", graph.name, version - 1, record_at)
        if found is not None:
            state, start = found[1], found[0].version + 1
        fold_decisions(graph.logs, state, None, upto=version - 1, start=start, progress=progress)
    return state


def verify(
    graph: Graph | AttachedGraph,
    progress: Progress | None = None,
    batch: int = 4096,
    *,
    start: int | None = None,
    end: int | None = None,
) -> VerifyReport:
    """Re-run the governor over the commands log; raise IntegrityError on any difference.

    With ``start``/``end``, only the decisions at versions [start, end] are re-decided, from
    the state folded from the decisions before ``start``.
    """
    with graph._lock:
        logs = graph.logs
        n_decisions = logs.decisions.end()
        whole = start is None and end is None
        lo, hi = _range(start or 0, end, n_decisions - 1) if n_decisions else (0, -1)
        check_chain(graph, start=lo, upto=hi)  # before anything else: the raw logs
        state = _state_before(graph, lo, None)
        if lo <= hi:
            first = logs.decisions.get(lo)
            assert first is not None
            head_of_range = decode_decision(first.value)
            pos = head_of_range["input_offset"]
            if head_of_range["rules"] >= 2:  # the log before the range is taken as given
                state.chain = bytes.fromhex(head_of_range["prev_hash"])
        else:
            pos = 0
        first_pos = pos
        total = graph.logs.position(GOVERNOR_POSITION) if whole else pos + hi - lo + 1
        version = lo
        n_commands = 0
        while pos < total:
            want = min(batch, total - pos)
            commands = logs.commands.read(pos, want)
            if not commands:
                break
            decisions = logs.decisions.read(version, len(commands))
            for i, rec in enumerate(commands):
                if i >= len(decisions):
                    raise IntegrityError(
                        f"command at offset {rec.offset} has no decision "
                        f"(the decisions log ends at version {version - 1})",
                        version,
                    )
                logged = decisions[i]
                rules = decode_decision(logged.value)["rules"]  # re-decided under its revision
                d = decide(state, rec.value, rec.offset, rec.timestamp, rules=rules)
                data = encode_decision(d)
                if logged.value != data and not same_decision(logged.value, d):
                    raise IntegrityError(_describe(version, logged.value, data), version)
                state.evolve(d, version, logged.value)
                version += 1
                n_commands += 1
            pos = commands[-1].offset + 1
            if progress is not None:
                progress(pos - first_pos, total - first_pos)
        if whole and n_decisions != version:
            raise IntegrityError(
                f"the decisions log has {n_decisions} decisions for {version} decided commands",
                version,
            )
        return VerifyReport(commands=n_commands, decisions=version - lo, start=lo)


def _describe(version: int, logged: bytes, replayed: bytes) -> str:
    try:
        a, b = decode_decision(logged), decode_decision(replayed)
        fields = [k for k in b if a.get(k) != b.get(k)]
        what = f" (fields differ: {', '.join(fields)})" if fields else ""
    except DecodeError:
        what = " (the logged record does not decode)"
    return f"decision at version {version} differs from the governor's replay{what}"


def digest_at(reader: ProjectionReader, at: int) -> str:
    """SHA-256 over every entity's row as of ``at``: a digest of the whole graph then.

    For each entity of the families A, B, C, E, K, R, S, Y in key order (``reader.rows_at``):
    ``u32_be(len(k)) ‖ k ‖ u32_be(len(v)) ‖ v`` with ``k`` = family ‖ entity and ``v`` its
    newest row at or below ``at``; a claim's ``v`` (K) is its status token ‖ u64_be(since),
    its record is the R entity. So two projections with the same digest at ``at`` answer
    every read as of ``at`` alike (history, the H rows, is compared row by row by audit).
    Digests are of one projection layout: layout 2's differ from layout 1's."""
    h = hashlib.sha256()
    for k, v in reader.rows_at(at):
        h.update(len(k).to_bytes(4, "big"))
        h.update(k)
        h.update(len(v).to_bytes(4, "big"))
        h.update(v)
    return h.hexdigest()


def _compare_rows(
    live: Rdict, fresh: Rdict, upto: int, lo: int = 0, progress: Progress | None = None
) -> tuple[int, int | None]:
    """(rows compared, first differing version or None) over rows with version in [lo, upto]."""
    total = 0
    if progress is not None:
        total = estimated_keys(live)
    a, b = live.iter(), fresh.iter()
    a.seek_to_first()
    b.seek_to_first()
    places = {id(a): projection_place(live), id(b): projection_place(fresh)}
    first: int | None = None
    rows = 0

    def note(key: bytes, value: bytes) -> None:
        nonlocal first
        v = version_of(key, value)
        if first is None or v < first:
            first = v

    def skip(it: Any) -> None:
        while valid(it, places[id(it)], "comparing with a re-projection"):
            if it.key()[:1] != META:
                v = version_of(it.key(), it.value())
                if lo <= v <= upto:
                    return
            it.next()

    skip(a)
    skip(b)
    while a.valid() or b.valid():  # skip() checked the status of whichever one ended
        ka = a.key() if a.valid() else None
        kb = b.key() if b.valid() else None
        rows += 1
        if ka is not None and (kb is None or ka < kb):
            note(ka, a.value())
            a.next()
        elif kb is not None and (ka is None or kb < ka):
            note(kb, b.value())
            b.next()
        else:
            assert ka is not None
            if a.value() != b.value():
                note(ka, a.value())
            a.next()
            b.next()
        skip(a)
        skip(b)
        if progress is not None and rows % 100_000 == 0:
            progress(rows, max(total, rows))
    return rows, first


def _first_entity_difference(live: ProjectionReader, fresh: ProjectionReader, at: int) -> str:
    """The first entity whose row as of ``at`` differs (streams both; for the error message)."""
    a, b = live.rows_at(at), fresh.rows_at(at)
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if x is None or (y is not None and y[0] < x[0]):
            assert y is not None
            return f"{y[0]!r} is missing from the live projection"
        if y is None or x[0] < y[0]:
            return f"{x[0]!r} is not in the re-projection"
        if x[1] != y[1]:
            return f"{x[0]!r} differs"
        x, y = next(a, None), next(b, None)
    return "no entity differs"


def audit(
    graph: Graph | AttachedGraph,
    progress: Progress | None = None,
    samples: int = 3,
    *,
    start: int | None = None,
    end: int | None = None,
) -> AuditReport:
    """Re-project the decisions log and compare with the live projection.

    By default every retained version is compared ([horizon, head]); ``start``/``end``
    narrow it to a range, and ``start == end == V`` compares the one version V.
    """
    with graph._lock:
        horizon = graph.horizon()
        head = graph.head()
        lo, hi = _range(start, end, head, horizon) if head >= 0 else (0, -1)
        scratch = Path(tempfile.mkdtemp(prefix="audit-", dir=graph.path))
        try:
            fresh = ProjectionStore(scratch / "projection", create=True)
            try:
                state = GraphState(graph.name)
                fold_decisions(
                    graph.logs, state, Projector(fresh, state), upto=hi, progress=progress
                )
                if hi < head:  # erasures after the range reach back into it: apply them too
                    _apply_erasures(graph.projection.db, fresh.db, hi)
                if horizon > 0:
                    collect(fresh.db, horizon, compact=False)  # prune it the same way
                live_reader, fresh_reader = graph.reader, ProjectionReader(fresh.db)
                digests: dict[int, str] = {}
                if hi >= 0:
                    d_live, d_fresh = digest_at(live_reader, lo), digest_at(fresh_reader, lo)
                    if d_live != d_fresh:
                        what = _first_entity_difference(live_reader, fresh_reader, lo)
                        raise IntegrityError(f"graph digest differs at version {lo}: {what}", lo)
                    digests[lo] = d_live
                rows, first = _compare_rows(graph.projection.db, fresh.db, hi, lo, progress)
                if first is not None:
                    raise IntegrityError(
                        f"the live projection differs from a re-projection of "
                        f"the decisions log, first at version {first}",
                        first,
                    )
                for v in _sample(lo, hi, samples):
                    d_live, d_fresh = digest_at(live_reader, v), digest_at(fresh_reader, v)
                    if d_live != d_fresh:
                        raise IntegrityError(f"graph digest differs at version {v}", v)
                    digests[v] = d_live
                return AuditReport(head=hi, rows=rows, digests=digests, start=lo, horizon=horizon)
            finally:
                fresh.close()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _apply_erasures(live: Rdict, fresh: Rdict, after: int) -> None:
    """Scrub ``fresh`` of the claims the live projection erased at versions after ``after``."""
    from rocksdict import WriteBatch, WriteOptions

    from claimgraph.projections.erasure import ERASED, scrub_claim

    wb = WriteBatch(raw_mode=True)
    it = live.iter()
    it.seek(ERASED)
    while valid(it, projection_place(live), "reading erasures") and it.key()[:1] == ERASED:
        v = version_of(it.key())
        if v > after:
            scrub_claim(fresh, wb, it.key()[1:-9].decode("utf-8"), v)
        it.next()
    write(fresh, wb, WriteOptions(), projection_place(fresh), "re-projecting erasures")


def _sample(lo: int, hi: int, samples: int) -> list[int]:
    if hi < 0:
        return []
    if samples <= 1 or hi == lo:
        return [hi]
    step = (hi - lo) / samples
    return sorted({lo + int(step * i) for i in range(1, samples)} | {hi})


def compare_with_reprojection(cfg: Any, graph: str, path: Path) -> tuple[int, int]:
    """Kafka: re-project ``graph`` into a scratch store and compare it with ``path``.

    The live projection is opened as a secondary instance (its projector may be running).
    Returns (rows compared, head compared up to); raises IntegrityError on a difference.
    """
    from rocksdict import AccessType, Options
    from rocksdict import Rdict as _Rdict

    from claimgraph.streams.kafka_projector import KafkaProjector

    scratch = Path(tempfile.mkdtemp(prefix="claimgraph-audit-"))
    try:
        with rocksdb_errors(f"cannot open {path / 'projection'} as a secondary"):
            live = _Rdict(
                str(path / "projection"),
                Options(raw_mode=True),
                access_type=AccessType.secondary(str(scratch / "secondary")),
            )
        try:
            with rocksdb_errors(f"cannot catch up with {path / 'projection'}"):
                catch_up(live)
            head = ProjectionStore.applied_of(live)
            fresh = KafkaProjector(cfg, graph, scratch / "fresh")
            try:
                while fresh.applied < head:
                    if fresh.step(timeout=1.0) == 0 and fresh.lag() == 0:
                        break
                horizon = horizon_of(live)
                if horizon > 0:
                    collect(fresh.store.db, horizon, compact=False)  # prune it the same way
                rows, first = _compare_rows(live, fresh.store.db, head)
            finally:
                fresh.close()
        finally:
            live.close()
        if first is not None:
            raise IntegrityError(
                f"the projection in {path} differs from a re-projection of "
                f"the decisions log, first at version {first}",
                first,
            )
        return rows, head
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
