"""Browsing a projection page by page: edges and conflicts at a version, with search.

A page is the next ``limit`` matching entities in key order after a cursor (the last entity
key of the page before). Each request reads at most ``budget`` entities, so neither a large
graph nor a search that matches little makes one request unbounded; a page tells the caller
exactly where it stopped — ``after`` is set whenever more may follow (the page is full and
another match exists, or the budget ran out) and ``None`` only when the scan reached the end.
A short or empty page with ``after`` set is therefore never the whole answer.

Search (``q``) is a case-insensitive substring over what a reviewer sees of an entity: an
edge's ``type subject_type:subject_id object_type:object_id``; a conflict's id, edge type,
slots (``edge_type direction type:id``), claim ids, and the agent and task of its first
:data:`CLAIMS_SEARCHED` claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from claimgraph.core.state import SEP
from claimgraph.projections.reader import EdgeView, ProjectionReader
from claimgraph.projections.rows import CONFLICT, EDGE, loads

__all__ = ["BUDGET", "CLAIMS_SEARCHED", "CONFLICT_BUDGET", "Page", "conflicts_page", "edges_page"]

T = TypeVar("T")

BUDGET = 20_000  # entities one page request may read, matching or not
CONFLICT_BUDGET = 5_000  # conflicts: a search also reads their claims' writers
CLAIMS_SEARCHED = 16  # claims per conflict whose agent and task a search looks at


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page: its items, the entity key to resume after (None: nothing follows), how
    many entities were read, and whether the budget (not the page size) stopped the scan."""

    items: list[T] = field(default_factory=list)
    after: str | None = None
    scanned: int = 0
    budget_spent: bool = False

    @property
    def truncated(self) -> bool:
        """More may follow this page."""
        return self.after is not None


def _page(rows: Iterator[tuple[str, T | None]], limit: int, budget: int) -> Page[T]:
    """Take ``limit`` items (None rows do not match) from ``rows``, looking one match ahead
    so that a full page at the very end is not reported as truncated."""
    items: list[T] = []
    last_key: str | None = None
    scanned = 0
    budget = max(1, budget)
    for key, item in rows:
        if scanned >= budget:
            return Page(items, last_key, scanned, True)
        scanned += 1
        if item is None:
            last_key = key
            continue
        if len(items) == limit:  # one more match exists: the page is full, more follow
            return Page(items, last_key, scanned, False)
        items.append(item)
        last_key = key
    return Page(items, None, scanned, False)


def edges_page(
    reader: ProjectionReader,
    at: int,
    *,
    after: str | None = None,
    q: str = "",
    limit: int = 50,
    budget: int = BUDGET,
) -> Page[EdgeView]:
    """Present and unknown edges as of ``at`` after the edge key ``after``, matching ``q``."""
    needle = q.strip().lower()

    def rows() -> Iterator[tuple[str, EdgeView | None]]:
        for ent, _ in reader.scan(EDGE, at, after=after):
            et, st, si, ot, oi = ent.split(SEP)
            if needle and needle not in f"{et} {st}:{si} {ot}:{oi}".lower():
                yield ent, None
                continue
            view = reader.edge(et, (st, si), (ot, oi), at, halt=False)
            yield ent, (view if view.state != "absent" else None)

    return _page(rows(), limit, budget)


def conflicts_page(
    reader: ProjectionReader,
    at: int,
    *,
    after: str | None = None,
    q: str = "",
    limit: int = 20,
    include_closed: bool = False,
    budget: int = CONFLICT_BUDGET,
) -> Page[dict[str, Any]]:
    """Open conflicts (and closed ones with ``include_closed``) as of ``at`` after the
    conflict id ``after``, matching ``q``."""
    needle = q.strip().lower()

    def text(row: dict[str, Any]) -> str:
        slots = []
        for s in row.get("slots", []):
            parts = s.split(SEP)
            slots.append(" ".join([*parts[:-2], ":".join(parts[-2:])]))
        members = row.get("members", [])
        return " ".join([row["conflict_id"], row["edge_type"], *slots, *members]).lower()

    def writers(row: dict[str, Any]) -> str:
        out = []
        for cid in row.get("members", [])[:CLAIMS_SEARCHED]:
            claim = reader.claim(cid, at)
            if claim is not None:
                out += [claim.get("agent") or "", claim.get("task") or ""]
        return " ".join(out).lower()

    def rows() -> Iterator[tuple[str, dict[str, Any] | None]]:
        for ent, raw in reader.scan(CONFLICT, at, after=after):
            row: dict[str, Any] = loads(raw)
            keep = row["open"] or include_closed
            if keep and needle:
                keep = needle in text(row) or needle in writers(row)
            yield ent, (row if keep else None)

    return _page(rows(), limit, budget)
