"""Escalation payloads: a conflict with all its evidence, as one self-contained JSON record.

A payload is what a person (or an arbitration agent) needs to decide without opening anything
else: the claims held in the conflict side by side — owner, task, run, outcome, confidence, the
writer's calibrated accuracy, evidence, reasoning, the version each writer read
(``based_on_version``) and when it claimed — the schema revision and the edge type's policy,
the decision-conflict signals, the votes (majority and calibrated weighted), the domain's
fallback, a recommended action and a link target for review. It is built from the projection
at one version, so the same payload can be rebuilt later for an audit.
"""

from __future__ import annotations

from typing import Any

from claimgraph.core.governance import Vote, label, majority, merge, outcome_by, signals
from claimgraph.core.governance import iso_utc as _iso
from claimgraph.core.schema import DecisionChecks, EdgeType
from claimgraph.projections.reader import ProjectionReader

__all__ = ["conflict_payload", "escalations", "outcome_of"]


def outcome_of(claim: dict[str, Any], by: str) -> str:
    """The outcome label of a claim row, as the governor labels it in merge records."""
    return label(
        claim["polarity"],
        claim["subject_type"],
        claim["subject_id"],
        claim["object_type"],
        claim["object_id"],
        by,
    )


def conflict_payload(
    reader: ProjectionReader, graph: str, conflict_id: str, at: int
) -> dict[str, Any] | None:
    """The escalation payload of a conflict as of version ``at`` (``None``: no such conflict)."""
    row = reader.conflict(conflict_id, at)
    if row is None:
        return None
    schema = reader.schema(at)
    schema_row = reader.schema_row(at) or {}
    et = schema.edge_types.get(row["edge_type"]) if schema else None
    by = outcome_by(et)
    record = reader.calibration(row["edge_type"], at)
    prior = et.merge_prior if et else (2.0, 2.0)
    held = row["claims"] if row["open"] else row["members"]
    claims: list[dict[str, Any]] = []
    votes: list[Vote] = []
    for cid in held:
        c = reader.claim(cid, at)
        if c is None:
            continue
        wins, losses = record.get(c["agent"], (0, 0))
        acc = (wins + prior[0]) / (wins + losses + prior[0] + prior[1])
        out = outcome_of(c, by)
        claims.append(
            {
                "claim_id": c["claim_id"],
                "agent": c["agent"],
                "task": c["task"],
                "run_id": c["run_id"],
                "subject": f"{c['subject_type']}:{c['subject_id']}",
                "subject_type": c["subject_type"],
                "subject_id": c["subject_id"],
                "object": c["object_id"],
                "object_type": c["object_type"],
                "polarity": c["polarity"],
                "outcome": out,
                "confidence": c["confidence"],
                "accuracy": round(acc, 6),
                "record": {"wins": wins, "losses": losses},
                "evidence": c["evidence"],
                "reasoning": c["reasoning"],
                "asserted_at": c["asserted_at"],
                "asserted_at_iso": _iso(c["asserted_at"]),
                "based_on_version": c["based_on_version"],
                "properties": c["properties"],
                "status": c["status"],
            }
        )
        votes.append(
            Vote(
                c["claim_id"],
                c["agent"],
                out,
                float(c["confidence"]),
                c["asserted_at"],
                c["based_on_version"],
            )
        )
    votes.sort(key=lambda v: (v.asserted_at, v.claim_id))
    checks = (et.decision if et else None) or DecisionChecks()
    weighted = merge(votes, record, prior=prior, threshold=et.merge_margin if et else 0.0)
    leader, counts = majority(votes)
    fallback = (
        {"mode": et.fallback.mode, "value": et.fallback.value, "safe": list(et.fallback.safe)}
        if et
        else None
    )
    if row["escalated_at"] is not None and row["open"]:
        status = "escalated"
    else:
        status = "open" if row["open"] else f"closed ({row['outcome']})"
    return {
        "conflict_id": conflict_id,
        "graph": graph,
        "version": at,
        "status": status,
        "edge_type": row["edge_type"],
        "domain": et.domain if et else None,
        "policy": et.conflict_policy.value if et else None,
        "schema_rev": schema_row.get("revision"),
        "schema_digest": schema_row.get("digest"),
        "opened_at": row["opened_at"],
        "opened_time": _iso(row.get("opened_time", 0)),
        "escalated_at": row.get("escalated_at"),
        "escalation_reason": row.get("escalation", ""),
        "blocked_reads": row["blocked_reads"],
        "blocked_runs": row.get("blocked_runs", []),
        "claims": claims,
        "versions_read": {c["agent"]: c["based_on_version"] for c in claims},
        "signals": signals(votes, checks),
        "votes": {
            "majority": {"outcome": leader, "counts": counts},
            "weighted": weighted,
        },
        "fallback": fallback,
        "recommended_action": _recommend(et, claims, weighted, leader),
        "review": f"/review/{graph}/conflicts/{conflict_id}",
    }


def _recommend(
    et: EdgeType | None,
    claims: list[dict[str, Any]],
    weighted: Any,
    leader: str | None,
) -> dict[str, Any]:
    best = weighted["outcome"] if weighted["winner"] else leader
    pick = next((c for c in claims if c["outcome"] == best), None) if best else None
    if et is not None and et.fallback.fails_closed:
        is_safe = et.fallback.is_safe
        if pick is not None and is_safe(pick["polarity"] == "assert", pick["object"], strict=True):
            return {
                "action": "adopt",
                "claim_id": pick["claim_id"],
                "outcome": best,
                "why": f"the vote leads to a conservative outcome (domain {et.domain})",
            }
        safe = next(
            (c for c in claims if is_safe(c["polarity"] == "assert", c["object"], strict=True)),
            None,
        )
        return {
            "action": "adopt" if safe else "reject_all",
            "claim_id": safe["claim_id"] if safe else None,
            "outcome": safe["outcome"] if safe else None,
            "why": f"domain {et.domain} fails closed: serve {et.fallback.value} and review"
            + (f" (the vote leans to {best})" if best else ""),
        }
    if pick is not None:
        return {
            "action": "adopt",
            "claim_id": pick["claim_id"],
            "outcome": best,
            "why": f"calibrated weighted vote: margin {weighted['margin']:.3f}"
            if weighted["winner"]
            else "majority of writers",
        }
    return {
        "action": "review",
        "claim_id": None,
        "outcome": None,
        "why": "the writers are split evenly; a person must decide",
    }


def escalations(
    reader: ProjectionReader, graph: str, at: int, *, include_open: bool = False
) -> list[dict[str, Any]]:
    """Payloads of escalated conflicts (and every open one with ``include_open``) at ``at``."""
    out = []
    for row in reader.quarantine(at):
        if row.get("escalated_at") is None and not include_open:
            continue
        p = conflict_payload(reader, graph, row["conflict_id"], at)
        if p is not None:
            out.append(p)
    return out
