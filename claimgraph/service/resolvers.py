"""Resolvers: settle quarantined conflicts by each edge type's chain, *outside* the governor.

The chain is tried in order — ``rules`` (CEL conditions over the claims), ``majority``,
``weighted`` (calibrated weighted vote), ``arbiter`` (an external agent: a command or an HTTP
endpoint, so an LLM can be plugged in), ``human`` (stop: a person decides) and ``fallback``
(the domain's: fail closed, default, or escalate). The first resolver that reaches a verdict
wins; one that cannot decide (a tie, a margin too small, an arbiter that fails or answers
nonsense) passes to the next. A chain that ends without a verdict escalates.

Every verdict is written to the log as a command — ``resolve`` (winner or reject-all) or
``escalate`` — carrying the resolver's identity and, in ``inputs``, what it saw and decided on
(the rule and what matched, the votes and weights, the arbiter's raw answer). The governor
never recomputes a verdict: replaying the log replays the verdict, which is what keeps replay
deterministic when the arbiter is a language model that would answer differently next time.

In a fail-closed domain (payment, refund, permission) an automatic resolver may only pick a
conservative outcome (a denial, the fallback value or one of the declared ``safe`` values);
anything else needs a human's verdict — the governor enforces this too (``needs_human``).

Arbiters (an external command or an HTTP endpoint, :mod:`claimgraph.service.arbiters`) get
the escalation payload and answer a verdict. A pass is bounded (:class:`ResolverLimits`): CEL
rules are metered (:class:`~claimgraph.core.rules.RuleLimits`), an arbiter's answer is capped
in size and nesting and its time in seconds (its process group is killed at the timeout).
A resolver past a limit passes, with the limit named in the verdict's ``passed`` trail.

:func:`run_resolvers` uses only the graph port (``head``, ``schema_info``, ``quarantine``,
``escalation``, ``resolve``, ``escalate``), so it runs the same over an embedded graph, a
Kafka graph or the HTTP SDK. Given an :class:`ArbiterAllowList` (``serve`` always gives one),
only allow-listed arbiters run; a schema's arbiter that is not on it passes, with the reason
in the trail and in the escalation's reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claimgraph.core.governance import Vote, majority, merge
from claimgraph.core.rules import RULE_LIMITS, RuleLimits, matches, select
from claimgraph.core.schema import EdgeType, GraphSchema, ResolverSpec
from claimgraph.errors import ArbiterError, RuleError
from claimgraph.service.arbiters import (
    MAX_DEPTH,
    MAX_OUTPUT,
    Arbiter,
    ArbiterAllowList,
    CommandArbiter,
    HttpArbiter,
)
from claimgraph.service.schemas import schema_at

__all__ = [
    "RESOLVER_LIMITS",
    "Arbiter",
    "CommandArbiter",
    "HttpArbiter",
    "ResolverLimits",
    "Verdict",
    "arbiter_for",
    "decide_conflict",
    "run_resolvers",
]


@dataclass(frozen=True, slots=True)
class ResolverLimits:
    """What one resolver pass may cost: CEL rules, and each arbiter's answer and time."""

    rules: RuleLimits = RULE_LIMITS
    max_output: int = MAX_OUTPUT  # bytes of an arbiter's answer (stdout or HTTP body)
    max_depth: int = MAX_DEPTH  # JSON nesting of the answer, measured before parsing
    max_timeout: float = 300.0  # seconds: a schema's arbiter timeout is capped at this


RESOLVER_LIMITS = ResolverLimits()


@dataclass(slots=True)
class Verdict:
    """What a resolver chain concluded about one conflict."""

    action: str  # winner | reject_all | escalate
    resolver: str  # rules:NAME | majority | weighted | arbiter:NAME | human | fallback | chain
    rationale: str
    winner: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)

    def inputs_json(self) -> str:
        return json.dumps(self.inputs, sort_keys=True, separators=(",", ":"), default=str)


_KEPT = 16 * 1024  # bytes of an arbiter's answer kept whole in a verdict's inputs


