"""Queries beyond one hop, at one version: paths between two nodes, what a node reaches.

Both walk the graph as it was at one version, one :meth:`neighbors` read per node expanded
(cached within the query), breadth first, so shorter answers come first and the result is a
pure function of (graph at the version, arguments): a run can trace it and replay it.

**Unknown edges are followed and reported, never skipped.** An edge whose state is
``unknown`` (quarantined) may or may not hold: a path through one has ``state: unknown`` and
names its conflicts; a node reached only through one is ``certain: false``; every unknown edge
met is listed in ``unknown`` with its conflict id, so a reader can escalate or wait.

**Limits** (:data:`QUERY_LIMITS`): ``max_hops`` at most 6; at most ``limit`` results (default
100, at most 1,000); at most 20,000 node expansions — when a limit cuts the answer short the
result says ``truncated: true`` and why (a deterministic cut: replay sees the same one). A
query running longer than 10 s raises :class:`~claimgraph.errors.InputError` instead of
answering (time is not deterministic, so it never shortens an answer): narrow it with
``edge_types`` or fewer hops.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from claimgraph.core.queries import QUERY_LIMITS
from claimgraph.errors import InputError
from claimgraph.projections.reader import NeighborView

__all__ = [
    "QUERY_LIMITS",
    "Hop",
    "PathView",
    "PathsResult",
    "ReachResult",
    "Reached",
    "find_paths",
    "find_reach",
    "keep_neighbor",
]


Node = tuple[str, str]
Direction = Literal["out", "in", "both"]


@dataclass(frozen=True, slots=True)
class Hop:
    """One edge on a walk, in the direction it was walked (``subject`` → ``object``)."""

    edge_type: str
    subject: Node
    object: Node
    state: str  # present | unknown
    conflict_id: str | None = None
    claims: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "edge_type": self.edge_type,
            "subject": list(self.subject),
            "object": list(self.object),
            "state": self.state,
            "conflict_id": self.conflict_id,
            "claims": list(self.claims),
        }


@dataclass(frozen=True, slots=True)
class PathView:
    """A simple path: its hops in order; ``unknown`` if any hop is, with those conflicts."""

    hops: tuple[Hop, ...]

    @property
    def state(self) -> str:
        return "unknown" if self.conflicts else "present"

    @property
    def conflicts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h.conflict_id for h in self.hops if h.conflict_id))

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "length": len(self.hops),
            "conflicts": list(self.conflicts),
            "hops": [h.as_dict() for h in self.hops],
        }


@dataclass(frozen=True, slots=True)
class PathsResult:
    """Simple paths from ``src`` to ``dst`` of at most ``max_hops`` edges, shortest first."""

    src: Node
    dst: Node
    version: int
    max_hops: int
    paths: tuple[PathView, ...]
    unknown: tuple[Hop, ...]  # every unknown edge met on the way, with its conflict id
    truncated: bool = False
    truncated_by: str | None = None  # limit | expansions

    def as_dict(self) -> dict[str, Any]:
        return {
            "src": list(self.src),
            "dst": list(self.dst),
            "version": self.version,
            "max_hops": self.max_hops,
            "paths": [p.as_dict() for p in self.paths],
            "unknown": [h.as_dict() for h in self.unknown],
            "truncated": self.truncated,
            "truncated_by": self.truncated_by,
        }


@dataclass(frozen=True, slots=True)
class Reached:
    """A node reached: in how many hops, and whether only through unknown edges."""

    node: Node
    hops: int
    certain: bool  # reached through present edges only
    conflicts: tuple[str, ...] = ()  # the unknown edges' conflicts on its first path, if any

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": list(self.node),
            "hops": self.hops,
            "certain": self.certain,
            "conflicts": list(self.conflicts),
        }


@dataclass(frozen=True, slots=True)
class ReachResult:
    """Every node within ``max_hops`` of ``node`` (nearest first)."""

    node: Node
    direction: str
    version: int
    max_hops: int
    nodes: tuple[Reached, ...]
    unknown: tuple[Hop, ...]
    truncated: bool = False
    truncated_by: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": list(self.node),
            "direction": self.direction,
            "version": self.version,
            "max_hops": self.max_hops,
            "nodes": [n.as_dict() for n in self.nodes],
            "unknown": [h.as_dict() for h in self.unknown],
            "truncated": self.truncated,
            "truncated_by": self.truncated_by,
        }


Expand = Callable[[Node, str, str | None], list[NeighborView]]


def _check(max_hops: int, limit: int, direction: str = "out") -> None:
    if direction not in ("out", "in", "both"):
        raise InputError(f"direction must be out, in or both, not {direction[:20]!r}")
    if not 1 <= max_hops <= QUERY_LIMITS["max_hops"]:
        raise InputError(f"max_hops must be 1..{QUERY_LIMITS['max_hops']}, not {max_hops}")
    if not 1 <= limit <= QUERY_LIMITS["limit"]:
        raise InputError(f"limit must be 1..{QUERY_LIMITS['limit']}, not {limit}")


class _Walk:
    """One query's neighbour reads, cached per (node, direction), with its budgets."""

    def __init__(self, expand: Expand, edge_types: Sequence[str] | None, started: float) -> None:
        self._expand = expand
        self._types = tuple(edge_types) if edge_types else (None,)
        self._cache: dict[tuple[Node, str], list[Hop]] = {}
        self._started = started
        self.expansions = 0
        self.unknown: dict[tuple[str, Node, Node], Hop] = {}

    def steps(self, n: Node, direction: str) -> list[Hop]:
        """The edges leaving ``n`` (``both``: out then in), as hops walked away from ``n``."""
        dirs = ("out", "in") if direction == "both" else (direction,)
        out: list[Hop] = []
        for d in dirs:
            key = (n, d)
            hops = self._cache.get(key)
            if hops is None:
                if time.monotonic() - self._started > QUERY_LIMITS["seconds"]:
                    raise InputError(
                        f"the query ran past {QUERY_LIMITS['seconds']:.0f} s; narrow it "
                        "(edge_types, fewer hops)"
                    )
                self.expansions += 1
                hops = []
                for et in self._types:
                    for v in self._expand(n, d, et):
                        if v.state not in ("present", "unknown"):
                            continue
                        s, o = (n, v.node) if d == "out" else (v.node, n)
                        h = Hop(v.edge_type, s, o, v.state, v.conflict_id, v.claims)
                        if v.state == "unknown":
                            self.unknown.setdefault((v.edge_type, s, o), h)
                        hops.append(h)
                self._cache[key] = hops
            out += hops
        return out


