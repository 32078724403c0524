"""Governance in depth: calibrated merge, exit conditions, resolvers, signals, fallbacks."""

from __future__ import annotations

import json
import random
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.governance import Vote, majority, merge, signals
from claimgraph.core.schema import DecisionChecks, parse_schema
from claimgraph.core.wire import decode_command, schema_dir
from claimgraph.errors import SchemaError, UnknownSlotError
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from claimgraph.service.resolvers import CommandArbiter, HttpArbiter, decide_conflict, run_resolvers

T0 = 1_800_000_000_000
MIN = 60_000
REFUNDS = (schema_dir().parent / "graphs" / "refunds.yaml").read_text(encoding="utf-8")


class Clock:
    """A simulated wall clock for the embedded log: append times the test controls."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1
        return self.now


def _open(tmp_path: Path, schema: str, clock: Clock | None = None, name: str = "g") -> Graph:
    g = claimgraph.open(tmp_path / name, create=True, graph="payments", clock=clock)
    r = g.publish_schema(schema, agent="payments-admin")
    assert r.kind == "accepted", r.decision["detail"]
    return g


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def refunds(tmp_path: Path, clock: Clock) -> Iterator[Graph]:
    g = _open(tmp_path, REFUNDS, clock)
    yield g
    g.close()


def _refund(g: Graph, rid: str, verdict: str, agent: str, conf: float, **kw: Any) -> Any:
    return g.assert_(
        "refund_decision", f"refund:{rid}", f"verdict:{verdict}", agent=agent, confidence=conf, **kw
    )


# -- calibrated merge -------------------------------------------------------------------------

SIM_SCHEMA = """
principals: {admins: [payments-admin], humans: ["oracle"]}
node_types: [case, label]
edge_types:
  - name: verdict
    subject: case
    object: label
    writers: [{agent: "agent-*"}]
    cardinality: many-to-one
    conflict_policy: confidence-weighted-merge
    merge: {margin: MARGIN}
