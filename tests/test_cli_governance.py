"""The governance commands end to end through the real CLI, and the refunds demo."""

from __future__ import annotations

import json
from pathlib import Path

from claimgraph.demo.refunds import run_refunds_demo
from tests.test_cli import _run, workdir  # noqa: F401 (a fixture)


def _ok(args: list[str], cwd: Path) -> str:
    r = _run(args, cwd)
    assert r.returncode == 0, f"{args}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_escalate_resolve_tick_calibration_cli(workdir: Path) -> None:  # noqa: F811
    d = ["--data", "./p"]
    _ok([*d, "init", "--graph", "payments"], workdir)
    _ok(
        [*d, "schema", "apply", "schemas/graphs/refunds.yaml", "--agent", "payments-admin"], workdir
    )
    cmds = [
        {"type": "assert", "edge_type": "refund_decision", "subject": "refund:R-1",
         "object": "verdict:REJECT", "agent": "risk-control-agent", "confidence": 0.92,
         "evidence": ["order_db"], "command_id": "risk-1"},
        {"type": "assert", "edge_type": "refund_decision", "subject": "refund:R-1",
         "object": "verdict:APPROVE", "agent": "experience-agent", "confidence": 0.7,
         "command_id": "exp-1"},
    ]  # fmt: skip
    (workdir / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cmds))
    _ok([*d, "submit", "c.jsonl"], workdir)
    got = _ok([*d, "get", "refund_decision", "refund:R-1"], workdir)
    assert "[unknown]" in got and "fallback=REJECT" in got
    assert "no escalated conflicts" in _ok([*d, "escalations"], workdir)
    listing = json.loads(_ok([*d, "escalations", "--all", "--json"], workdir))
    [p] = listing["escalations"]
    assert p["conflict_id"] == "cf:exp-1" and len(p["claims"]) == 2
    out = _ok([*d, "resolvers", "run"], workdir)
    assert "cf:exp-1: human → escalate" in out  # weighted margin too small, then a person
    text = _ok([*d, "escalations", "cf:exp-1"], workdir)
    assert "risk-control-agent" in text and "order_db" in text and "recommended" in text
    bad = _run([*d, "resolve", "cf:exp-1", "--agent", "resolver-bot", "--winner", "exp-1"], workdir)
    assert bad.returncode == 1 and "needs_human" in bad.stdout
    _ok([*d, "resolve", "cf:exp-1", "--agent", "human:ann", "--winner", "risk-1"], workdir)
    assert "verdict:REJECT" in _ok([*d, "get", "refund_decision", "refund:R-1"], workdir)
    cal = json.loads(_ok([*d, "calibration", "refund_decision", "--json"], workdir))
    assert {w["agent"]: (w["wins"], w["losses"]) for w in cal["writers"]} == {
        "experience-agent": (0, 1),
        "risk-control-agent": (1, 0),
    }
    tick = json.loads(_ok([*d, "tick", "--json"], workdir))
    assert (tick["kind"], tick["reason"]) == ("accepted", "tick")
    assert "2 tick(s) written" in _ok([*d, "ticker", "--interval", "10ms", "--count", "2"], workdir)
    bad = _run([*d, "ticker", "--interval", "soon"], workdir)
    assert bad.returncode != 0 and "not a duration" in bad.stderr
    bad = _run([*d, "calibration", "nope"], workdir)
    assert bad.returncode != 0 and "not in the schema" in bad.stderr


def test_refunds_demo_tells_the_second_article(tmp_path: Path) -> None:
    said: list[str] = []
    out = run_refunds_demo(tmp_path / "demo", say=said.append)
    rec, reads = out.receipts, out.reads
    assert reads["r1_unknown"] == ("unknown", "REJECT")
    # fail closed is for disagreement: an undisputed approval holds, a disputed one is held
    assert reads["r3_undisputed"] == ("present", (("verdict", "APPROVE"),))
    assert rec["r3_risk"].kind == "accepted"
    assert reads["r3_disputed"] == ("unknown", "REJECT")
    assert any("nobody disputes it: a reader of R-1003 gets PRESENT APPROVE" in x for x in said)
    assert reads["r2_after"] == ["BLOCK_TRANSACTION"]  # block wins
    kinds = sorted((v[0], v[1]) for v in reads["verdicts"].values())
    assert kinds == [
        ("human", "escalate"),
        ("human", "escalate"),
        ("rules:block-wins", "winner"),
        ("rules:low-confidence", "escalate"),
    ]
    assert rec["bot_approve"].reason == "needs_human"
    assert rec["human_approve"].kind == "resolved"
    assert rec["tick"].decision["exits"][0]["action"] == "fallback"
    assert reads["r5_after"] == ["REJECT"]
    cal = reads["calibration"]
    acc = {a: (w + 2) / (w + lo + 4) for a, (w, lo) in cal.items()}
    assert acc["fraud-agent"] > acc["risk-control-agent"] > acc["experience-agent"]
    assert rec["t_fraud"].reason == "merged" and reads["t_after"] == ["BLOCK_TRANSACTION"]
    assert reads["verified"] is True
    assert "CONFIDENCE_TOO_LOW" in "\n".join(said)


def test_demo_scenario_option(workdir: Path) -> None:  # noqa: F811
    out = _ok(["demo", "--scenario", "refunds", "--into", "./r"], workdir)
    assert "needs_human" in out and "[RESOLVED] winner" in out
    bad = _run(["demo", "--scenario", "nope"], workdir)
    assert bad.returncode != 0 and "unknown scenario" in bad.stderr
