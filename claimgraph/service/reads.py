"""Reads at a version, shared by every graph: the embedded, the Kafka and the HTTP one."""

from __future__ import annotations

import threading
from typing import Any

from claimgraph.errors import InputError, UnknownSlotError
from claimgraph.projections.reader import EdgeView, NeighborView, ProjectionReader, SlotView
from claimgraph.service.api import NodeLike, _node

__all__ = ["GraphReads"]

_BLOCKED_LOCK = threading.Lock()


def _attribution(obj: Any) -> threading.local:
    with _BLOCKED_LOCK:
        local: threading.local | None = obj.__dict__.get("_run_attribution")
        if local is None:
            local = obj.__dict__["_run_attribution"] = threading.local()
        return local


class GraphReads:
    """Reads at a version; subclasses provide ``reader``, ``head()`` and ``wait_for()``.

    Reads of a run that come back ``unknown`` (or halt) are remembered per (run, conflict)
    with the distinct queries that hit it (reads outside a run are not); :meth:`flush_blocked`
    reports them as ``read_blocked`` commands — batched and de-duplicated per run — so
    blocked-read thresholds count in the log.
    """

    reader: ProjectionReader
    _blocked: dict[tuple[str | None, str], set[str]]

    @property
    def blocked_run(self) -> str | None:
        """The run this thread's reads are attributed to (set by runs; per thread, so runs in
        several threads sharing one graph keep their blocked reads apart)."""
        return getattr(_attribution(self), "run", None)

    @blocked_run.setter
    def blocked_run(self, run: str | None) -> None:
        _attribution(self).run = run

    def _note_blocked(self, conflict_id: str | None, query: str) -> None:
        run = self.blocked_run
        if not conflict_id or run is None:
            return  # only a run's reads count: outside one there is nothing to attribute
        with _BLOCKED_LOCK:
            if not hasattr(self, "_blocked"):
                self._blocked = {}
            self._blocked.setdefault((run, conflict_id), set()).add(query)

    def blocked_reads(self) -> dict[tuple[str | None, str], int]:
        """(run, conflict) → distinct blocked reads not yet reported."""
        return {k: len(v) for k, v in getattr(self, "_blocked", {}).items()}

    def flush_blocked(
        self, *, agent: str = "reader", run: str | None = None, pinned: int | None = None
    ) -> list[Any]:
        """Report the blocked reads noted so far (only ``run``'s when given) to the log.

        One ``read_blocked`` command per (run, conflict), counting distinct queries;
        ``pinned`` is the run's pinned version.
        """
        send = getattr(self, "read_blocked", None)
        if send is None:
            return []
        with _BLOCKED_LOCK:  # take this flush's entries; other threads keep noting theirs
            pending = getattr(self, "_blocked", {})
            mine = sorted(
                (k for k in pending if run is None or k[0] == run),
                key=lambda k: (k[0] or "", k[1]),
            )
            counts = [(k, len(pending.pop(k))) for k in mine]
        return [send(k[1], n, agent=agent, run_id=k[0], pinned_version=pinned) for k, n in counts]

    def head(self) -> int:
        raise NotImplementedError

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        raise NotImplementedError

    def _at(self, at: int | None, timeout: float) -> int:
        if at is None:
            return self.head()
        if at < -1:
            raise InputError(
                f"version {at} does not exist: versions start at 0 (-1 is the empty graph)"
            )
        self.wait_for(at, timeout)
        return at

    # -- reads ----------------------------------------------------------------------------------

    def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> EdgeView:
        """One edge as of ``at``: present, absent or unknown (with the conflict id)."""
        s, o = _node(subject), _node(obj)
        try:
            e = self.reader.edge(edge_type, s, o, self._at(at, timeout))
        except UnknownSlotError as exc:
            self._note_blocked(exc.conflict_id, f"edge {edge_type} {s} {o}")
            raise
        if e.state == "unknown":
            self._note_blocked(e.conflict_id, f"edge {edge_type} {s} {o}")
        return e

    def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
    ) -> SlotView:
        """What an exclusive slot holds as of ``at``."""
        n = _node(node)
        try:
            v = self.reader.slot(edge_type, n, self._at(at, timeout), direction)
        except UnknownSlotError as exc:
            self._note_blocked(exc.conflict_id, f"slot {edge_type} {n} {direction}")
            raise
        if v.state == "unknown":
            self._note_blocked(v.conflict_id, f"slot {edge_type} {n} {direction}")
        return v

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
        include_absent: bool = False,
    ) -> list[NeighborView]:
        """The node's neighbours as of ``at`` (present and unknown edges)."""
        n = _node(node)
        try:
            ns = self.reader.neighbors(
                n,
                self._at(at, timeout),
                edge_type=edge_type,
                direction=direction,
                include_absent=include_absent,
            )
        except UnknownSlotError as exc:
            self._note_blocked(exc.conflict_id, f"neighbors {n} {edge_type} {direction}")
            raise
        for v in ns:
            if v.state == "unknown":
                self._note_blocked(v.conflict_id, f"neighbors {n} {edge_type} {direction}")
        return ns

    def edges(self, *, at: int | None = None, limit: int = 500) -> list[EdgeView]:
        """The graph's edges as of ``at`` (present and unknown), at most ``limit``."""
        return self.reader.edges(self._at(at, 0.0), limit=limit)

    def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Every decision that touched the edge, up to ``at``."""
        return self.reader.history(edge_type, _node(subject), _node(obj), self._at(at, timeout))

    def quarantine(
        self, *, at: int | None = None, timeout: float = 0.0, include_closed: bool = False
    ) -> list[dict[str, Any]]:
        """Open conflicts as of ``at`` (and closed ones with ``include_closed``)."""
        return self.reader.quarantine(self._at(at, timeout), include_closed=include_closed)

    def claim_info(self, claim_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        """A claim's record and status as of ``at``."""
        return self.reader.claim(claim_id, self._at(at, 0.0))

    def conflict(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        """A conflict's record as of ``at``."""
        return self.reader.conflict(conflict_id, self._at(at, 0.0))

    def schema_info(self, *, at: int | None = None) -> dict[str, Any] | None:
        """The schema in force at ``at``: revision, digest, source and document."""
        return self.reader.schema_row(self._at(at, 0.0))

    def escalation(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        """A conflict's self-contained escalation payload (claims, evidence, votes, ...)."""
        from claimgraph.service.escalations import conflict_payload

        return conflict_payload(
            self.reader, getattr(self, "name", ""), conflict_id, self._at(at, 0.0)
        )

    def escalations(
        self, *, at: int | None = None, include_open: bool = False
    ) -> list[dict[str, Any]]:
        """Payloads of escalated conflicts (every open one with ``include_open``)."""
        from claimgraph.service.escalations import escalations

        return escalations(
            self.reader, getattr(self, "name", ""), self._at(at, 0.0), include_open=include_open
        )

    def calibration(self, edge_type: str, *, at: int | None = None) -> dict[str, tuple[int, int]]:
        """agent → (wins, losses) in resolved conflicts of ``edge_type`` (calibration)."""
        return self.reader.calibration(edge_type, self._at(at, 0.0))
