"""verify (re-run the governor) and audit (re-project the decisions log) for the embedded graph.

* **verify**: decide every command of the commands log again, from an empty state, and check
  that each decision's bytes equal the decisions log's, one decision per command.
* **audit**: fold the decisions log into a fresh projection and compare it with the live one,
  row by row (every version at once) and as digests of the whole graph at head and at
  sampled versions. Any difference names the first version at which the two disagree.

Both report progress through a ``progress(done, total)`` callback and raise
:class:`IntegrityError` on a difference.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import Rdict

from .errors import IntegrityError
from .fold import GraphState
from .graph import Graph
from .projections.projector import ProjectionStore, Projector
from .projections.reader import ProjectionReader
from .projections.rows import META, version_of
from .streams.embedded import GOVERNOR_POSITION, fold_decisions
from .streams.governor import decide
from .wire import decode_decision, encode_decision

__all__ = ["AuditReport", "VerifyReport", "audit", "digest_at", "verify"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What verify checked."""

    commands: int
    decisions: int

    def as_dict(self) -> dict[str, int | bool]:
        return {"ok": True, "commands": self.commands, "decisions": self.decisions}


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What audit compared."""

    head: int
    rows: int
    digests: dict[int, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": True,
            "head": self.head,
            "rows": self.rows,
            "digests": {str(k): v for k, v in self.digests.items()},
        }


def verify(graph: Graph, progress: Progress | None = None, batch: int = 4096) -> VerifyReport:
    """Re-run the governor over the commands log; raise IntegrityError on any difference."""
    with graph._lock:
        logs = graph.logs
        total = graph.logs.position(GOVERNOR_POSITION)
        n_decisions = logs.decisions.end()
        state = GraphState(graph.name)
        pos = 0
        version = 0
        while pos < total:
            commands = logs.commands.read(pos, min(batch, total - pos))
            if not commands:
                break
            decisions = logs.decisions.read(version, len(commands))
            for i, rec in enumerate(commands):
                d = decide(state, rec.value, rec.offset, rec.timestamp)
                data = encode_decision(d)
                if i >= len(decisions):
                    raise IntegrityError(
                        f"command at offset {rec.offset} has no decision "
                        f"(the decisions log ends at version {version - 1})",
                        version,
                    )
                logged = decisions[i]
                if logged.value != data:
                    raise IntegrityError(_describe(version, logged.value, data), version)
                state.evolve(d, version)
                version += 1
            pos = commands[-1].offset + 1
            if progress is not None:
                progress(pos, total)
        if n_decisions != version:
            raise IntegrityError(
                f"the decisions log has {n_decisions} decisions for {version} decided commands",
                version,
            )
        return VerifyReport(commands=total, decisions=version)


def _describe(version: int, logged: bytes, replayed: bytes) -> str:
    try:
        a, b = decode_decision(logged), decode_decision(replayed)
        fields = [k for k in b if a.get(k) != b.get(k)]
        what = f" (fields differ: {', '.join(fields)})" if fields else ""
    except Exception:
        what = " (the logged record does not decode)"
    return f"decision at version {version} differs from the governor's replay{what}"


def digest_at(reader: ProjectionReader, at: int) -> str:
    """SHA-256 over every entity's row as of ``at``: a digest of the whole graph then."""
    h = hashlib.sha256()
    for k, v in reader.rows_at(at):
        h.update(len(k).to_bytes(4, "big"))
        h.update(k)
        h.update(len(v).to_bytes(4, "big"))
        h.update(v)
    return h.hexdigest()


def _compare_rows(live: Rdict, fresh: Rdict, upto: int) -> tuple[int, int | None]:
    """(rows compared, first differing version or None) over all rows <= ``upto``."""
    a, b = live.iter(), fresh.iter()
    a.seek_to_first()
    b.seek_to_first()
    first: int | None = None
    rows = 0

    def note(key: bytes, value: bytes) -> None:
        nonlocal first
        v = version_of(key, value)
        if first is None or v < first:
            first = v

    def skip(it: Any) -> None:
        while it.valid() and (it.key()[:1] == META or version_of(it.key(), it.value()) > upto):
            it.next()

    skip(a)
    skip(b)
    while a.valid() or b.valid():
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
    return rows, first


def audit(graph: Graph, progress: Progress | None = None, samples: int = 3) -> AuditReport:
    """Re-project the decisions log and compare with the live projection."""
    with graph._lock:
        head = graph.head()
        scratch = Path(tempfile.mkdtemp(prefix="audit-", dir=graph.path))
        try:
            fresh = ProjectionStore(scratch / "projection", create=True)
            try:
                state = GraphState(graph.name)
                fold_decisions(
                    graph.logs, state, Projector(fresh, state), upto=head, progress=progress
                )
                rows, first = _compare_rows(graph.projection.db, fresh.db, head)
                if first is not None:
                    raise IntegrityError(
                        f"the live projection differs from a re-projection of "
                        f"the decisions log, first at version {first}",
                        first,
                    )
                versions = _sample(head, samples)
                live_reader, fresh_reader = graph.reader, ProjectionReader(fresh.db)
                digests: dict[int, str] = {}
                for v in versions:
                    d_live, d_fresh = digest_at(live_reader, v), digest_at(fresh_reader, v)
                    if d_live != d_fresh:
                        raise IntegrityError(f"graph digest differs at version {v}", v)
                    digests[v] = d_live
                return AuditReport(head=head, rows=rows, digests=digests)
            finally:
                fresh.close()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _sample(head: int, samples: int) -> list[int]:
    if head < 0:
        return []
    if samples <= 1 or head == 0:
        return [head]
    step = head / samples
    out = sorted({int(step * i) for i in range(1, samples)} | {head})
    return out


def compare_with_reprojection(cfg: Any, graph: str, path: Path) -> tuple[int, int]:
    """Kafka: re-project ``graph`` into a scratch store and compare it with ``path``.

    The live projection is opened as a secondary instance (its projector may be running).
    Returns (rows compared, head compared up to); raises IntegrityError on a difference.
    """
    from rocksdict import AccessType, Options
    from rocksdict import Rdict as _Rdict

    from .projections.kafka import KafkaProjector

    scratch = Path(tempfile.mkdtemp(prefix="claimgraph-audit-"))
    try:
        live = _Rdict(
            str(path / "projection"),
            Options(raw_mode=True),
            access_type=AccessType.secondary(str(scratch / "secondary")),
        )
        try:
            live.try_catch_up_with_primary()
            head = ProjectionStore.applied_of(live)
            fresh = KafkaProjector(cfg, graph, scratch / "fresh")
            try:
                while fresh.applied < head:
                    if fresh.step(timeout=1.0) == 0 and fresh.lag() == 0:
                        break
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
