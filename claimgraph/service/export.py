"""Export the graph as it was at one version, with each edge's claim provenance.

``claimgraph export --at V --format jsonl|graphml|parquet`` and :func:`to_networkx` read every
edge readable at ``V`` — present ones, and unknown (quarantined) ones marked as such with
their conflict id and the conflicting claims — and attach to each edge the claims behind it:
owner (agent), task, confidence, evidence, reasoning, when it was asserted and the version of
the decision that made it what it is at ``V`` (``decision_version``).

* **jsonl**: one JSON object per edge, claims nested;
* **graphml** (networkx): a directed multigraph, one edge per (edge type, subject, object);
  GraphML attributes are scalars, so lists are JSON text and the claims are summarised
  (``owners``, ``tasks``, ``confidence`` = the highest, ``decision_version`` = the newest);
* **parquet** (pyarrow): one row per edge, claims as a list of structs.

networkx and pyarrow are the ``export`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from claimgraph.errors import ConfigError

__all__ = ["EXPORT_FORMATS", "ExportedEdge", "export", "exported_edges", "to_networkx"]

EXPORT_FORMATS = ("jsonl", "graphml", "parquet")
ALL_EDGES = 1 << 62


@dataclass(frozen=True, slots=True)
class ExportedEdge:
    """One edge at a version and the claims behind it."""

    version: int
    edge_type: str
    subject: str
    object: str
    state: str  # present | unknown
    conflict_id: str | None
    claims: tuple[dict[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "edge_type": self.edge_type,
            "subject": self.subject,
            "object": self.object,
            "state": self.state,
            "conflict_id": self.conflict_id,
            "claims": list(self.claims),
        }

    def summary(self) -> dict[str, Any]:
        """Scalar attributes (GraphML): owners, tasks, top confidence, newest decision."""
        cs = self.claims
        return {
            "edge_type": self.edge_type,
            "state": self.state,
            "conflict_id": self.conflict_id or "",
            "owners": ",".join(sorted({c["agent"] for c in cs})),
            "tasks": ",".join(sorted({c["task"] for c in cs})),
            "confidence": max((float(c["confidence"]) for c in cs), default=0.0),
            "decision_version": max((int(c["decision_version"]) for c in cs), default=-1),
            "evidence": json.dumps(sorted({e for c in cs for e in c["evidence"]})),
            "claims": json.dumps([c["claim_id"] for c in cs]),
        }


def _claim(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "claim_id": c["claim_id"],
        "agent": c["agent"],
        "task": c["task"],
        "polarity": c["polarity"],
        "confidence": float(c["confidence"]),
        "evidence": list(c["evidence"]),
        "reasoning": c["reasoning"],
        "asserted_at": int(c["asserted_at"]),
        "run_id": c.get("run_id"),
        "decision_version": int(c["since"]),
    }


def exported_edges(graph: Any, at: int | None = None) -> Iterator[ExportedEdge]:
    """Every present or unknown edge at ``at`` (default head), with its claims."""
    v = graph.head() if at is None else at
    for e in graph.edges(at=v, limit=ALL_EDGES):
        ids: list[str] = list(e.claims)
        if not ids and e.conflict_id:
            c = graph.conflict(e.conflict_id, at=v)
            ids = list(c["claims"]) if c else []
        claims = []
        for cid in ids:
            row = graph.claim_info(cid, at=v)
            if row is not None:
                claims.append(_claim(row))
        yield ExportedEdge(
            v, e.edge_type, ":".join(e.subject), ":".join(e.object), e.state, e.conflict_id,
            tuple(claims),
        )  # fmt: skip


def to_networkx(graph: Any, at: int | None = None) -> Any:
    """The graph at ``at`` as a ``networkx.MultiDiGraph`` (edge key: the edge type).

    Nodes carry ``type`` and ``id``; edges carry ``state``, ``conflict_id``, ``version`` and
    ``claims`` (the provenance list) plus the summary attributes of :meth:`ExportedEdge.summary`.
    """
    try:
        import networkx as nx
    except ImportError:
        raise ConfigError("to_networkx needs networkx: pip install 'claimgraph[export]'") from None
    g = nx.MultiDiGraph()
    v = graph.head() if at is None else at
    g.graph.update(name=getattr(graph, "name", ""), version=v)
    for e in exported_edges(graph, v):
        for n in (e.subject, e.object):
            if n not in g:
                t, _, i = n.partition(":")
                g.add_node(n, type=t, id=i)
        g.add_edge(
            e.subject, e.object, key=e.edge_type, version=e.version, **e.summary(),
            claim_records=list(e.claims),
        )  # fmt: skip
    return g


def export(graph: Any, fmt: str, out: IO[str] | Path, at: int | None = None) -> int:
    """Write the graph at ``at`` in ``fmt`` to ``out`` (a text stream, or a path for
    parquet); returns the number of edges written."""
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"unknown format {fmt!r}: expected one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "jsonl":
        n = 0
        stream = out.open("w", encoding="utf-8") if isinstance(out, Path) else out
        try:
            for e in exported_edges(graph, at):
                stream.write(json.dumps(e.as_dict(), ensure_ascii=False, sort_keys=True) + "\n")
                n += 1
        finally:
            if isinstance(out, Path):
                stream.close()
        return n
    if fmt == "graphml":
        import networkx as nx

        g = to_networkx(graph, at)
        for _, _, d in g.edges(data=True):
            d.pop("claim_records")  # GraphML holds scalars: the summary stays
        text = "\n".join(nx.generate_graphml(g)) + "\n"
        if isinstance(out, Path):
            out.write_text(text, encoding="utf-8")
        else:
            out.write(text)
        return int(g.number_of_edges())
    return _parquet(graph, out, at)


def _parquet(graph: Any, out: IO[str] | Path, at: int | None) -> int:
    if not isinstance(out, Path):
        raise ConfigError("parquet is binary: give a file (--out FILE.parquet)")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("parquet needs pyarrow: pip install 'claimgraph[export]'") from None
    claim = pa.struct(
        [
            ("claim_id", pa.string()), ("agent", pa.string()), ("task", pa.string()),
            ("polarity", pa.string()), ("confidence", pa.float64()),
            ("evidence", pa.list_(pa.string())), ("reasoning", pa.string()),
            ("asserted_at", pa.int64()), ("run_id", pa.string()),
            ("decision_version", pa.int64()),
        ]
    )  # fmt: skip
    schema = pa.schema(
        [
            ("version", pa.int64()), ("edge_type", pa.string()), ("subject", pa.string()),
            ("object", pa.string()), ("state", pa.string()), ("conflict_id", pa.string()),
            ("claims", pa.list_(claim)),
        ]
    )  # fmt: skip
    rows = [e.as_dict() for e in exported_edges(graph, at)]
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, out)
    return len(rows)
