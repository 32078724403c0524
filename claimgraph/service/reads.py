"""Reads at a version, shared by every graph: the embedded, the Kafka and the HTTP one."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from claimgraph.core.commands import cut
from claimgraph.core.queries import QUERIES, QuerySpec, params_violation
from claimgraph.errors import InputError, UnknownSlotError
from claimgraph.projections.browse import (
    BUDGET,
    CONFLICT_BUDGET,
    Page,
    conflicts_page,
    edges_page,
)
from claimgraph.projections.reader import (
    EdgeView,
    HistoryView,
    NeighborView,
    ProjectionReader,
    SlotView,
)
from claimgraph.service.api import NodeLike, Receipt
from claimgraph.service.catalogue_reads import CatalogueReads
from claimgraph.service.queries import (
    PathsResult,
    ReachResult,
    find_paths,
    find_reach,
    keep_neighbor,
)
from claimgraph.service.writes import node as _node

__all__ = ["BlockedReads", "Browsable", "EdgeRef", "GraphReads", "catalogued", "edge_refs"]

EdgeRef = tuple[str, NodeLike, NodeLike]  # (edge_type, subject, object) of a batch read


def edge_refs(edges: Sequence[EdgeRef]) -> list[tuple[str, tuple[str, str], tuple[str, str]]]:
    """A batch read's edges, checked and with their nodes as ``(type, id)``; anything but
    ``(edge_type, subject, object)`` triples is an :class:`InputError` naming the item."""
    if isinstance(edges, str | bytes) or not isinstance(edges, Sequence):
        raise InputError("read_edges takes a list of (edge_type, subject, object) triples")
    out = []
    for i, e in enumerate(edges):
        if isinstance(e, str | bytes) or not isinstance(e, Sequence) or len(e) != 3:
            raise InputError(
                f"edge {i} of read_edges is {e!r}: expected (edge_type, subject, object)"
            )
        t, s, o = e
        if not isinstance(t, str):
            raise InputError(f"edge {i} of read_edges has edge type {cut(t)}: expected a string")
        out.append((t, _node(s), _node(o)))
    return out


def catalogued(query: str, params: dict[str, Any]) -> QuerySpec:
    """The catalogue's read ``query`` (:mod:`claimgraph.core.queries`) once ``params`` fit
    it; an unknown read, an unknown or missing parameter, or a value outside its declared
    domain raises :class:`InputError` naming it, before anything is read."""
    spec = QUERIES.get(query) if isinstance(query, str) else None
    if spec is None:
        raise InputError(f"no read {cut(query, 40)}; the reads are {', '.join(QUERIES)}")
    problem = params_violation(spec, params)
    if problem is not None:
        raise InputError(problem)
    return spec


_BLOCKED_LOCK = threading.Lock()


def _attribution(obj: Any) -> threading.local:
    with _BLOCKED_LOCK:
        local: threading.local | None = obj.__dict__.get("_run_attribution")
        if local is None:
            local = obj.__dict__["_run_attribution"] = threading.local()
        return local


@runtime_checkable
class Browsable(Protocol):
    """What a reviewer browses: pages of edges and conflicts, a node's whole neighbourhood
    (both directions, unknown slots shown, never halting). The embedded and the Kafka graph
    offer it; the HTTP app's review routes need it."""

    def edges_page(
        self,
        *,
        at: int | None = None,
        after: str | None = None,
        q: str = "",
        limit: int = 50,
        budget: int = BUDGET,
    ) -> Page[EdgeView]: ...

    def quarantine_page(
        self,
        *,
        at: int | None = None,
        after: str | None = None,
        q: str = "",
        limit: int = 20,
        include_closed: bool = False,
        budget: int = CONFLICT_BUDGET,
    ) -> Page[dict[str, Any]]: ...

    def neighborhood(self, node: NodeLike, *, at: int | None = None) -> list[NeighborView]: ...


