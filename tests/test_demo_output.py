"""The demos speak to a person: readable ids, every verdict names who decided it (an agent, a
person, a rule, a vote, the fallback) and what it settles, and no text the log holds is cut.

Each ``say`` call of a demo is one unit of output (a wrapped paragraph is one call), so the
checks read the units, with wrapping undone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from claimgraph.core.schema import GraphSchema, parse_schema
from claimgraph.core.wire import schema_dir
from claimgraph.demo.inventory import DemoOutcome, run_demo
from claimgraph.demo.narrate import WIDTH, decider, wrap
from claimgraph.demo.refunds import run_refunds_demo
from claimgraph.service.graph import open_graph

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
COMMAND_LINE = re.compile(r"^  v(\d+) ")


@dataclass
class Told:
    """A demo's outcome, what it said (one entry per ``say``), its schema and its log."""

    out: DemoOutcome
    said: list[str]
    schema: GraphSchema
    decisions: dict[int, dict[str, object]]

    @property
    def units(self) -> list[str]:
        return [" ".join(s.split()) for s in self.said]

    @property
    def flat(self) -> str:
        return " ".join(self.units)

    def verdicts(self) -> list[str]:
        return [u.removeprefix("⇒ ") for u in self.units if u.startswith("⇒ ")]


def _tell(run: object, path: Path, schema_file: str) -> Told:
    said: list[str] = []
    out = run(path, say=said.append)  # type: ignore[operator]
    text = (schema_dir().parent / "graphs" / schema_file).read_text(encoding="utf-8")
    with open_graph(path) as g:
        decisions = {v: dict(d) for v, d in g.decisions(0, 10_000)}
    return Told(out, said, parse_schema(text, schema_file), decisions)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Told:
    return _tell(run_demo, tmp_path_factory.mktemp("inv") / "demo", "inventory.yaml")


@pytest.fixture(scope="module")
def refunds(tmp_path_factory: pytest.TempPathFactory) -> Told:
    return _tell(run_refunds_demo, tmp_path_factory.mktemp("ref") / "demo", "refunds.yaml")


@pytest.fixture(params=["inventory", "refunds"])
def told(request: pytest.FixtureRequest) -> Told:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def test_ids_are_readable(told: Told) -> None:
    """No raw UUID in the output: every id the narration shows was given a name."""
    assert not UUID.findall("\n".join(told.said))


def test_no_human_for_an_agent(told: Told) -> None:
    """A verdict an agent made never names ``human`` as its resolver, in the log or the
    output: every ``human:`` printed is a person's principal (human:alice) or the resolver
    chain's human step ("human: a person decides")."""
    for v, d in told.decisions.items():
        if d["kind"] == "resolved" and not told.schema.is_human(str(d["agent"])):
            assert not str(d["detail"]).startswith("human"), (v, d["agent"], d["detail"])
            assert str(d["detail"]).startswith(f"{d['agent']}:") or ":" in str(d["detail"])
    assert not re.findall(r"human:(?! a person decides)(?![a-z])", told.flat)
    for line in told.said:
        m = COMMAND_LINE.match(line)
        if m is None:
            continue
        d = told.decisions[int(m.group(1))]
        who = line.split()[1]
        assert who == d["agent"] or d["command_type"] != "resolve", (line, d["agent"])


def test_nothing_is_cut(told: Told) -> None:
    """Every decision the demo shows is shown with its whole detail, signals and exits;
    lines wrap at spaces only; nothing printed ends in the middle of a word it cut."""
    flat = told.flat
    shown = [int(m.group(1)) for s in told.said if (m := COMMAND_LINE.match(s))]
    assert len(shown) >= 10
    for v in shown:
        d = told.decisions[v]
        texts = [str(d["detail"])]
        texts += [str(s["detail"]) for s in d["signals"]]  # type: ignore[attr-defined]
        texts += [str(x["detail"]) for x in d["exits"]]  # type: ignore[attr-defined]
        for text in texts:
            assert " ".join(text.split()) in flat, (v, text)
    for s in told.said:
        for line in s.splitlines():
            words = line.split()
            assert (
                len(line) <= WIDTH
                or len(words) < 2
                or line.lstrip().startswith(("Explore it yourself", "claimgraph", "/"))
                or " --data " in line
            ), line