"""
ACCURACY = {"agent-good": 0.9, "agent-fair": 0.75, "agent-poor": 0.55}
LABELS = ("APPROVE", "REVIEW", "REJECT")


def _opinions(rnd: random.Random, truth: str) -> list[tuple[str, str, float]]:
    """Each agent is right with its accuracy, else picks a wrong label; the poor one is loud."""
    out = []
    for agent, acc in ACCURACY.items():
        label = truth if rnd.random() < acc else rnd.choice([x for x in LABELS if x != truth])
        conf = 0.95 if agent == "agent-poor" else round(rnd.uniform(0.6, 0.9), 2)
        out.append((agent, label, conf))
    return out


def _claims(case: str, ops: list[tuple[str, str, float]]) -> list[Any]:
    return [
        {
            "type": "claim",
            "command_id": f"{case}/{agent}",
            "graph": "payments",
            "agent": agent,
            "task": "",
            "run_id": None,
            "edge_type": "verdict",
            "subject_type": "case",
            "subject_id": case,
            "object_type": "label",
            "object_id": label,
            "polarity": "assert",
            "confidence": conf,
            "evidence": [],
            "reasoning": "",
            "asserted_at": T0,
            "based_on_version": None,
            "properties": {},
        }
        for agent, label, conf in ops
    ]


def test_calibration_learns_who_to_trust_and_beats_majority(tmp_path: Path) -> None:
    """>= 2,000 conflicts resolved by an oracle: weights order by true accuracy, and the
    governor's calibrated merge is at least as accurate as majority vote on fresh cases."""
    rnd = random.Random(2026)
    g = _open(tmp_path, SIM_SCHEMA.replace("MARGIN", "1.0"))  # training: every dispute waits
    resolved = 0
    case = 0
    while resolved < 2000:
        batch: list[Any] = []
        truths: dict[str, str] = {}
        for _ in range(200):
            case += 1
            cid = f"c{case}"
            truths[cid] = truth = rnd.choice(LABELS)
            batch += _claims(cid, _opinions(rnd, truth))
        g.submit(batch)
        verdicts = []
        for row in g.quarantine():
            subject = g.claim_info(row["claims"][0])["subject_id"]  # type: ignore[index]
            winner = next(
                (
                    c
                    for c in row["claims"]
                    if g.claim_info(c)["object_id"] == truths[subject]  # type: ignore[index]
                ),
                None,
            )
            verdicts.append(
                {
                    "type": "resolve",
                    "command_id": f"r-{row['conflict_id']}",
                    "graph": "payments",
                    "agent": "oracle",
                    "task": "",
                    "conflict_id": row["conflict_id"],
                    "winner": winner,
                    "resolver": "oracle",
                    "rationale": "ground truth",
                }
            )
        receipts = g.submit(verdicts)
        assert all(r.kind == "resolved" for r in receipts), receipts[0].decision
        resolved += len(receipts)
    cal = g.calibration("verdict")
    acc = {a: (w + 2) / (w + lo + 4) for a, (w, lo) in cal.items()}
    assert acc["agent-good"] > acc["agent-fair"] > acc["agent-poor"], acc
    assert abs(acc["agent-good"] - 0.9) < 0.1 and acc["agent-poor"] < 0.65, acc

    # evaluation: margin 0, so the governor's merge decides every disputed case itself
    g.publish_schema(SIM_SCHEMA.replace("MARGIN", "0.0"), agent="payments-admin")
    merged_right = majority_right = n = 0
    batch, truths_eval, votes_eval = [], {}, {}
    for i in range(1500):
        cid = f"e{i}"
        truth = rnd.choice(LABELS)
        ops = _opinions(rnd, truth)
        truths_eval[cid] = truth
        votes_eval[cid] = [Vote(f"{cid}/{a}", a, lab, c) for a, lab, c in ops]
        batch += _claims(cid, ops)
    g.submit(batch)
    for cid, truth in truths_eval.items():
        n += 1
        slot = g.slot("verdict", f"case:{cid}")
        merged_right += slot.state == "present" and slot.nodes == (("label", truth),)
        leader, _ = majority(votes_eval[cid])
        majority_right += leader == truth  # a tie (no leader) counts as wrong
    merged_acc, majority_acc = merged_right / n, majority_right / n
    print(
        f"\ncalibration after {resolved} resolved conflicts: "
        + ", ".join(f"{a} {acc[a]:.3f}" for a in ACCURACY)
        + f"\naccuracy on {n} fresh cases: calibrated merge {merged_acc:.3f}, "
        f"majority vote {majority_acc:.3f}"
    )
    assert merged_acc >= majority_acc, (merged_acc, majority_acc)
    assert merged_acc > 0.85
    g.close()


def test_merge_records_every_contribution_and_quarantines_below_margin(graph: Graph) -> None:
    """The decision names the merged outcome, confidence and each writer's weight."""
    graph.assert_("scored", "service:a", "team:x", agent="m1", confidence=0.6)
    r = graph.assert_("scored", "service:a", "team:y", agent="m2", confidence=0.55)
    m = r.decision["merge"]
    assert (r.kind, r.reason) == ("quarantined", "merge_margin")
    assert m is not None and m["winner"] is None and m["margin"] < 0.2
    assert {c["agent"] for c in m["contributions"]} == {"m1", "m2"}
    assert all(c["accuracy"] == 0.5 for c in m["contributions"])  # new writers start neutral
    assert graph.slot("scored", "service:a").state == "unknown"


def test_an_outvoted_writer_still_counts_in_the_next_merge(graph: Graph) -> None:
    """m2 loses alone, m3 agrees with m2: together they outweigh m1 and m2 is released."""
    graph.assert_("scored", "service:a", "team:x", agent="m1", confidence=0.9)
    lost = graph.assert_("scored", "service:a", "team:y", agent="m2", confidence=0.5)
    assert lost.reason == "outvoted"
    r = graph.assert_("scored", "service:a", "team:y", agent="m3", confidence=1.0)
    assert (r.kind, r.reason) == ("accepted", "merged")
    assert r.decision["released"] == [lost.command_id]
    assert graph.edge("scored", "service:a", "team:y").claims == (r.command_id, lost.command_id)
    assert graph.edge("scored", "service:a", "team:x").state == "absent"


