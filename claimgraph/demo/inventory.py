"""``claimgraph demo``: the first article's world, told as it happens, on the embedded runtime.

An inventory agent maps which service owns which database, release agents promote services to
environments, a DBA agent disagrees about ownership, and an agent with no authority tries to
write. Each command is printed with its decision and the version it made; then the same
questions are asked of the graph at earlier versions, to show it exactly as it was.

Every command has a readable id (``inventory:checkout-owns-orders-db``), so the ids the
decisions name — a superseded claim, a conflict (``cf:`` and the id of the claim that opened
it), a winner — say what they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimgraph.core.schema import parse_schema
from claimgraph.core.wire import schema_dir
from claimgraph.demo.narrate import Say, cli_name, decider, prepare_dir, verdict, wrap
from claimgraph.demo.narrate import show as _show
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph, Receipt, open_graph

__all__ = ["DEMO_GRAPH", "DemoOutcome", "run_demo"]

DEMO_GRAPH = "platform-demo"


@dataclass
class DemoOutcome:
    """Key outcomes, so tests (and curious users) can check the story."""

    receipts: dict[str, Receipt] = field(default_factory=dict)
    reads: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


def _schema_text() -> str:
    return (schema_dir().parent / "graphs" / "inventory.yaml").read_text(encoding="utf-8")


def run_demo(path: Path, say: Say = print) -> DemoOutcome:
    """Run the scenario into ``path`` (recreated if it holds an earlier demo)."""
    prepare_dir(path, DEMO_GRAPH)
    out = DemoOutcome(path=path)
    with open_graph(path, create=True, graph=DEMO_GRAPH) as g:
        _story(g, say, out)
    return out


def _story(g: Graph, say: Say, out: DemoOutcome) -> None:
    rec = out.receipts
    t = "2026-11-29T"
    say("claimgraph demo — shared state for agents, governed and versioned\n")
    say("1. The platform admin publishes the graph schema: who may write what, and how")
    say("   conflicts are settled (schemas/graphs/inventory.yaml).")
    text = _schema_text()
    schema = parse_schema(text, "inventory.yaml")
    rec["schema"] = r = g.publish_schema(
        text, agent="platform-admin", source="inventory.yaml", command_id="schema:inventory"
    )
    _show(say, "platform-admin", "publish_schema inventory.yaml", r)

    say("\n2. The inventory agent maps the topology.")
    inv: dict[str, Any] = {"agent": "inventory-agent", "task": "reconcile-service-topology"}
    rec["owns"] = r = g.assert_(
        "service_owns_database",
        "service:checkout",
        "database:orders-db",
        evidence=["cmdb#4411"],
        confidence=0.95,
        command_id="inventory:checkout-owns-orders-db",
        **inv,
    )
    _show(say, "inventory-agent", "assert checkout owns orders-db", r)
    r = g.assert_(
        "service_owns_database",
        "service:billing",
        "database:ledger-db",
        evidence=["cmdb#4412"],
        command_id="inventory:billing-owns-ledger-db",
        **inv,
    )
    _show(say, "inventory-agent", "assert billing owns ledger-db", r)
    rec["dep"] = r = g.assert_(
        "depends_on",
        "service:checkout",
        "service:legacy-auth",
        evidence=["tracing:7d"],
        command_id="inventory:checkout-depends-on-legacy-auth",
        **inv,
    )
    _show(say, "inventory-agent", "assert checkout depends_on legacy-auth", r)
    r = g.assert_(
        "depends_on",
        "service:checkout",
        "service:billing",
        evidence=["tracing:7d"],
        command_id="inventory:checkout-depends-on-billing",
        **inv,
    )
    _show(say, "inventory-agent", "assert checkout depends_on billing", r)
    out.reads["before_conflicts"] = r.version

    say("\n3. An agent without authority tries to write. Authority lives in the schema, not")
    say("   in prompts: the command is rejected before it reaches the graph, with a reason.")
    rec["unauthorised"] = r = g.assert_(
        "service_owns_database",
        "service:payments",
        "database:orders-db",
        agent="release-agent",
        task="promote-release",
        command_id="release:payments-owns-orders-db",
    )
    _show(say, "release-agent", "assert payments owns orders-db", r)

    say("\n4. Two release agents promote checkout (deployment_target is many-to-one, settled")
    say("   by last-write-wins on the claim's event time).")
    rel: dict[str, Any] = {"agent": "release-agent", "task": "promote-release"}
    rec["staging"] = r = g.assert_(
        "deployment_target",
        "service:checkout",
        "environment:staging",
        asserted_at=t + "10:00:00Z",
        command_id="release:checkout-to-staging",
        **rel,
    )
    _show(say, "release-agent", "checkout → staging   (event time 10:00)", r)
    out.reads["staging_version"] = r.version
    rec["prod"] = r = g.assert_(
        "deployment_target",
        "service:checkout",
        "environment:prod",
        asserted_at=t + "11:00:00Z",
        agent="release-agent-eu",
        task="promote-release",
        command_id="release-eu:checkout-to-prod",
    )
    _show(say, "release-agent-eu", "checkout → prod      (event time 11:00)", r)
    out.reads["prod_version"] = r.version
    say("   A retried message from 10:30 arrives late. It is older than the current claim,")
    say("   so it loses and is recorded — it never retires the newer one.")
    rec["late"] = r = g.assert_(
        "deployment_target",
        "service:checkout",
        "environment:canary",
        asserted_at=t + "10:30:00Z",
        command_id="release:checkout-to-canary-retried",
        **rel,
    )
    _show(say, "release-agent", "checkout → canary    (event time 10:30, late)", r)
    verdict(
        say,
        "where checkout is deployed (deployment_target)",
        f"prod: {rec['prod'].command_id} stands, {rec['late'].command_id} loses",
        "the rule last-write-wins-with-timestamp (the edge type's conflict policy)",
    )

    say("\n5. The DBA agent disagrees about who owns orders-db. service_owns_database is")
    say("   one-to-many with conflict_policy: quarantine — both claims are withheld, and")
    say("   readers get an explicit UNKNOWN rather than a guess.")
    rec["dispute"] = r = g.assert_(
        "service_owns_database",
        "service:payments",
        "database:orders-db",
        agent="dba-agent",
        task="audit-q4",
        evidence=["pg_stat_activity"],
        confidence=0.7,
        command_id="dba:payments-owns-orders-db",
    )
    _show(say, "dba-agent", "assert payments owns orders-db", r)
    conflict = r.decision["conflict_id"]
    assert conflict is not None
    e = g.edge("service_owns_database", "service:checkout", "database:orders-db")
    out.reads["during_conflict"] = e.state
    say(
        f"   read at v{e.version}: checkout owns orders-db? {e.state.upper()} (conflict {conflict})"
    )
    say("\n6. The on-call SRE agent, a resolver in the schema, reviews the evidence and picks")
    say("   the winner. The verdict is a command on the log too (replay never recomputes it),")
    say("   recorded as sre-oncall's: the agent that decided is its resolver.")
    rec["resolve"] = r = g.resolve(
        conflict,
        agent="sre-oncall",
        resolver="sre-oncall",
        winner=rec["owns"].command_id,
        rationale="CMDB and the migration history agree on checkout",
        command_id="sre-oncall:orders-db-owner",
    )
    _show(say, "sre-oncall", f"resolve {conflict}", r)
    verdict(
        say,
        "who owns orders-db (service_owns_database)",
        f"checkout owns orders-db ({rec['owns'].command_id} wins, "
        f"{rec['dispute'].command_id} is dismissed)",
        decider("sre-oncall", schema),
    )
    e = g.edge("service_owns_database", "service:checkout", "database:orders-db")
    out.reads["after_resolve"] = e.state
    say(f"   read at v{e.version}: checkout owns orders-db? {e.state.upper()}")

    say("\n7. checkout stops using legacy-auth: the inventory agent retracts its own claim.")
    say("   Retirement is not contradiction: the edge leaves head but stays in history.")
    rec["retract"] = r = g.retract(
        rec["dep"].command_id,
        reason="decommissioned",
        command_id="inventory:retract-checkout-depends-on-legacy-auth",
        **inv,
    )
    _show(say, "inventory-agent", "retract checkout depends_on legacy-auth", r)

    head = g.head()
    say(f"\n8. Reading the graph at earlier versions (head is v{head}).")
    checks = [
        ("deployment_target", "service:checkout", "environment:staging"),
        ("deployment_target", "service:checkout", "environment:prod"),
        ("deployment_target", "service:checkout", "environment:canary"),
        ("service_owns_database", "service:checkout", "database:orders-db"),
        ("service_owns_database", "service:payments", "database:orders-db"),
        ("depends_on", "service:checkout", "service:legacy-auth"),
    ]
    versions = [out.reads["staging_version"], rec["dispute"].version, head]
    say("   " + f"{'edge':<52}" + "".join(f"{'v' + str(v):>10}" for v in versions))
    table: dict[str, list[str]] = {}
    for et, s, o in checks:
        label = f"{et}({s.split(':')[1]} → {o.split(':')[1]})"
        states = [g.edge(et, s, o, at=v).state for v in versions]
        table[label] = states
        say("   " + f"{label:<52}" + "".join(f"{st:>10}" for st in states))
    out.reads["table"] = {"versions": versions, "rows": table}
    slot = g.slot("deployment_target", "service:checkout")
    out.reads["checkout_target"] = [n[1] for n in slot.nodes]
    say(f"   where does checkout run now? {', '.join(n[1] for n in slot.nodes) or 'nowhere'}")

    cli = cli_name()
    say("\n9. An auditor re-checks everything from the logs.")
    v = verify(g)
    say(
        f"   verify: the governor, replayed over {v.commands} commands, reproduced every "
        "decision byte for byte"
    )
    a = audit(g)
    say(
        wrap(
            f"audit: a fresh re-projection of the decisions log matches the live graph "
            f"({a.rows} rows; digest at v{a.head} {a.digests.get(a.head, '')})",
            "   ",
        )
    )
    out.reads["verified"] = True
    say(
        f"\nExplore it yourself:  {cli} --data {g.path} neighbors service:checkout\n"
        f"                      {cli} --data {g.path} history service_owns_database "
        "service:checkout database:orders-db\n"
        f"                      {cli} --data {g.path} claim {rec['owns'].command_id}\n"
        f"                      {cli} --data {g.path} log"
    )
