"""``claimgraph demo --scenario refunds``: the second article's world, on the embedded runtime.

A risk-control agent, a fraud agent and an experience agent decide refunds and card
transactions. Their disagreements are detected (decision conflict, low-confidence outlier,
stale data), settled by the declared resolver chain — CEL rules (block wins; a risk agent
above 0.95 is adopted; everyone below 0.6 goes to a person), a calibrated weighted vote, a
human — and money fails closed: while a decision is unknown readers get REJECT, and no
automatic resolver may approve a disputed payment. Time passes through the log (``tick``),
so quarantine deadlines fire. Then the calibrated merge learns who to trust.

The story runs on a simulated clock (log append times), so the 15-minute deadline passes in
a moment. Every claim is named after its refund and its agent (``R-1003:risk-control``), so the
conflicts (``cf:R-1003:fraud``, after the claim that opened one) and winners name the refund,
and every verdict line says which refund it settles and who decided.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from claimgraph.core.schema import GraphSchema, parse_schema
from claimgraph.core.wire import schema_dir
from claimgraph.demo.inventory import DemoOutcome
from claimgraph.demo.narrate import Say, cli_name, decider, verdict, wrap
from claimgraph.demo.narrate import prepare_dir as _prepare_dir
from claimgraph.demo.narrate import show as _show
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph, open_graph
from claimgraph.service.resolvers import run_resolvers

__all__ = ["REFUNDS_GRAPH", "run_refunds_demo"]

REFUNDS_GRAPH = "payments-demo"
T0 = 1_796_000_000_000  # 2026-11-30T00:53:20Z: the simulated clock's start
BOT = "resolver-bot"


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1_000  # every append: one simulated second later
        return self.now

    def skip(self, minutes: float) -> None:
        self.now += int(minutes * 60_000)


def run_refunds_demo(path: Path, say: Say = print) -> DemoOutcome:
    """Run the refunds scenario into ``path`` (recreated if it holds an earlier demo)."""
    _prepare_dir(path, REFUNDS_GRAPH)
    out = DemoOutcome(path=path)
    clock = _Clock()
    with open_graph(path, create=True, graph=REFUNDS_GRAPH, clock=clock) as g:
        _story(g, say, out, clock)
    return out


def _agent(name: str, verdict: str, confidence: float, evidence: list[str], why: str) -> Any:
    return {
        "agent": name,
        "task": "decide-refund",
        "confidence": confidence,
        "evidence": evidence,
        "reasoning": why,
    }


def _about(g: Graph, conflict_id: str) -> str:
    """What a conflict is about, e.g. ``refund R-1002`` (the subject its claims share)."""
    info = g.conflict(conflict_id) or {"members": []}
    claim = g.claim_info(info["members"][0]) if info["members"] else None
    return f"{claim['subject_type']} {claim['subject_id']}" if claim else conflict_id


def _outcome(g: Graph, winner: str | None) -> str:
    """A verdict's outcome in words: the winning claim's value and id, or every claim rejected."""
    if winner is None:
        return "every claim rejected"
    claim = g.claim_info(winner) or {}
    return f"{claim.get('object_id', '?')} ({winner} wins)"


def _resolve_pass(g: Graph, say: Say, out: DemoOutcome, key: str, schema: GraphSchema) -> None:
    for cid, v, r in run_resolvers(g, agent=BOT):
        out.receipts[f"{key}:{cid}"] = r
        out.reads.setdefault("verdicts", {})[cid] = (v.resolver, v.action, r.kind, r.reason)
        what = f"{v.action} {v.winner}" if v.winner else v.action
        _show(say, BOT, f"{cid}: {v.resolver} → {what}", r)
        if v.action != "escalate":  # an escalation's detail already says why each step passed
            for p in v.inputs.get("passed") or []:
                say(wrap(f"(passed: {p['resolver']}: {p['why']})", "        "))
        held = v.action == "escalate"
        outcome = "escalated, held for a person" if held else _outcome(g, v.winner)
        by = f"{decider(v.resolver, schema)}, written by {decider(BOT, schema)}"
        verdict(say, _about(g, cid), outcome, by)


def _story(g: Graph, say: Say, out: DemoOutcome, clock: _Clock) -> None:
    rec = out.receipts
    say("claimgraph demo --scenario refunds — agents that disagree about money\n")
    say("1. The payments admin publishes the schema (schemas/graphs/refunds.yaml): refund and")
    say("   transaction decisions, who may write them, the resolver chain, and fail-closed")
    say("   fallbacks (REJECT) for money.")
    doc = (schema_dir().parent / "graphs" / "refunds.yaml").read_text(encoding="utf-8")
    schema = parse_schema(doc, "refunds.yaml")
    rec["schema"] = r = g.publish_schema(
        doc, agent="payments-admin", source="refunds.yaml", command_id="schema:refunds"
    )
    _show(say, "payments-admin", "publish_schema refunds.yaml", r)

    say("\n2. Refund R-1001: the risk agent rejects, the experience agent approves.")
    risk = _agent("risk-control-agent", "REJECT", 0.92, ["order_db", "user_profile"], "")
    rec["r1_risk"] = r = g.assert_(
        "refund_decision",
        "refund:R-1001",
        "verdict:REJECT",
        command_id="R-1001:risk-control",
        **{**risk, "reasoning": "5 refunds in the last 30 days: risk rule R-07"},
    )
    _show(say, "risk-control", "refund R-1001 → REJECT (0.92)", r)
    rec["r1_exp"] = r = g.assert_(
        "refund_decision",
        "refund:R-1001",
        "verdict:APPROVE",
        command_id="R-1001:experience",
        **_agent("experience-agent", "APPROVE", 0.7, ["csat_history"], "loyal customer, 4 years"),
    )
    _show(say, "experience", "refund R-1001 → APPROVE (0.70)", r)
    slot = g.slot("refund_decision", "refund:R-1001")
    out.reads["r1_unknown"] = (slot.state, slot.fallback)
    say(f"   a reader of R-1001 now gets: {slot.state.upper()}, fallback {slot.fallback}")
    say("   (money fails closed: act on REJECT until the conflict is settled)")

    say("\n3. More refunds, more disagreement.")
    rec["r2_fraud"] = r = g.assert_(
        "refund_decision",
        "refund:R-1002",
        "verdict:BLOCK_TRANSACTION",
        command_id="R-1002:fraud",
        **_agent("fraud-agent", "BLOCK", 0.6, ["device_graph"], "card seen on 14 accounts"),
    )
    _show(say, "fraud", "refund R-1002 → BLOCK_TRANSACTION (0.60)", r)
    rec["r2_exp"] = r = g.assert_(
        "refund_decision",
        "refund:R-1002",
        "verdict:APPROVE",
        command_id="R-1002:experience",
        **_agent("experience-agent", "APPROVE", 0.9, ["csat_history"], "VIP customer"),
    )
    _show(say, "experience", "refund R-1002 → APPROVE (0.90)", r)
    rec["r3_risk"] = r = g.assert_(
        "refund_decision",
        "refund:R-1003",
        "verdict:APPROVE",
        command_id="R-1003:risk-control",
        **_agent("risk-control-agent", "APPROVE", 0.97, ["order_db"], "first refund, small"),
    )
    _show(say, "risk-control", "refund R-1003 → APPROVE (0.97)", r)
    slot = g.slot("refund_decision", "refund:R-1003")
    out.reads["r3_undisputed"] = (slot.state, slot.nodes)
    say(f"   nobody disputes it: a reader of R-1003 gets {slot.state.upper()} "
        f"{'/'.join(n[1] for n in slot.nodes)} (fail closed is for disagreement)")  # fmt: skip
    rec["r3_fraud"] = r = g.assert_(
        "refund_decision",
        "refund:R-1003",
        "verdict:REJECT",
        command_id="R-1003:fraud",
        **_agent("fraud-agent", "REJECT", 0.7, ["chargeback_db"], "chargeback last year"),
    )
    _show(say, "fraud", "refund R-1003 → REJECT (0.70)", r)
    slot = g.slot("refund_decision", "refund:R-1003")
    out.reads["r3_disputed"] = (slot.state, slot.fallback)
    say(f"   now disputed: a reader of R-1003 gets {slot.state.upper()}, fallback "
        f"{slot.fallback}, until a person decides")  # fmt: skip
    rec["r4_risk"] = r = g.assert_(
        "refund_decision",
        "refund:R-1004",
        "verdict:REJECT",
        command_id="R-1004:risk-control",
        **_agent("risk-control-agent", "REJECT", 0.45, ["login_geo"], "abnormal login location"),
    )
    _show(say, "risk-control", "refund R-1004 → REJECT (0.45)", r)
    rec["r4_fraud"] = r = g.assert_(
        "refund_decision",
        "refund:R-1004",
        "verdict:APPROVE",
        command_id="R-1004:fraud",
        **_agent("fraud-agent", "APPROVE", 0.52, ["history"], "historical behaviour normal"),
    )
    _show(say, "fraud", "refund R-1004 → APPROVE (0.52)", r)

    say("\n4. The resolver chain runs (rules in CEL, then weighted vote, then a human). Each")
    say("   verdict is written to the log as a command with its inputs — never recomputed.")
    _resolve_pass(g, say, out, "pass1", schema)
    r2 = g.slot("refund_decision", "refund:R-1002")
    out.reads["r2_after"] = [n[1] for n in r2.nodes]
    say(f"   R-1002 now reads: {', '.join(n[1] for n in r2.nodes)} (block wins)")

    say("\n5. What a person sees: `claimgraph escalations` — self-contained evidence.")
    esc = g.escalations()
    out.reads["escalated"] = sorted(p["conflict_id"] for p in esc)
    for p in esc:
        say(wrap(f"{_about(g, p['conflict_id'])}, conflict {p['conflict_id']}:", "   "))
        say(wrap(f"escalated because {p['escalation_reason']}", "      ", " " * 8))
        for c in p["claims"]:
            say(
                wrap(
                    f"{c['agent']} says {c['object']} (confidence {c['confidence']:g}, claim "
                    f"{c['claim_id']}): {c['reasoning']}",
                    "      ",
                    " " * 8,
                )
            )
        say(wrap(f"recommended: {p['recommended_action']['why']}", "      ", " " * 8))

    say("\n6. The resolver bot tries to approve R-1003 itself: refused, money needs a human.")
    conflict3 = rec["r3_fraud"].decision["conflict_id"] or ""
    rec["bot_approve"] = r = g.resolve(
        conflict3,
        agent=BOT,
        winner=rec["r3_risk"].command_id,
        resolver=BOT,
        command_id="R-1003:resolver-bot",
    )
    _show(say, BOT, "resolve R-1003 → APPROVE", r)
    say(
        wrap(
            f"refund R-1003: {decider(BOT, schema)} may not approve it; it still reads "
            f"{g.slot('refund_decision', 'refund:R-1003').fallback} (the fallback) until a "
            "person decides",
            "        ⇒ ",
            " " * 10,
        )
    )
    rec["human_approve"] = r = g.resolve(
        conflict3,
        agent="human:alice",
        winner=rec["r3_risk"].command_id,
        resolver="human:alice",
        rationale="called the customer; refund is legitimate",
        command_id="R-1003:alice",
    )
    _show(say, "human:alice", "resolve R-1003 → APPROVE", r)
    verdict(
        say, "refund R-1003", _outcome(g, rec["r3_risk"].command_id), decider("human:alice", schema)
    )
    conflict1 = rec["r1_exp"].decision["conflict_id"] or ""
    rec["human_r1"] = r = g.resolve(
        conflict1,
        agent="human:bob",
        winner=rec["r1_risk"].command_id,
        resolver="human:bob",
        rationale="R-07 holds",
        command_id="R-1001:bob",
    )
    _show(say, "human:bob", "resolve R-1001 → REJECT", r)
    verdict(
        say, "refund R-1001", _outcome(g, rec["r1_risk"].command_id), decider("human:bob", schema)
    )

    say("\n7. Refund R-1005 is disputed and nobody decides: 16 minutes pass (simulated),")
    say("   a ticker writes `tick`, the 15-minute deadline fires and the fallback applies.")
    rec["r5_risk"] = r = g.assert_(
        "refund_decision",
        "refund:R-1005",
        "verdict:REJECT",
        command_id="R-1005:risk-control",
        **_agent("risk-control-agent", "REJECT", 0.8, ["order_db"], "address mismatch"),
    )
    _show(say, "risk-control", "refund R-1005 → REJECT (0.80)", r)
    rec["r5_exp"] = r = g.assert_(
        "refund_decision",
        "refund:R-1005",
        "verdict:APPROVE",
        command_id="R-1005:experience",
        **_agent("experience-agent", "APPROVE", 0.75, ["csat_history"], "long-time customer"),
    )
    _show(say, "experience", "refund R-1005 → APPROVE (0.75), disputed", r)
    clock.skip(16)
    rec["tick"] = r = g.tick()
    _show(say, "ticker", "tick", r)
    r5 = g.slot("refund_decision", "refund:R-1005")
    out.reads["r5_after"] = [n[1] for n in r5.nodes]
    for x in r.decision["exits"]:
        et = schema.edge_types["refund_decision"]
        verdict(
            say,
            _about(g, x["conflict_id"]),
            f"{et.fallback.value}, the safe value, at the {x['trigger']}",
            f"{decider('fallback')} (domain {et.domain} fails closed)",
        )
    say(f"   R-1005 now reads: {', '.join(n[1] for n in r5.nodes)}")

    say("\n8. Transactions are merged by calibrated confidence. 60 past transactions were")
    say("   settled by people; the fraud agent was right far more often than the others,")
    say("   so its word now weighs more than its stated confidence alone.")
    _train(g)
    cal = g.calibration("transaction_decision")
    out.reads["calibration"] = cal
    for agent_name, (w, lo) in sorted(cal.items()):
        say(f"   {agent_name:<22} won {w:>3} lost {lo:>3}")
    rec["t_exp"] = r = g.assert_(
        "transaction_decision",
        "transaction:T-9001",
        "verdict:REJECT",
        agent="experience-agent",
        command_id="T-9001:experience",
        confidence=0.9,
        evidence=["basket_value"],
    )
    _show(say, "experience", "T-9001 → REJECT (0.90)", r)
    rec["t_fraud"] = r = g.assert_(
        "transaction_decision",
        "transaction:T-9001",
        "verdict:BLOCK_TRANSACTION",
        agent="fraud-agent",
        command_id="T-9001:fraud",
        confidence=0.8,
        evidence=["device_graph"],
    )
    _show(say, "fraud", "T-9001 → BLOCK_TRANSACTION (0.80)", r)
    m = r.decision["merge"]
    if m is not None:
        for c in m["contributions"]:
            say(
                f"        {c['agent']:<18} {c['outcome']:<32} confidence {c['confidence']:.2f}"
                f" × accuracy {c['accuracy']:.2f} = {c['weight']:.3f}"
            )
        verdict(
            say,
            "transaction T-9001",
            f"{m['outcome']}",
            "the calibrated merge (confidence-weighted-merge, the edge type's conflict policy)",
        )
    out.reads["t_after"] = [
        n[1] for n in g.slot("transaction_decision", "transaction:T-9001").nodes
    ]

    say("\n9. An auditor re-checks everything from the logs.")
    v = verify(g)
    say(
        wrap(
            f"verify: the governor, replayed over {v.commands} commands, reproduced every "
            "decision byte for byte — resolver verdicts included, read back from the log",
            "   ",
        )
    )
    a = audit(g)
    say(f"   audit: a fresh re-projection matches the live graph ({a.rows} rows)")
    out.reads["verified"] = True
    cli = cli_name()
    say(
        f"\nExplore it yourself:  {cli} --data {g.path} escalations --all\n"
        f"                      {cli} --data {g.path} calibration transaction_decision\n"
        f"                      {cli} --data {g.path} get refund_decision refund:R-1005"
    )


def _train(g: Graph) -> None:
    """Sixty settled transactions: people resolve each to the truth; calibration learns."""
    rnd = random.Random(7)
    accuracy = {"fraud-agent": 0.9, "experience-agent": 0.55, "risk-control-agent": 0.75}
    for i in range(60):
        truth = rnd.choice(["APPROVE", "REJECT"])
        subject = f"transaction:T-{i:04d}"
        for agent_name, acc in accuracy.items():
            says = truth if rnd.random() < acc else ("REJECT" if truth == "APPROVE" else "APPROVE")
            g.assert_(
                "transaction_decision",
                subject,
                f"verdict:{says}",
                agent=agent_name,
                confidence=0.9 if agent_name == "experience-agent" else 0.8,
                command_id=f"T-{i:04d}:{agent_name.removesuffix('-agent')}",
            )
        cid = g.slot("transaction_decision", subject).conflict_id
        if cid is None:
            continue
        info = g.conflict(cid) or {"claims": []}
        pick = next(
            (c for c in info["claims"] if (g.claim_info(c) or {}).get("object_id") == truth),
            None,
        )
        g.resolve(
            cid,
            agent="human:carol",
            winner=pick,
            resolver="human:carol",
            rationale="settled",
            command_id=f"T-{i:04d}:carol",
        )