def _other(h: Hop, n: Node) -> Node:
    return h.object if h.subject == n else h.subject


def find_paths(
    expand: Expand,
    src: Node,
    dst: Node,
    *,
    version: int,
    max_hops: int = 3,
    edge_types: Sequence[str] | None = None,
    direction: Direction = "out",
    limit: int = 100,
) -> PathsResult:
    """Simple paths ``src`` → ``dst`` (breadth first: shortest first, then in key order)."""
    _check(max_hops, limit, direction)
    walk = _Walk(expand, edge_types, time.monotonic())
    found: list[PathView] = []
    cut: str | None = None
    queue: deque[tuple[Node, tuple[Hop, ...], frozenset[Node]]] = deque(
        [(src, (), frozenset([src]))]
    )
    while queue and cut is None:
        n, hops, seen = queue.popleft()
        if walk.expansions >= QUERY_LIMITS["expansions"]:
            cut = "expansions"
            break
        for h in walk.steps(n, direction):
            nxt = _other(h, n)
            if nxt in seen:
                continue
            path = (*hops, h)
            if nxt == dst:
                found.append(PathView(path))
                if len(found) >= limit:
                    cut = "limit"
                    break
            elif len(path) < max_hops:
                queue.append((nxt, path, seen | {nxt}))
    return PathsResult(
        src,
        dst,
        version,
        max_hops,
        tuple(found),
        tuple(walk.unknown.values()),
        cut is not None,
        cut,
    )


def find_reach(
    expand: Expand,
    node: Node,
    *,
    version: int,
    direction: Direction = "out",
    max_hops: int = 2,
    edge_types: Sequence[str] | None = None,
    limit: int = 100,
) -> ReachResult:
    """Nodes within ``max_hops`` of ``node``; ``certain`` when a present-only path exists."""
    _check(max_hops, limit, direction)
    walk = _Walk(expand, edge_types, time.monotonic())
    best: dict[Node, Reached] = {}
    cut: str | None = None
    frontier: list[tuple[Node, tuple[str, ...]]] = [(node, ())]
    for depth in range(1, max_hops + 1):
        nxt_frontier: list[tuple[Node, tuple[str, ...]]] = []
        for n, conflicts in frontier:
            if walk.expansions >= QUERY_LIMITS["expansions"]:
                cut = "expansions"
                break
            for h in walk.steps(n, direction):
                m = _other(h, n)
                if m == node:
                    continue
                cs = conflicts + ((h.conflict_id,) if h.conflict_id else ())
                old = best.get(m)
                if old is None:
                    if len(best) >= limit:
                        cut = "limit"
                        continue
                    best[m] = Reached(m, depth, not cs, tuple(dict.fromkeys(cs)))
                    nxt_frontier.append((m, cs))
                elif not old.certain and not cs:  # a present-only path found later
                    best[m] = Reached(m, old.hops, True, ())
                    nxt_frontier.append((m, cs))
        if cut == "expansions":
            break
        frontier = nxt_frontier
    nodes = sorted(best.values(), key=lambda r: (r.hops, r.node))
    return ReachResult(
        node,
        direction,
        version,
        max_hops,
        tuple(nodes),
        tuple(walk.unknown.values()),
        cut is not None,
        cut,
    )


def keep_neighbor(
    claims: Sequence[dict[str, Any] | None],
    *,
    min_confidence: float | None,
    writer: str | None,
    asserted_after: int | None,
    asserted_before: int | None,
) -> bool:
    """Whether one of an edge's claims passes every filter given (None: no filter)."""
    for c in claims:
        if c is None:
            continue
        if min_confidence is not None and float(c["confidence"]) < min_confidence:
            continue
        if writer is not None and c["agent"] != writer:
            continue
        if asserted_after is not None and int(c["asserted_at"]) <= asserted_after:
            continue
        if asserted_before is not None and int(c["asserted_at"]) >= asserted_before:
            continue
        return True
    return False