def test_merge_arithmetic() -> None:
    """Weights are confidence x calibrated accuracy; an overconfident loser is discounted."""
    votes = [Vote("1", "loud", "A", 0.99), Vote("2", "quiet", "B", 0.6)]
    naive = merge(votes, {})
    assert naive["outcome"] == "A"
    calibrated = merge(votes, {"loud": (2, 30), "quiet": (30, 2)})
    assert calibrated["outcome"] == "B" and calibrated["winner"] == "2"
    assert merge(votes, {}, threshold=0.99)["winner"] is None
    tie = [Vote("1", "a", "A", 0.5), Vote("2", "b", "B", 0.5)]
    assert merge(tie, {})["winner"] is None and majority(tie)[0] is None


# -- decision conflicts (second article) -------------------------------------------------------


def test_signals_decision_conflict_outlier_and_stale_data() -> None:
    checks = DecisionChecks(outlier_ratio=0.5, max_time_skew_ms=5 * MIN, max_version_skew=10)
    votes = [
        Vote("r", "risk", "REJECT", 0.92, T0, 100),
        Vote("f", "fraud", "REJECT", 0.88, T0 + 6 * MIN, 104),
        Vote("e", "experience", "APPROVE", 0.3, T0 + MIN, 80),
    ]
    kinds = {s["kind"]: s for s in signals(votes, checks)}
    assert set(kinds) == {"decision_conflict", "low_confidence_outlier", "stale_data"}
    assert kinds["low_confidence_outlier"]["claims"] == ["e"]
    assert kinds["stale_data"]["detail"] == (
        "asserted 6min apart (at most 5min); based on versions 80..104 (at most 10 apart)"
    )
    agree = [Vote("r", "risk", "REJECT", 0.9, T0), Vote("f", "fraud", "REJECT", 0.8, T0)]
    assert signals(agree, checks) == []


def test_signals_land_in_the_decision_record(refunds: Graph) -> None:
    _refund(refunds, "R-1", "REJECT", "risk-control-agent", 0.92, asserted_at=T0)
    r = _refund(refunds, "R-1", "APPROVE", "experience-agent", 0.2, asserted_at=T0 + 6 * MIN)
    kinds = [s["kind"] for s in r.decision["signals"]]
    assert kinds == ["decision_conflict", "low_confidence_outlier", "stale_data"]
    p = refunds.escalation(r.decision["conflict_id"] or "")
    assert p is not None and [s["kind"] for s in p["signals"]] == kinds


# -- resolvers ----------------------------------------------------------------------------------


def test_seed_rules_give_the_seed_outcomes(refunds: Graph) -> None:
    """Block wins; all below 0.6 escalates; a risk agent above 0.95 is adopted (when safe)."""
    _refund(refunds, "R-1", "BLOCK_TRANSACTION", "fraud-agent", 0.6)
    b = _refund(refunds, "R-1", "APPROVE", "experience-agent", 0.9)
    _refund(refunds, "R-2", "REJECT", "risk-control-agent", 0.45)
    c = _refund(refunds, "R-2", "APPROVE", "fraud-agent", 0.52)
    _refund(refunds, "R-3", "APPROVE", "experience-agent", 0.7)
    d = _refund(refunds, "R-3", "REJECT", "risk-control-agent", 0.97)
    done = {cid: (v, r) for cid, v, r in run_resolvers(refunds, agent="resolver-bot")}
    v, r = done[b.decision["conflict_id"]]
    assert (v.resolver, r.kind) == ("rules:block-wins", "resolved")
    assert refunds.slot("refund_decision", "refund:R-1").nodes == (
        ("verdict", "BLOCK_TRANSACTION"),
    )
    v, r = done[c.decision["conflict_id"]]
    assert (v.resolver, v.action, r.reason) == ("rules:low-confidence", "escalate", "escalated")
    assert v.rationale == "CONFIDENCE_TOO_LOW"
    v, r = done[d.decision["conflict_id"]]
    assert (v.resolver, r.kind) == ("rules:trust-risk-agent", "resolved")
    assert refunds.slot("refund_decision", "refund:R-3").nodes == (("verdict", "REJECT"),)
    # the verdict and its inputs are in the commands log: the rule, and what matched
    [rec] = refunds.logs.commands.read(r.position, 1)
    cmd = decode_command(rec.value)
    assert cmd["type"] == "resolve" and cmd["resolver"] == "rules:trust-risk-agent"  # type: ignore[typeddict-item]
    inputs = json.loads(cmd["inputs"])  # type: ignore[typeddict-item]
    assert inputs["rule"] == "trust-risk-agent" and inputs["matched"] == [d.command_id]


