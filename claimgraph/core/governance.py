"""Governance arithmetic shared by the governor, the resolvers and the readers (pure, no I/O).

* **Calibration**: a writer's accuracy for an edge type is learned from the log — the
  resolved conflicts its claims won (released) or lost (dismissed) — with a Beta prior
  ``(a, b)``: ``accuracy = (wins + a) / (wins + losses + a + b)``. With the default prior
  (2, 2) a new writer starts neutral at 0.5, and an agent that keeps losing is discounted
  however confident it says it is.
* **Merge** (``confidence-weighted-merge``, and the ``weighted`` resolver): each writer's
  latest claim counts once with weight ``confidence × accuracy``; weights add up per outcome.
  The merged confidence is the best outcome's share of the total weight, and the margin is
  ``(best − second best) / total``. Ties and margins below the edge type's threshold decide
  nothing.
* **Signals** (decision-like edge types, the second article's detector): *decision
  conflict* (several outcomes), *low-confidence outlier* (a confidence below ``ratio ×`` the
  group's mean) and *stale data* (``asserted_at`` or ``based_on_version`` too far apart).

Everything here is deterministic: inputs are sorted before they are summed, so the same
claims give the same floats on every replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from claimgraph.core.model import Contribution, MergeRecord, Signal
from claimgraph.core.schema import DecisionChecks, EdgeType

__all__ = [
    "Vote",
    "accuracy",
    "iso_utc",
    "label",
    "majority",
    "merge",
    "outcome_by",
    "signals",
]


@dataclass(frozen=True, slots=True)
class Vote:
    """One writer's claim as the arithmetic sees it."""

    claim_id: str
    agent: str
    outcome: str  # a label; claims with equal labels agree
    confidence: float
    asserted_at: int = 0
    based_on_version: int | None = None


def accuracy(wins: int, losses: int, prior: tuple[float, float] = (2.0, 2.0)) -> float:
    """A writer's calibrated accuracy: the Beta posterior mean of its resolved record."""
    a, b = prior
    return (wins + a) / (wins + losses + a + b)


def outcome_by(et: EdgeType | None) -> str:
    """What tells the outcomes of an edge type's conflicts apart: object, subject or both."""
    if et is None:
        return "full"
    if et.subject_exclusive and not et.object_exclusive:
        return "object"  # many-to-one: a subject's slot holds one object
    if et.object_exclusive and not et.subject_exclusive:
        return "subject"  # one-to-many: an object's slot holds one subject
    return "object" if not et.subject_exclusive else "full"


def label(polarity: str, st: str, si: str, ot: str, oi: str, by: str) -> str:
    """A readable outcome: ``assert verdict:REJECT``, ``deny refund:r1`` or the whole edge."""
    node = {"object": f"{ot}:{oi}", "subject": f"{st}:{si}"}.get(by, f"{st}:{si} -> {ot}:{oi}")
    return f"{polarity} {node}"


def _latest_per_agent(votes: Sequence[Vote]) -> list[Vote]:
    seen: dict[str, Vote] = {}
    for v in votes:  # callers pass votes oldest first: a later one replaces an earlier one
        seen[v.agent] = v
    return sorted(seen.values(), key=lambda v: (v.agent, v.claim_id))