def _kept(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """The answer as a verdict records it: whole if small, else its verdict keys, the start
    of its rationale and the SHA-256 of the whole (so the resolve command stays within the
    governor's size limit for ``inputs`` and is not rejected, and retried, every pass)."""
    raw = json.dumps(answer, sort_keys=True, default=str)
    if len(raw.encode()) <= _KEPT:
        return answer
    keys = ("winner", "reject_all", "escalate")
    return {
        **{k: answer[k] for k in keys if k in answer and len(str(answer[k])) <= 256},
        "rationale": str(answer.get("rationale", ""))[:1000],
        "truncated": {
            "bytes": len(raw.encode()),
            "sha256": hashlib.sha256(raw.encode()).hexdigest(),
        },
    }


def arbiter_for(spec: ResolverSpec, limits: ResolverLimits = RESOLVER_LIMITS) -> Arbiter:
    """The arbiter a schema's ``arbiter:`` entry describes, within ``limits``."""
    timeout = min(spec.timeout, limits.max_timeout)
    bounds = {"max_output": limits.max_output, "max_depth": limits.max_depth}
    if spec.command:
        return CommandArbiter(spec.command, timeout=timeout, name=spec.name, **bounds)
    assert spec.url is not None
    return HttpArbiter(spec.url, timeout=timeout, name=spec.name, **bounds)


def _votes(claims: Sequence[Mapping[str, Any]]) -> list[Vote]:
    return [
        Vote(
            c["claim_id"],
            c["agent"],
            c["outcome"],
            float(c["confidence"]),
            int(c["asserted_at"]),
            c["based_on_version"],
        )
        for c in sorted(claims, key=lambda c: (c["asserted_at"], c["claim_id"]))
    ]


def _safe(et: EdgeType, claims: Sequence[Mapping[str, Any]], claim_id: str) -> bool:
    if not et.fallback.fails_closed:
        return True
    c = next(c for c in claims if c["claim_id"] == claim_id)
    return et.fallback.is_safe(c["polarity"] == "assert", str(c["object"]), strict=True)


def decide_conflict(
    payload: Mapping[str, Any],
    et: EdgeType,
    *,
    arbiters: Mapping[str, Arbiter] | None = None,
    limits: ResolverLimits = RESOLVER_LIMITS,
    allowed: ArbiterAllowList | None = None,
) -> Verdict:
    """Run ``et``'s resolver chain over a conflict's escalation payload.

    ``arbiters`` overrides the arbiters the schema declares (by name), e.g. for tests or an
    in-process model client; otherwise they are built from the schema, within ``limits``.
    With ``allowed`` (a server's allow-list), an arbiter runs only as the allow-list defines
    its name; the schema's command or URL is never run, and a name not on it passes.
    """
    claims: list[Mapping[str, Any]] = list(payload["claims"])
    ids = {c["claim_id"] for c in claims}
    trail: list[dict[str, Any]] = []  # resolvers that passed, and why
    base = {"conflict_id": payload["conflict_id"], "version": payload["version"]}

    def verdict(
        action: str, resolver: str, rationale: str, winner: str | None, **kw: Any
    ) -> Verdict:
        inputs = {**base, **kw, "passed": trail}
        return Verdict(action, resolver, rationale[:1000], winner, inputs)

    def adopt(resolver: str, winner: str, rationale: str, **kw: Any) -> Verdict | None:
        if not _safe(et, claims, winner):
            trail.append(
                {
                    "resolver": resolver,
                    "why": f"would pick {winner}, not a conservative outcome in domain "
                    f"{et.domain} (fails closed): a human must decide",
                }
            )
            return None
        return verdict("winner", resolver, rationale, winner, **kw)

    activation = {"claims": claims, "edge_type": et.name, "domain": et.domain}
    for spec in et.resolvers:
        if spec.kind == "rules":
            for rule in spec.rules:
                name = f"rules:{rule.name}"
                try:
                    if not matches(rule.when, activation, limits.rules):
                        continue
                    if rule.escalate is not None:
                        return verdict(
                            "escalate", name, rule.escalate, None, rule=rule.name, when=rule.when
                        )
                    if rule.reject_all:
                        return verdict(
                            "reject_all",
                            name,
                            f"rule {rule.name}: reject all",
                            None,
                            rule=rule.name,
                            when=rule.when,
                        )
                    assert rule.adopt is not None
                    picked = select(rule.adopt, claims, activation, limits.rules)
                except RuleError as exc:
                    trail.append({"resolver": name, "why": f"CEL error: {exc}"})
                    continue
                outcomes = {c["outcome"] for c in claims if c["claim_id"] in picked}
                if len(outcomes) != 1:
                    trail.append(
                        {
                            "resolver": name,
                            "why": f"adopt selected {len(outcomes)} outcomes; needs exactly one",
                        }
                    )
                    continue
                v = adopt(
                    name,
                    picked[0],
                    f"rule {rule.name}: adopt {outcomes.pop()}",
                    rule=rule.name,
                    when=rule.when,
                    adopt=rule.adopt,
                    matched=picked,
                )
                if v is not None:
                    return v
        elif spec.kind == "majority":
            leader, counts = majority(_votes(claims))
            if leader is None:
                trail.append({"resolver": "majority", "why": f"tie: {counts}"})
                continue
            winner = next(c["claim_id"] for c in claims if c["outcome"] == leader)
            v = adopt("majority", winner, f"majority: {leader} {counts}", counts=counts)
            if v is not None:
                return v
        elif spec.kind == "weighted":
            record = {
                c["agent"]: (int(c["record"]["wins"]), int(c["record"]["losses"])) for c in claims
            }
            m = merge(_votes(claims), record, prior=et.merge_prior, threshold=spec.margin)
            if m["winner"] is None:
                trail.append(
                    {"resolver": "weighted", "why": f"margin {m['margin']:.3f} < {spec.margin:g}"}
                )
                continue
            v = adopt(
                "weighted",
                m["winner"],
                f"calibrated weighted vote: {m['outcome']} "
                f"(merged confidence {m['merged_confidence']:.3f}, margin {m['margin']:.3f})",
                merge=m,
            )
            if v is not None:
                return v
        elif spec.kind == "arbiter":
            name = f"arbiter:{spec.name}"
            arb = (arbiters or {}).get(spec.name)
            if arb is None and allowed is not None:
                entry = allowed.get(spec.name)
                if entry is None:
                    trail.append({"resolver": name, "why": allowed.refusal(spec.name)})
                    continue
                arb = entry.build(
                    min(spec.timeout, limits.max_timeout),
                    max_output=limits.max_output,
                    max_depth=limits.max_depth,
                )
            if arb is None:
                arb = arbiter_for(spec, limits)
            try:
                answer = dict(arb.arbitrate(payload))
            except ArbiterError as exc:
                trail.append({"resolver": name, "why": str(exc)[:300]})
                continue
            rationale = str(answer.get("rationale", ""))[:1000]
            if answer.get("escalate"):
                return verdict(
                    "escalate", name, str(answer["escalate"])[:200], None, answer=_kept(answer)
                )
            if answer.get("reject_all") is True:
                return verdict(
                    "reject_all", name, rationale or "reject all", None, answer=_kept(answer)
                )
            w = answer.get("winner")
            if isinstance(w, str) and w in ids:
                v = adopt(name, w, rationale or f"arbiter picked {w}", answer=_kept(answer))
                if v is not None:
                    return v
                continue
            trail.append({"resolver": name, "why": f"not a verdict: {json.dumps(answer)[:200]}"})
        elif spec.kind == "human":
            return verdict("escalate", "human", "a person decides (resolver chain: human)", None)
        elif spec.kind == "fallback":
            fb = et.fallback
            if fb.mode in ("fail_closed", "default") and fb.value is not None:
                hold = [
                    c["claim_id"]
                    for c in claims
                    if c["polarity"] == "assert" and str(c["object"]) == fb.value
                ]
                if hold:
                    return verdict(
                        "winner",
                        "fallback",
                        f"domain {et.domain} ({fb.mode}): adopt {fb.value}",
                        hold[0],
                        fallback=fb.value,
                    )
                if fb.mode == "fail_closed":
                    return verdict(
                        "escalate",
                        "fallback",
                        f"domain {et.domain} fails closed: readers get {fb.value}; "
                        "no claim holds it, a person decides",
                        None,
                        fallback=fb.value,
                    )
                trail.append({"resolver": "fallback", "why": f"no claim holds {fb.value}"})
                continue
            return verdict("escalate", "fallback", f"domain {et.domain}: escalate", None)
    return verdict("escalate", "chain", "no resolver reached a verdict", None)


def _fingerprint(row: Mapping[str, Any], schema: GraphSchema) -> str:
    raw = json.dumps(row, sort_keys=True, default=str) + schema.digest
    return hashlib.sha256(raw.encode()).hexdigest()


def _escalation_reason(v: Verdict) -> str:
    """The escalate command's reason (at most 256 characters): the verdict's rationale, and
    why the resolvers before it passed — e.g. an arbiter the server may not run."""
    passed = v.inputs.get("passed") or []
    why = "; ".join(f"{p['resolver']}: {p['why']}" for p in passed)
    return (v.rationale + (f" (passed: {why})" if why else ""))[:256]


def run_resolvers(
    graph: Any,
    *,
    agent: str,
    arbiters: Mapping[str, Arbiter] | None = None,
    at: int | None = None,
    limits: ResolverLimits = RESOLVER_LIMITS,
    allowed: ArbiterAllowList | None = None,
    seen: MutableMapping[str, str] | None = None,
    may_write: Callable[[], bool] | None = None,
) -> list[tuple[str, Verdict, Any]]:
    """One pass: run the resolver chain of every open, not yet escalated conflict.

    ``graph`` is any graph handle (embedded, Kafka or HTTP) and ``agent`` the resolver
    principal the verdicts are written as. Returns (conflict id, verdict, receipt) per conflict.
    ``allowed``: run only these arbiters (see :func:`decide_conflict`). ``seen`` remembers
    each conflict as a pass found it: a conflict unchanged since (its verdict was refused, say)
    is not tried again, so a worker woken by its own refused verdict does not loop; it keeps
    only conflicts still open and not escalated.
    ``may_write`` is asked before each verdict (a lease): the pass stops when it says no.
    """
    version = graph.head() if at is None else at
    schema = schema_at(graph, version)
    done: list[tuple[str, Verdict, Any]] = []
    if schema is None:
        return done
    still_open: set[str] = set()
    for row in graph.quarantine(at=version):
        if row.get("escalated_at") is not None:
            continue
        still_open.add(row["conflict_id"])
        et = schema.edge_types.get(row["edge_type"])
        if et is None or not et.resolvers:
            continue
        cid = row["conflict_id"]
        mark = _fingerprint(row, schema) if seen is not None else ""
        if seen is not None and seen.get(cid) == mark:
            continue
        payload = graph.escalation(cid, at=version)
        if payload is None:
            continue
        v = decide_conflict(payload, et, arbiters=arbiters, limits=limits, allowed=allowed)
        if may_write is not None and not may_write():
            return done
        if v.action == "escalate":
            r = graph.escalate(cid, agent=agent, reason=_escalation_reason(v), resolver=v.resolver)
        else:
            r = graph.resolve(
                cid,
                agent=agent,
                winner=v.winner if v.action == "winner" else None,
                resolver=v.resolver,
                rationale=v.rationale,
                inputs=v.inputs_json(),
            )
        if seen is not None:
            seen[cid] = mark
        done.append((cid, v, r))
    if seen is not None:  # bounded by the open conflicts: forget the ones that closed
        for cid in [c for c in seen if c not in still_open]:
            del seen[cid]
    return done