def test_a_payment_never_approves_without_a_human(refunds: Graph) -> None:
    """The trusted risk agent approving at 0.99 is not enough; the bot is refused; a human
    may approve; readers meanwhile get the fail-closed value."""
    a = _refund(refunds, "R-7", "APPROVE", "risk-control-agent", 0.99)
    _refund(refunds, "R-7", "REJECT", "fraud-agent", 0.3)
    conflict = refunds.slot("refund_decision", "refund:R-7").conflict_id
    assert conflict is not None
    s = refunds.slot("refund_decision", "refund:R-7")
    assert (s.state, s.fallback) == ("unknown", "REJECT")
    [(_cid, v, _r)] = run_resolvers(refunds, agent="resolver-bot")
    assert v.action == "escalate"  # trust-risk would approve: passed over, a human decides
    assert any("not a conservative outcome" in p["why"] for p in v.inputs["passed"])
    bot = refunds.resolve(conflict, agent="resolver-bot", winner=a.command_id, resolver="x")
    assert (bot.kind, bot.reason) == ("rejected", "needs_human")
    admin = refunds.resolve(conflict, agent="payments-admin", winner=a.command_id)
    assert admin.reason == "needs_human"  # an admin is not a person by declaration
    human = refunds.resolve(conflict, agent="human:alice", winner=a.command_id)
    assert human.kind == "resolved"
    assert refunds.slot("refund_decision", "refund:R-7").nodes == (("verdict", "APPROVE"),)


def test_payment_merge_never_auto_approves(refunds: Graph) -> None:
    """Under confidence-weighted-merge in a payment domain, an approving winner waits."""
    refunds.assert_(
        "transaction_decision", "transaction:T1", "verdict:REJECT", agent="fraud-agent",
        confidence=0.2,
    )  # fmt: skip
    r = refunds.assert_(
        "transaction_decision", "transaction:T1", "verdict:APPROVE",
        agent="experience-agent", confidence=0.95,
    )  # fmt: skip
    assert (r.kind, r.reason) == ("quarantined", "needs_human")
    assert r.decision["merge"]["outcome"] == "assert verdict:APPROVE"  # type: ignore[index]
    s = refunds.slot("transaction_decision", "transaction:T1")
    assert (s.state, s.fallback) == ("unknown", "REJECT")


ARBITER = """
import json, random, sys
payload = json.load(sys.stdin)
ids = [c["claim_id"] for c in payload["claims"]]
print(json.dumps({"winner": random.SystemRandom().choice(ids), "rationale": "coin"}))
"""

GENERAL = """
principals: {admins: [payments-admin], resolvers: [resolver-bot]}
node_types: [ticket, team]
edge_types:
  - name: routed_to
    subject: ticket
    object: team
    writers: [{agent: "*"}]
    cardinality: many-to-one
    conflict_policy: quarantine
    resolvers:
      - arbiter: {name: coin, command: [PYTHON, ARBITER]}
      - human
"""


