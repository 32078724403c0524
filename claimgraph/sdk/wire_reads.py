"""Reads over HTTP, derived from the query catalogue: a read's request and its answer (no I/O).

The sync and the async HTTP clients send every catalogued read through these two functions:
:func:`read_request` turns ``read(name, **params)`` into the route the catalogue names (path
parameters in the path, the others by their HTTP names in the query, or as a JSON body for a
``post`` read), and :func:`read_answer` turns the answer back into the view the embedded graph
returns (``answer`` names the field that holds it; a 404 of a read cut as ``absent`` is None).
A new read needs its catalogue entry and, if its result type is new, one decoder in
:data:`DECODERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

from claimgraph.core.commands import Kind
from claimgraph.core.model import Decision
from claimgraph.core.queries import Cut, QuerySpec
from claimgraph.errors import ClaimgraphError
from claimgraph.projections.reader import EdgeView, HistoryView, NeighborView, SlotView
from claimgraph.service.api import NodeLike, node
from claimgraph.service.queries import Hop, PathsResult, PathView, Reached, ReachResult
from claimgraph.service.reads import EdgeRef, edge_refs

__all__ = [
    "DECODERS",
    "PAGE",
    "ReadRequest",
    "blocked_key",
    "decision_of",
    "read_answer",
    "read_request",
]

PAGE = 5000  # edges per page the client asks for when it follows ``GET /v1/graph``'s pages


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """One HTTP request of a read: its method, path, and query (GET) or JSON body (POST)."""

    method: str
    path: str
    params: dict[str, Any]

    def kwargs(self) -> dict[str, Any]:
        """httpx's keyword arguments for it."""
        return {"json": self.params} if self.method == "POST" else {"params": self.params}


def _node_str(n: NodeLike) -> str:
    t, i = node(n)
    return f"{t}:{i}"


def _edge_items(edges: Sequence[EdgeRef]) -> list[dict[str, str]]:
    return [
        {"edge_type": t, "subject": f"{s[0]}:{s[1]}", "object": f"{o[0]}:{o[1]}"}
        for t, s, o in edge_refs(edges)
    ]


def read_request(spec: QuerySpec, params: Mapping[str, Any], run: str | None) -> ReadRequest:
    """The request of ``spec`` with ``params`` (Python keywords, checked against the
    catalogue), in the run ``run`` when the read can meet a quarantine (``in_run``)."""
    path, out = spec.route, {}
    for p in spec.all_params:
        v = params.get(p.keyword)
        if v is None or (p.name == "timeout" and not v and not spec.post):
            continue
        if p.node:
            v = _node_str(v)
        elif p.annotation == "Sequence[EdgeRef]":
            v = _edge_items(v)
        elif p.domain.kind is Kind.LIST:
            if not v:
                continue
            v = list(v)
        if "{" + p.name + "}" in path:
            path = path.replace("{" + p.name + "}", quote(str(v), safe=""))
        else:
            out[p.wire] = v
    if run is not None and spec.in_run:
        out["run"] = run
    return ReadRequest("POST" if spec.post else "GET", path, out)


def blocked_key(spec: QuerySpec, params: Mapping[str, Any]) -> str:
    """What a read counts as when it meets a conflict: its name and what it names (its
    required parameters, its edge type and direction), as the embedded graph counts it."""
    names = [p for p in spec.params if p.required or p.name in ("edge_type", "direction")]
    return " ".join([spec.name, *(str(params.get(p.keyword)) for p in names)])


def _tuple(x: list[str]) -> tuple[str, str]:
    return (x[0], x[1])


def decision_of(raw: dict[str, Any]) -> Decision:
    """A decision as the API gives it (``version`` beside it, keys hex) as the log holds it."""
    d = dict(raw)
    d.pop("version", None)
    if d.get("key") is not None:
        d["key"] = {**d["key"], "public_key": bytes.fromhex(d["key"]["public_key"])}
    return cast(Decision, d)


def edge_view(r: dict[str, Any]) -> EdgeView:
    """One edge of an answer as a view."""
    return EdgeView(
        r["edge_type"],
        _tuple(r["subject"]),
        _tuple(r["object"]),
        r["state"],
        r["version"],
        r["conflict_id"],
        tuple(r["claims"]),
        r.get("fallback"),
    )


def _neighbor(n: dict[str, Any]) -> NeighborView:
    return NeighborView(
        n["edge_type"],
        n["direction"],
        _tuple(n["node"]),
        n["state"],
        n["conflict_id"],
        tuple(n["claims"]),
    )


def _slot(r: dict[str, Any]) -> SlotView:
    return SlotView(
        r["edge_type"],
        _tuple(r["node"]),
        r["direction"],
        r["state"],
        r["version"],
        r["conflict_id"],
        tuple(_tuple(n) for n in r["nodes"]),
        r.get("fallback"),
    )


def _hop(h: dict[str, Any]) -> Hop:
    return Hop(
        h["edge_type"],
        _tuple(h["subject"]),
        _tuple(h["object"]),
        h["state"],
        h["conflict_id"],
        tuple(h["claims"]),
    )


def _paths(r: dict[str, Any]) -> PathsResult:
    return PathsResult(
        _tuple(r["src"]),
        _tuple(r["dst"]),
        r["version"],
        r["max_hops"],
        tuple(PathView(tuple(_hop(h) for h in p["hops"])) for p in r["paths"]),
        tuple(_hop(h) for h in r["unknown"]),
        r["truncated"],
        r["truncated_by"],
    )


def _reach(r: dict[str, Any]) -> ReachResult:
    return ReachResult(
        _tuple(r["node"]),
        r["direction"],
        r["version"],
        r["max_hops"],
        tuple(
            Reached(_tuple(n["node"]), n["hops"], n["certain"], tuple(n["conflicts"]))
            for n in r["nodes"]
        ),
        tuple(_hop(h) for h in r["unknown"]),
        r["truncated"],
        r["truncated_by"],
    )


def _record(r: dict[str, Any]) -> dict[str, Any]:
    out = dict(r)
    out.pop("claim_details", None)  # the rows the embedded reader returns, without the details
    return out


# result type (as the catalogue names it) → its decoder, from the answer's field (``answer``)
DECODERS: dict[str, Callable[[Any], Any]] = {
    "EdgeView": edge_view,
    "list[EdgeView]": lambda r: [edge_view(e) for e in r],
    "SlotView": _slot,
    "list[NeighborView]": lambda r: [_neighbor(n) for n in r],
    "PathsResult": _paths,
    "ReachResult": _reach,
    "HistoryView": lambda r: HistoryView(
        tuple(r["history"]), int(r["version"]), r.get("cut_below")
    ),
    "list[dict[str, Any]]": lambda r: [_record(c) for c in r],
    "dict[str, Any] | None": _record,
    "dict[str, tuple[int, int]]": lambda r: {a: (int(w), int(lo)) for a, (w, lo) in r.items()},
    "list[tuple[int, Decision]]": lambda r: [(int(d["version"]), decision_of(d)) for d in r],
}


def read_answer(spec: QuerySpec, params: Mapping[str, Any], status: int, body: Any) -> Any:
    """The result of a read from its answer (``status`` 200, or a 404 of an absent thing:
    None); anything else is for the caller to raise."""
    if status == 404 and spec.cut is Cut.ABSENT:
        return None
    out = DECODERS[spec.result](body[spec.answer] if spec.answer else body)
    asked = params.get("edges")
    if spec.post and asked is not None and len(out) != len(asked):
        raise ClaimgraphError(f"asked {len(asked)} edges, the server answered {len(out)}")
    return out