def test_wrapping_keeps_words_and_ids_whole() -> None:
    """The demos' wrapping breaks at spaces only: an id or a hyphenated word is never split."""
    text = " ".join(["cf:R-1003:risk-control"] * 12 + ["supercalifragilistic-" * 8])
    lines = wrap(text, "   ").splitlines()
    assert len(lines) > 1
    assert " ".join(" ".join(lines).split()) == text
    assert all(w in text.split() for line in lines for w in line.split())


def test_tutorial_excerpt(inventory: Told) -> None:
    """docs/tutorials/demo.md's excerpt is what the demo prints, line for line."""
    from tests.docs_text import block

    excerpt = block("text", "⇒ verdict on who owns orders-db").rstrip("\n").splitlines()
    lines = "\n".join(inventory.said).splitlines()
    starts = [i for i, line in enumerate(lines) if line == excerpt[0]]
    assert [lines[i : i + len(excerpt)] for i in starts] == [excerpt], "\n".join(lines)


def test_inventory_verdicts_name_the_decider_and_the_edge(inventory: Told) -> None:
    """The SRE agent's verdict is sre-oncall's (an agent), about who owns orders-db; the
    late deployment claim's loss is the last-write-wins rule's, about checkout's target."""
    verdicts = inventory.verdicts()
    owner = [v for v in verdicts if v.startswith("verdict on who owns orders-db")]
    assert len(owner) == 1 and owner[0].endswith("decided by sre-oncall (an agent)"), verdicts
    assert "inventory:checkout-owns-orders-db wins" in owner[0]
    lww = [v for v in verdicts if "deployment_target" in v]
    assert len(lww) == 1 and "decided by the rule last-write-wins-with-timestamp" in lww[0]
    resolve = inventory.out.receipts["resolve"].decision
    assert resolve["detail"].startswith("sre-oncall: inventory:checkout-owns-orders-db wins.")


def test_refunds_verdicts_name_the_decider_and_the_refund(refunds: Told) -> None:
    """Each resolver-chain verdict names its refund, its step (a rule, the human step) and the
    agent that wrote it; the people's verdicts are theirs; the deadline's is the fallback's;
    the bot's refused approval says it is an agent's."""
    verdicts = refunds.verdicts()
    schema = refunds.schema
    chain = refunds.out.reads["verdicts"]
    assert len(chain) == 4
    with open_graph(refunds.out.path) as g:  # type: ignore[arg-type]
        for cid, (resolver, _action, _kind, _reason) in chain.items():
            info = g.conflict(cid)
            assert info is not None
            claim = g.claim_info(info["members"][0]) or {}
            about = f"verdict on refund {claim['subject_id']}:"
            by = f"decided by {decider(resolver, schema)}, written by resolver-bot (an agent)"
            assert any(v.startswith(about) and v.endswith(by) for v in verdicts), (cid, by)
    assert any(
        v.startswith("verdict on refund R-1003: APPROVE (R-1003:risk-control wins)")
        and v.endswith("decided by human:alice (a person)")
        for v in verdicts
    ), verdicts
    assert any(
        v.startswith("verdict on refund R-1001: REJECT") and v.endswith("human:bob (a person)")
        for v in verdicts
    ), verdicts
    assert any(
        v.startswith("verdict on refund R-1005: REJECT")
        and "decided by the domain's fallback (domain refund fails closed)" in v
        for v in verdicts
    ), verdicts
    assert any(
        v.startswith("verdict on transaction T-9001:") and "the calibrated merge" in v
        for v in verdicts
    ), verdicts
    assert "refund R-1003: resolver-bot (an agent) may not approve it" in refunds.flat
    assert decider("human:alice", schema) == "human:alice (a person)"
    assert decider("resolver-bot", schema) == "resolver-bot (an agent)"


def test_refunds_escalations_are_shown_whole(refunds: Told) -> None:
    """What a person sees of each escalation — its reason, every claim's reasoning, the
    recommended action — is printed whole, and the reason was recorded whole (the service
    keeps 256 characters of it)."""
    flat = refunds.flat
    with open_graph(refunds.out.path) as g:  # type: ignore[arg-type]
        payloads = [g.escalation(cid, at=12) for cid in refunds.out.reads["escalated"]]
    assert len(payloads) == 3
    for p in payloads:
        assert p is not None
        assert len(p["escalation_reason"]) < 256, p["escalation_reason"]
        assert f"escalated because {' '.join(p['escalation_reason'].split())}" in flat
        for c in p["claims"]:
            assert " ".join(str(c["reasoning"]).split()) in flat, c["reasoning"]
        assert " ".join(p["recommended_action"]["why"].split()) in flat