def test_replay_is_deterministic_with_a_non_deterministic_arbiter(tmp_path: Path) -> None:
    """The arbiter answers differently each time; its verdicts are read back, not rerun."""
    script = tmp_path / "arbiter.py"
    script.write_text(ARBITER)
    schema = GENERAL.replace("PYTHON", sys.executable).replace("ARBITER", str(script))
    g = _open(tmp_path, schema)
    for i in range(6):
        g.assert_("routed_to", f"ticket:t{i}", "team:a", agent="triage-1")
        g.assert_("routed_to", f"ticket:t{i}", "team:b", agent="triage-2")
        g.assert_("routed_to", f"ticket:t{i}", "team:c", agent="triage-3")
    payload = g.escalations(include_open=True)[0]
    arb = CommandArbiter([sys.executable, str(script)])
    answers = {arb.arbitrate(payload)["winner"] for _ in range(12)}
    assert len(answers) > 1, "the arbiter should not be deterministic"
    done = run_resolvers(g, agent="resolver-bot")
    assert len(done) == 6
    assert all(v.resolver == "arbiter:coin" and r.kind == "resolved" for _, v, r in done)
    assert all(json.loads(v.inputs_json())["answer"]["rationale"] == "coin" for _, v, _r in done)
    before = [g.slot("routed_to", f"ticket:t{i}").nodes for i in range(6)]
    assert verify(g).decisions == g.head() + 1  # the governor replays the verdicts byte for byte
    audit(g)
    g.close()
    g = claimgraph.open(tmp_path / "g")
    assert [g.slot("routed_to", f"ticket:t{i}").nodes for i in range(6)] == before
    g.close()