def merge(
    votes: Sequence[Vote],
    record: Mapping[str, tuple[int, int]],
    *,
    prior: tuple[float, float] = (2.0, 2.0),
    threshold: float = 0.0,
) -> MergeRecord:
    """Confidence-weighted merge with calibrated weights.

    ``record`` maps an agent to its (wins, losses) for the edge type. ``winner`` is a claim of
    the best outcome, or ``None`` when the margin is not above zero and at least ``threshold``.
    """
    counted = _latest_per_agent(votes)
    contributions: list[Contribution] = []
    scores: dict[str, float] = {}
    for v in counted:
        wins, losses = record.get(v.agent, (0, 0))
        acc = accuracy(wins, losses, prior)
        w = float(v.confidence) * acc
        contributions.append(
            {
                "claim_id": v.claim_id,
                "agent": v.agent,
                "outcome": v.outcome,
                "confidence": float(v.confidence),
                "accuracy": round(acc, 6),
                "weight": round(w, 6),
            }
        )
        scores[v.outcome] = scores.get(v.outcome, 0.0) + w
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    total = sum(s for _, s in ranked)
    if not ranked or total <= 0:
        return {
            "outcome": ranked[0][0] if ranked else "",
            "winner": None,
            "merged_confidence": 0.0,
            "margin": 0.0,
            "threshold": threshold,
            "contributions": contributions,
        }
    best_outcome, best = ranked[0]
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    margin = (best - second) / total
    winner = None
    if margin > 0 and margin >= threshold:
        winner = next(c["claim_id"] for c in contributions if c["outcome"] == best_outcome)
    return {
        "outcome": best_outcome,
        "winner": winner,
        "merged_confidence": round(best / total, 6),
        "margin": round(margin, 6),
        "threshold": threshold,
        "contributions": contributions,
    }


def majority(votes: Sequence[Vote]) -> tuple[str | None, dict[str, int]]:
    """The outcome most writers hold (one vote per writer); ``None`` on a tie for first."""
    counts: dict[str, int] = {}
    for v in _latest_per_agent(votes):
        counts[v.outcome] = counts.get(v.outcome, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None, counts
    return ranked[0][0], counts


def iso_utc(ms: int) -> str:
    """A log or event time as ISO 8601 UTC (deterministic: no local time zone).

    Total over every integer: a year outside 0000-9999 is written in ISO 8601's expanded form
    (``+10000-01-01T00:00:00.000Z``, ``-0001-...``) instead of raising, as ``datetime`` does
    past year 9999 — so a time an older rules revision accepted can always be formatted.
    """
    days, rem = divmod(ms, 86_400_000)
    secs, frac = divmod(rem, 1000)
    # civil_from_days (H. Hinnant): the proleptic Gregorian date of a day count
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    ymd = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):04d}"
    hms = f"{secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
    return f"{ymd}-{month:02d}-{day:02d}T{hms}.{frac:03d}Z"


def _fmt_ms(ms: int) -> str:
    secs = ms / 1000
    if secs < 120:
        return f"{secs:g}s"
    if secs < 7200:
        return f"{round(secs / 60, 1):g}min"
    return f"{round(secs / 3600, 1):g}h"


def signals(votes: Sequence[Vote], checks: DecisionChecks) -> list[Signal]:
    """Decision-conflict findings over a group of writers' latest claims."""
    group = _latest_per_agent(votes)
    if len(group) < 2:
        return []
    out: list[Signal] = []
    outcomes = sorted({v.outcome for v in group})
    ids = [v.claim_id for v in group]
    if len(outcomes) > 1:
        out.append(
            {
                "kind": "decision_conflict",
                "detail": f"{len(group)} writers, {len(outcomes)} outcomes: "
                + ", ".join(outcomes)[:400],
                "claims": ids,
            }
        )
    mean = sum(v.confidence for v in group) / len(group)
    low = [v for v in group if v.confidence < checks.outlier_ratio * mean]
    if low:
        out.append(
            {
                "kind": "low_confidence_outlier",
                "detail": ", ".join(f"{v.agent} {v.confidence:g}" for v in low)[:300]
                + f" below {checks.outlier_ratio:g} x the group's mean {mean:.3f}",
                "claims": [v.claim_id for v in low],
            }
        )
    times = [v.asserted_at for v in group]
    spread = max(times) - min(times)
    problems = []
    if spread > checks.max_time_skew_ms:
        problems.append(
            f"asserted {_fmt_ms(spread)} apart (at most {_fmt_ms(checks.max_time_skew_ms)})"
        )
    based = [v.based_on_version for v in group if v.based_on_version is not None]
    if checks.max_version_skew is not None and len(based) > 1:
        vspread = max(based) - min(based)
        if vspread > checks.max_version_skew:
            problems.append(
                f"based on versions {min(based)}..{max(based)} "
                f"(at most {checks.max_version_skew} apart)"
            )
    if problems:
        out.append({"kind": "stale_data", "detail": "; ".join(problems), "claims": ids})
    return out