class BlockedReads:
    """The blocked reads of runs, per graph: what every sync graph (in process or over HTTP)
    keeps for the runs reading through it.

    Reads of a run that come back ``unknown`` (or halt) are remembered per (run, conflict)
    with the distinct queries that hit it (reads outside a run are not); :meth:`flush_blocked`
    reports them as ``read_blocked`` commands — batched and de-duplicated per run — so
    blocked-read thresholds count in the log.
    """

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
        self,
        *,
        agent: str = "reader",
        run: str | None = None,
        pinned: int | None = None,
        task: str = "",
    ) -> list[Receipt]:
        """Report the blocked reads noted so far (only ``run``'s when given) to the log.

        One ``read_blocked`` command per (run, conflict), counting distinct queries;
        ``pinned`` is the run's pinned version and ``task`` its task (over HTTP the server
        checks that the token may act in it).
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
        return [
            send(k[1], n, agent=agent, run_id=k[0], pinned_version=pinned, task=task)
            for k, n in counts
        ]

    def note_unknown(self, result: object, name: str, query: str) -> None:
        """Note the conflicts a read's answer met (only a run's reads count): unknown edges
        and slots as ``query``, the unknown hops of a walk (``name``'s) each as its own."""
        if isinstance(result, PathsResult | ReachResult):
            for h in result.unknown:
                self._note_blocked(h.conflict_id, f"{name} {h.edge_type} {h.subject} {h.object}")
            return
        for x in result if isinstance(result, list) else [result]:
            if getattr(x, "state", None) == "unknown":
                self._note_blocked(getattr(x, "conflict_id", None), query)


class GraphReads(BlockedReads, CatalogueReads):
    """Reads at a version from ``self.reader``; subclasses provide ``reader``, ``head()`` and
    ``wait_for()``. Each catalogued read is a method here (its implementation), answered by
    ``read`` too."""

    reader: ProjectionReader

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

    def read(self, query: str, /, **params: Any) -> Any:
        """Any read of the query catalogue, by name: the port's one read operation
        (``read("edge", edge_type=..., subject=..., obj=..., at=...)``). Checked against the
        catalogue first (:func:`catalogued`), then answered as the read's own method does."""
        name = catalogued(query, params).name
        if getattr(type(self), name, None) in (None, getattr(CatalogueReads, name, None)):
            raise NotImplementedError(f"{type(self).__name__} does not implement the read {name}")
        return getattr(self, name)(**params)

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
        v_at = self._at(at, timeout)
        self._defined(edge_type, v_at)
        try:
            e = self.reader.edge(edge_type, s, o, v_at)
        except UnknownSlotError as exc:
            self._note_blocked(exc.conflict_id, f"edge {edge_type} {s} {o}")
            raise
        if e.state == "unknown":
            self._note_blocked(e.conflict_id, f"edge {edge_type} {s} {o}")
        return e

    def read_edges(
        self,
        edges: Sequence[EdgeRef],
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[EdgeView]:
        """Several edges as of one version (``at``, head by default), in order: each answer
        equals :meth:`edge`'s at that version. Over HTTP this is one request
        (``POST /v1/read/edges``), bounded by the server's ``--max-batch``."""
        wanted = edge_refs(edges)
        v_at = self._at(at, timeout)
        return [self.edge(t, s, o, at=v_at) for t, s, o in wanted]

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
        v_at = self._at(at, timeout)
        self._defined(edge_type, v_at, side=direction)
        try:
            v = self.reader.slot(edge_type, n, v_at, direction)
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
        min_confidence: float | None = None,
        writer: str | None = None,
        asserted_after: int | None = None,
        asserted_before: int | None = None,
    ) -> list[NeighborView]:
        """The node's neighbours as of ``at`` (present and unknown edges).

        Filters keep an edge when one of its claims has at least ``min_confidence``, was
        written by ``writer``, or asserted after / before a time (epoch ms, exclusive).
        """
        n = _node(node)
        v_at = self._at(at, timeout)
        if edge_type is not None:
            self._defined(edge_type, v_at)
        try:
            ns = self.reader.neighbors(
                n, v_at, edge_type=edge_type, direction=direction, include_absent=include_absent
            )
        except UnknownSlotError as exc:
            self._note_blocked(exc.conflict_id, f"neighbors {n} {edge_type} {direction}")
            raise
        filters = (min_confidence, writer, asserted_after, asserted_before)
        if any(f is not None for f in filters):
            ns = [
                x
                for x in ns
                if keep_neighbor(
                    [self.reader.claim(c, v_at) for c in self._claims_of(x, v_at)],
                    min_confidence=min_confidence,
                    writer=writer,
                    asserted_after=asserted_after,
                    asserted_before=asserted_before,
                )
            ]
        for v in ns:
            if v.state == "unknown":
                self._note_blocked(v.conflict_id, f"neighbors {n} {edge_type} {direction}")
        return ns

    def _claims_of(self, v: NeighborView, at: int) -> Sequence[str]:
        """The claims behind a neighbour: its visible ones, or (unknown) its conflict's."""
        if v.claims or v.conflict_id is None:
            return v.claims
        c = self.reader.conflict(v.conflict_id, at)
        return list(c["claims"]) if c else ()

    def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "out",
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> PathsResult:
        """Simple paths ``src`` → ``dst`` as of ``at``, shortest first (unknown edges are
        followed and named with their conflict ids; limits in :mod:`~claimgraph.service.queries`).
        """
        v = self._at(at, timeout)
        for et in edge_types or ():
            self._defined(et, v)
        res = find_paths(
            self._expander(v),
            _node(src),
            _node(dst),
            version=v,
            max_hops=max_hops,
            edge_types=edge_types,
            direction=direction,
            limit=limit,
        )
        for h in res.unknown:
            self._note_blocked(h.conflict_id, f"paths {h.edge_type} {h.subject} {h.object}")
        return res

    def reach(
        self,
        node: NodeLike,
        *,
        direction: Literal["out", "in", "both"] = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> ReachResult:
        """Every node within ``max_hops`` of ``node`` as of ``at``, nearest first."""
        v = self._at(at, timeout)
        for et in edge_types or ():
            self._defined(et, v)
        res = find_reach(
            self._expander(v),
            _node(node),
            version=v,
            direction=direction,
            max_hops=max_hops,
            edge_types=edge_types,
            limit=limit,
        )
        for h in res.unknown:
            self._note_blocked(h.conflict_id, f"reach {h.edge_type} {h.subject} {h.object}")
        return res

    def _expander(self, v: int) -> Callable[[tuple[str, str], str, str | None], list[NeighborView]]:
        def expand(n: tuple[str, str], d: str, et: str | None) -> list[NeighborView]:
            return self.reader.neighbors(n, v, edge_type=et, direction=d)

        return expand

    def _defined(self, edge_type: str, at: int, side: str | None = None) -> None:
        """Raise InputError naming the schema when it does not define ``edge_type`` (or, with
        ``side``, when its cardinality makes no slot on that side: ``out`` is the subject's).

        Traces recorded before reads checked this replay with their recorded meaning
        (``absent``): replay turns the check off (:func:`lenient_reads`).
        """
        if getattr(_attribution(self), "lenient", False):
            return
        schema = self.reader.schema(at)
        if schema is None:
            return
        et = schema.edge_types.get(edge_type)
        if et is not None:
            if side is None or (et.subject_exclusive if side == "out" else et.object_exclusive):
                return
            row = self.reader.schema_row(at) or {}
            raise InputError(
                f"edge type {edge_type!r} is {et.cardinality.value} in the graph schema in force "
                f"at version {at} (revision {row.get('revision')}, {row.get('source')}): it has "
                f"no slot on the {'subject' if side == 'out' else 'object'} side "
                f"(direction={side!r}); read its neighbors instead"
            )
        row = self.reader.schema_row(at) or {}
        raise InputError(
            f"edge type {edge_type[:80]!r} is not defined by the graph schema in force at "
            f"version {at} (revision {row.get('revision')}, {row.get('source')}); it defines: "
            + ", ".join(sorted(schema.edge_types))
        )

    @contextlib.contextmanager
    def lenient_reads(self) -> Iterator[None]:
        """Reads of undefined edge types answer ``absent`` (as before they were errors), in
        this thread, while the context lasts: replay of traces recorded before that change."""
        local = _attribution(self)
        before = getattr(local, "lenient", False)
        local.lenient = True
        try:
            yield
        finally:
            local.lenient = before

    def to_networkx(self, *, at: int | None = None) -> Any:
        """The graph at ``at`` as a ``networkx.MultiDiGraph`` with claim provenance on each
        edge (:mod:`claimgraph.service.export`; needs the ``export`` extra)."""
        from claimgraph.service.export import to_networkx

        return to_networkx(self, at)

    def edges(self, *, at: int | None = None, limit: int = 500) -> list[EdgeView]:
        """The graph's edges as of ``at`` (present and unknown), at most ``limit``."""
        return self.reader.edges(self._at(at, 0.0), limit=limit)

    def edges_page(
        self,
        *,
        at: int | None = None,
        after: str | None = None,
        q: str = "",
        limit: int = 50,
        budget: int = BUDGET,
    ) -> Page[EdgeView]:
        """A page of edges as of ``at`` after the edge key ``after``, matching ``q``
        (:mod:`claimgraph.projections.browse`)."""
        v = self._at(at, 0.0)
        return edges_page(self.reader, v, after=after, q=q, limit=limit, budget=budget)

    def quarantine_page(
        self,
        *,
        at: int | None = None,
        after: str | None = None,
        q: str = "",
        limit: int = 20,
        include_closed: bool = False,
        budget: int = CONFLICT_BUDGET,
    ) -> Page[dict[str, Any]]:
        """A page of conflicts as of ``at`` after the conflict id ``after``, matching ``q``."""
        v = self._at(at, 0.0)
        return conflicts_page(
            self.reader,
            v,
            after=after,
            q=q,
            limit=limit,
            include_closed=include_closed,
            budget=budget,
        )

    def neighborhood(self, node: NodeLike, *, at: int | None = None) -> list[NeighborView]:
        """Every edge at ``node`` as of ``at``, out and in, unknown slots included (a
        reviewer's view: a halting slot shows as unknown instead of raising)."""
        n, v = _node(node), self._at(at, 0.0)
        return [
            x for d in ("out", "in") for x in self.reader.neighbors(n, v, direction=d, halt=False)
        ]

    def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> HistoryView:
        """Every decision that touched the edge, up to ``at``, oldest first; after GC it says
        from which version on it is complete (``cut_below``) when entries below were removed."""
        s, o, v = _node(subject), _node(obj), self._at(at, timeout)
        entries = self.reader.history(edge_type, s, o, v)
        return HistoryView(tuple(entries), v, self.reader.history_cut(edge_type, s, o))

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