def test_failing_arbiters_pass_to_the_next_resolver(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sys; print('not json'); sys.exit(0)")
    schema = GENERAL.replace("PYTHON", sys.executable).replace("ARBITER", str(bad))
    g = _open(tmp_path, schema)
    g.assert_("routed_to", "ticket:t1", "team:a", agent="triage-1")
    g.assert_("routed_to", "ticket:t1", "team:b", agent="triage-2")
    [(_, v, r)] = run_resolvers(g, agent="resolver-bot")
    assert (v.resolver, v.action, r.reason) == ("human", "escalate", "escalated")
    assert "not JSON" in v.inputs["passed"][0]["why"]
    g.close()


class _Arbiter(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["content-length"])))
        best = max(payload["claims"], key=lambda c: c["confidence"])
        body = json.dumps({"winner": best["claim_id"], "rationale": "highest confidence"})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_http_arbiter(tmp_path: Path) -> None:
    """An arbitration agent behind a real HTTP endpoint (where a user plugs an LLM in)."""
    server = HTTPServer(("127.0.0.1", 0), _Arbiter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/arbitrate"
        schema = GENERAL.replace("command: [PYTHON, ARBITER]", f"url: {url!r}")
        g = _open(tmp_path, schema)
        g.assert_("routed_to", "ticket:t1", "team:a", agent="triage-1", confidence=0.4)
        b = g.assert_("routed_to", "ticket:t1", "team:b", agent="triage-2", confidence=0.8)
        [(_, v, r)] = run_resolvers(g, agent="resolver-bot")
        assert (v.resolver, v.winner, r.kind) == ("arbiter:coin", b.command_id, "resolved")
        answer = HttpArbiter(url).arbitrate({"claims": [{"claim_id": "x", "confidence": 1.0}]})
        assert answer["winner"] == "x"
        g.close()
    finally:
        server.shutdown()


def test_rule_errors_pass_and_bad_cel_is_a_schema_error() -> None:
    with pytest.raises(SchemaError) as e:
        parse_schema(REFUNDS.replace('c.object == "BLOCK_TRANSACTION")', "c.object == )"))
    assert "resolvers[0].rules[0].when: not a valid CEL expression" in e.value.report()
    et = parse_schema(
        REFUNDS.replace("claims.all(c, c.confidence < 0.6)", "claims.all(c, c.nope < 0.6)")
    ).edge_types["refund_decision"]
    payload = {
        "conflict_id": "cf:1",
        "version": 3,
        "claims": [
            {"claim_id": "a", "agent": "fraud-agent", "object": "REJECT", "polarity": "assert",
             "outcome": "assert verdict:REJECT", "confidence": 0.5, "asserted_at": 1,
             "based_on_version": None, "record": {"wins": 0, "losses": 0}},
            {"claim_id": "b", "agent": "experience-agent", "object": "APPROVE",
             "polarity": "assert", "outcome": "assert verdict:APPROVE", "confidence": 0.5,
             "asserted_at": 2, "based_on_version": None, "record": {"wins": 0, "losses": 0}},
        ],
    }  # fmt: skip
    v = decide_conflict(payload, et)
    assert any("CEL error" in p["why"] for p in v.inputs["passed"])
    assert v.resolver == "human"  # weighted: a tie; then the human step


# -- exit conditions ----------------------------------------------------------------------------


def test_deadline_exit_by_fallback_and_by_escalation(refunds: Graph, clock: Clock) -> None:
    """No quarantine outlives its deadline: at the first tick past it, it falls back or
    escalates, and the decision says which and why."""
    _refund(refunds, "R-1", "REJECT", "risk-control-agent", 0.8)
    a = _refund(refunds, "R-1", "APPROVE", "experience-agent", 0.8)
    refunds.assert_(
        "transaction_decision", "transaction:T1", "verdict:REJECT", agent="fraud-agent",
        confidence=0.5,
    )  # fmt: skip
    t = refunds.assert_(
        "transaction_decision", "transaction:T1", "verdict:APPROVE", agent="experience-agent",
        confidence=0.5,
    )  # fmt: skip
    clock.now += 9 * MIN
    assert refunds.tick().decision["exits"] == []
    clock.now += 2 * MIN  # the transaction's 10m deadline passes
    r = refunds.tick()
    [x] = r.decision["exits"]
    assert (x["conflict_id"], x["trigger"], x["action"]) == (
        t.decision["conflict_id"], "deadline", "escalate",
    )  # fmt: skip
    assert [p["conflict_id"] for p in refunds.escalations()] == [t.decision["conflict_id"]]
    clock.now += 5 * MIN  # the refund's 15m deadline: fallback REJECT, which a claim holds
    r = refunds.tick()
    [x] = r.decision["exits"]
    assert (x["conflict_id"], x["action"]) == (a.decision["conflict_id"], "fallback")
    assert refunds.slot("refund_decision", "refund:R-1").nodes == (("verdict", "REJECT"),)
    assert refunds.conflict(a.decision["conflict_id"] or "")["outcome"] == "fallback"  # type: ignore[index]
    assert refunds.tick().decision["exits"] == []  # each exit fires once
    verify(refunds)


def test_no_quarantine_survives_its_deadline(refunds: Graph, clock: Clock) -> None:
    rnd = random.Random(5)
    agents = ["risk-control-agent", "fraud-agent", "experience-agent"]
    for i in range(40):
        for agent in rnd.sample(agents, 2):
            _refund(refunds, f"R-{i}", rnd.choice(["APPROVE", "REJECT", "HOLD"]), agent, 0.7)
        clock.now += rnd.randrange(MIN)
        if rnd.random() < 0.3:
            refunds.tick()
    assert refunds.quarantine(), "the scenario should leave open conflicts"
    clock.now += 15 * MIN + 1
    refunds.tick()
    for row in refunds.quarantine():
        assert row["escalated_at"] is not None, row  # open ones are all with a person now
    closed = [c for c in refunds.quarantine(include_closed=True) if not c["open"]]
    assert closed and all(c["outcome"] == "fallback" for c in closed)


def test_a_blocked_read_counts_once_per_reader_run_and_conflict(refunds: Graph) -> None:
    """A run's blocked reads count once for its reader; replays, invented runs, runs pinned
    before the conflict opened and reports outside a run change nothing (issue 11.3)."""
    _refund(refunds, "R-1", "REJECT", "risk-control-agent", 0.8)
    before = refunds.head()
    a = _refund(refunds, "R-1", "HOLD", "experience-agent", 0.8)
    conflict = a.decision["conflict_id"] or ""
    with refunds.run(agent="risk-control-agent") as run:
        for _ in range(3):  # the same read three times, and another: one run, counted once
            run.slot("refund_decision", "refund:R-1")
        run.edge("refund_decision", "refund:R-1", "verdict:REJECT")
    row = refunds.conflict(conflict)
    assert row is not None and (row["blocked_reads"], row["blocked_runs"]) == (1, [run.run_id])
    hostile = {
        "already_counted": dict(run_id=run.run_id, pinned_version=run.version, count=1_000_000),
        "invalid_field ": dict(run_id="invented", pinned_version=-1),
        "invalid_field  ": dict(run_id="invented", pinned_version=10**9),
        "not_blocked": dict(run_id="early", pinned_version=before),
    }
    for want, kw in hostile.items():
        r = refunds.read_blocked(conflict, agent="risk-control-agent", **kw)  # type: ignore[arg-type]
        assert (r.kind, r.reason) == ("rejected", want.strip()), r.decision
    row = refunds.conflict(conflict)
    assert row is not None and row["blocked_reads"] == 1 and not row["escalated_at"]
    with refunds.run(agent="fraud-agent") as second:  # a second run: escalate_after_runs is 2
        second.slot("refund_decision", "refund:R-1")
    row = refunds.conflict(conflict)
    assert row is not None and row["escalated_at"] is not None
    assert [p["conflict_id"] for p in refunds.escalations()] == [conflict]
    verify(refunds)


def test_outside_a_run_a_blocked_read_counts_once_per_reader_and_conflict(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rules revision 5: a report without a run (reads outside an explicit run) counts once
    per (reader, conflict), never as a run, and not from before the conflict opened; under
    revision 4 it is rejected, and an admin's upgrade turns the new rule on (issue 25)."""
    from claimgraph.core import governor
    from claimgraph.core.governor import revisions

    monkeypatch.setattr(revisions, "CURRENT", 4)
    monkeypatch.setattr(governor, "CURRENT", 4)
    g = _open(tmp_path, REFUNDS, clock)
    monkeypatch.undo()
    try:
        _refund(g, "R-1", "REJECT", "risk-control-agent", 0.8)
        before = g.head()
        conflict = _refund(g, "R-1", "HOLD", "experience-agent", 0.8).decision["conflict_id"]
        assert conflict is not None
        old = g.read_blocked(conflict, agent="fraud-agent", pinned_version=g.head())
        assert (old.kind, old.reason, old.decision["rules"]) == ("rejected", "invalid_field", 4)
        assert g.upgrade_rules(5, agent="payments-admin").kind == "accepted"
        at = g.head()
        for _ in range(5):  # an agent polling the slot: one blocked read
            g.read_blocked(conflict, agent="fraud-agent", pinned_version=at)
        early = g.read_blocked(conflict, agent="risk-control-agent", pinned_version=before)
        assert (early.kind, early.reason) == ("rejected", "not_blocked")
        other = g.read_blocked(conflict, agent="risk-control-agent", pinned_version=at)
        assert (other.kind, other.decision["run_id"], other.decision["rules"]) == (
            "accepted", None, 5,
        )  # fmt: skip
        got = [
            (d["agent"], d["kind"], d["reason"])
            for _, d in g.decisions(at + 1, 100)
            if d["command_type"] == "read_blocked"
        ]
        assert got == [
            ("fraud-agent", "accepted", "read_blocked"),
            *[("fraud-agent", "rejected", "already_counted")] * 4,
            ("risk-control-agent", "rejected", "not_blocked"),
            ("risk-control-agent", "accepted", "read_blocked"),
        ]
        row = g.conflict(conflict)
        assert row is not None
        assert (row["blocked_reads"], row["blocked_runs"], row["escalated_at"]) == (2, [], None)
        verify(g)
    finally:
        g.close()


def test_blocked_read_threshold_exits(refunds: Graph) -> None:
    """max_blocked_reads counts distinct (reader, run) pairs; at the threshold the conflict
    falls back to the domain's value."""
    _refund(refunds, "R-1", "REJECT", "risk-control-agent", 0.8)
    a = _refund(refunds, "R-1", "HOLD", "experience-agent", 0.8)
    conflict = a.decision["conflict_id"] or ""
    pinned = refunds.head()
    readers = [f"reader-{i}" for i in range(5)]
    for reader in readers[:4]:
        r = refunds.read_blocked(conflict, 99, agent=reader, run_id="shared", pinned_version=pinned)
        assert (r.kind, r.decision["count"], r.decision["exits"]) == ("accepted", 1, [])
    r = refunds.read_blocked(conflict, agent=readers[4], run_id="shared", pinned_version=pinned)
    [x] = r.decision["exits"]
    assert (x["trigger"], x["action"]) == ("blocked_reads", "fallback")
    assert refunds.slot("refund_decision", "refund:R-1").nodes == (("verdict", "REJECT"),)
    late = refunds.read_blocked(conflict, agent="reader-9", run_id="x", pinned_version=pinned)
    assert (late.kind, late.reason) == ("rejected", "conflict_closed")


def test_halt_raises_and_counts_as_blocked(tmp_path: Path) -> None:
    g = _open(
        tmp_path, GENERAL.replace("    resolvers:\n", "    on_unknown: halt\n    resolvers:\n")
    )
    g.assert_("routed_to", "ticket:t1", "team:a", agent="triage-1")
    b = g.assert_("routed_to", "ticket:t1", "team:b", agent="triage-2")
    with pytest.raises(UnknownSlotError):
        g.slot("routed_to", "ticket:t1")
    assert g.blocked_reads() == {}  # outside a run: nothing to attribute, nothing counted
    with g.run(agent="triage-1") as run, pytest.raises(UnknownSlotError):
        run.slot("routed_to", "ticket:t1")
    assert (
        g.blocked_reads() == {}
        and g.conflict(b.decision["conflict_id"] or "")["blocked_reads"] == 1
    )
    g.close()


def test_escalation_payload_is_self_contained(refunds: Graph) -> None:
    a = _refund(
        refunds, "R-1", "REJECT", "risk-control-agent", 0.92,
        evidence=["order_db", "user_profile"], reasoning="rule R-07", based_on_version=0,
    )  # fmt: skip
    b = _refund(refunds, "R-1", "APPROVE", "experience-agent", 0.7, evidence=["csat"])
    refunds.escalate(b.decision["conflict_id"] or "", agent="resolver-bot", reason="check")
    [p] = refunds.escalations()
    json.dumps(p)  # plain JSON
    assert p["status"] == "escalated" and p["escalation_reason"] == "resolver: human: check"
    by_agent = {c["agent"]: c for c in p["claims"]}
    assert by_agent["risk-control-agent"]["evidence"] == ["order_db", "user_profile"]
    assert by_agent["risk-control-agent"]["claim_id"] == a.command_id
    assert p["versions_read"] == {"risk-control-agent": 0, "experience-agent": None}
    assert p["schema_rev"] == 1 and p["domain"] == "refund"
    assert p["recommended_action"]["outcome"] == "assert verdict:REJECT"
    assert p["review"].endswith(b.decision["conflict_id"] or "")
    again = refunds.escalate(b.decision["conflict_id"] or "", agent="resolver-bot", reason="x")
    assert again.reason == "already_escalated"
    assert refunds.escalate("cf:nope", agent="resolver-bot", reason="x").reason == (
        "unknown_conflict"
    )
    assert refunds.escalate(b.decision["conflict_id"] or "", agent="intern", reason="x").reason == (
        "not_resolver"
    )


def test_runs_in_threads_keep_their_blocked_reads_apart(refunds: Graph) -> None:
    """Two runs in two threads share one graph; each run's blocked reads are its own."""
    _refund(refunds, "R-1", "REJECT", "risk-control-agent", 0.8)
    a = _refund(refunds, "R-1", "HOLD", "experience-agent", 0.8)
    conflict = a.decision["conflict_id"]
    barrier = threading.Barrier(2)
    noted: dict[str, dict[tuple[str | None, str], int]] = {}

    def work(run: str, reads: int) -> None:
        refunds.blocked_run = run
        barrier.wait()
        for i in range(reads):
            refunds.edge("refund_decision", "refund:R-1", f"verdict:V{i}")
        barrier.wait()
        noted[run] = refunds.blocked_reads()

    threads = [
        threading.Thread(target=work, args=("run-a", 3)),
        threading.Thread(target=work, args=("run-b", 1)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert noted["run-a"] == {("run-a", conflict): 3, ("run-b", conflict): 1}
    assert refunds.blocked_run is None  # this thread attributes its reads to no run
    [r] = refunds.flush_blocked(run="run-b", pinned=refunds.head())
    assert (r.decision["run_id"], r.decision["count"]) == ("run-b", 1)
    assert refunds.blocked_reads() == {("run-a", conflict): 3}
