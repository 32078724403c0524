"""CLI commands of governance: escalations, escalate, tick/ticker, resolvers, calibration."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from claimgraph.cli.catalogue import add_write
from claimgraph.cli.common import HelpGroup, emit, graph_session, print_receipt, say
from claimgraph.core.commands import cut
from claimgraph.errors import InputError, NotFoundError

__all__ = ["register", "resolvers_app"]

resolvers_app = typer.Typer(
    cls=HelpGroup,
    help="Run the resolver chains that edge types declare (rules, votes, arbiter, ...).",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
AtOpt = Annotated[
    int | None,
    typer.Option("--at", help="Read at this version (default: head).", show_default=False),
]


def _duration_s(text: str) -> float:
    """An interval such as 500ms, 10s or 5m (a bare number: seconds) in seconds."""
    from claimgraph.core.schema import duration_ms

    if text.replace(".", "", 1).isdigit() and float(text) > 0:
        return float(text)
    ms = duration_ms(text)
    if ms is None:
        raise InputError(f"{cut(text)} is not a duration: expected e.g. 500ms, 10s, 5m")
    return ms / 1000


def _claims_table(p: dict[str, Any]) -> None:
    for c in p["claims"]:
        based = c["based_on_version"]
        say(
            f"    {c['outcome']:<32} by {c['agent']}"
            + (f"/{c['task']}" if c["task"] else "")
            + f"  confidence {c['confidence']:g}  accuracy {c['accuracy']:.2f}"
            + f"  read v{based if based is not None else '-'}  claim {c['claim_id']}"
        )
        if c["evidence"] or c["reasoning"]:
            say(f"      evidence: {', '.join(c['evidence']) or '-'}; {c['reasoning'][:160]}")


def _print_payload(p: dict[str, Any], *, full: bool) -> None:
    head = f"{p['conflict_id']}  {p['edge_type']} ({p['domain']})  {p['status']}"
    if p["escalation_reason"]:
        head += f" — {p['escalation_reason']}"
    say(head)
    _claims_table(p)
    for s in p["signals"]:
        say(f"    signal {s['kind']}: {s['detail']}")
    rec = p["recommended_action"]
    say(
        f"    recommended: {rec['action']}"
        + (f" {rec['outcome']} (claim {rec['claim_id']})" if rec["claim_id"] else "")
        + f" — {rec['why']}"
    )
    if p["fallback"] and p["fallback"]["mode"] != "escalate":
        say(f"    readers are served: {p['fallback']['value']} ({p['fallback']['mode']})")
    if full:
        w = p["votes"]["weighted"]
        say(
            f"    votes: majority {p['votes']['majority']['outcome'] or 'tie'}; weighted "
            f"{w['outcome']} (merged confidence {w['merged_confidence']:.3f}, "
            f"margin {w['margin']:.3f})"
        )
        say(
            f"    opened v{p['opened_at']} at {p['opened_time']}; blocked reads "
            f"{p['blocked_reads']}; schema rev {p['schema_rev']}; review {p['review']}"
        )
    say(
        f"    resolve: claimgraph resolve {p['conflict_id']} --agent human:NAME "
        "--winner CLAIM_ID | --reject-all"
    )


def escalations_cmd(
    conflict_id: Annotated[
        str | None, typer.Argument(help="Show this conflict's full payload.")
    ] = None,
    include_open: Annotated[
        bool, typer.Option("--all", help="Every open conflict, not only escalated ones.")
    ] = False,
    at: AtOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Conflicts handed to a person, each with its self-contained evidence payload."""
    with graph_session() as g:
        version = g.head() if at is None else at
        if conflict_id is not None:
            p = g.escalation(conflict_id, at=version)
            if p is None:
                raise NotFoundError(f"no conflict {cut(conflict_id)} at version {version}")
            if as_json:
                emit(p)
            else:
                _print_payload(p, full=True)
            return
        ps = g.escalations(at=version, include_open=include_open)
        if as_json:
            emit({"version": version, "escalations": ps})
            return
        if not ps:
            what = "open conflicts" if include_open else "escalated conflicts"
            say(f"v{version}: no {what}")
        for p in ps:
            _print_payload(p, full=False)


def tick_cmd(
    agent: Annotated[str, typer.Option("--agent", "-a", help="Who ticks.")] = "ticker",
    as_json: JsonOpt = False,
) -> None:
    """Write one tick: time passes for the governor (deadlines) only through the log."""
    with graph_session() as g:
        r = g.tick(agent=agent)
        print_receipt(r, as_json)
        for x in r.decision["exits"]:
            say(f"  {x['conflict_id']}: {x['trigger']} → {x['action']} ({x['detail']})")
        if r.kind == "rejected":
            raise typer.Exit(1)


def ticker_cmd(
    interval: Annotated[str, typer.Option(help="Time between ticks, e.g. 10s, 1m.")] = "10s",
    count: Annotated[
        int | None, typer.Option(help="Stop after this many ticks (default: run until Ctrl-C).")
    ] = None,
    agent: Annotated[str, typer.Option("--agent", "-a", help="Who ticks.")] = "ticker",
) -> None:
    """Write a tick every INTERVAL, so quarantine deadlines fire (both runtimes)."""
    every = _duration_s(interval)
    n = 0
    with graph_session() as g:
        say(f"ticking {g.name} every {interval}" + (f", {count} times" if count else ""))
        try:
            while count is None or n < count:
                r = g.tick(agent=agent)
                n += 1
                for x in r.decision["exits"]:
                    say(f"v{r.version} {x['conflict_id']}: {x['trigger']} → {x['action']}")
                if count is None or n < count:
                    time.sleep(every)
        except KeyboardInterrupt:
            pass
    say(f"{n} tick(s) written")


@resolvers_app.command("run")
def resolvers_run(
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="The resolver principal verdicts are written as.")
    ] = "resolver-bot",
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep resolving new conflicts until Ctrl-C.")
    ] = False,
    interval: Annotated[str, typer.Option(help="With --follow: time between passes.")] = "2s",
    cel_max_steps: Annotated[
        int | None,
        typer.Option(
            "--cel-max-steps", min=1, help="Evaluation steps of one CEL rule [default: 50000]."
        ),
    ] = None,
    arbiter_max_output: Annotated[
        int | None,
        typer.Option(
            "--arbiter-max-output", min=1, help="Bytes an arbiter may answer [default: 1 MiB]."
        ),
    ] = None,
    arbiter_max_timeout: Annotated[
        float | None,
        typer.Option(
            "--arbiter-max-timeout",
            min=0.001,
            help="Seconds: caps each arbiter's timeout from the schema [default: 300].",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run each open conflict's resolver chain once (or keep going with --follow).

    Bounded: a CEL rule stops after --cel-max-steps, an arbiter's answer after
    --arbiter-max-output bytes, and an arbiter command's whole process group is killed at
    its timeout (at most --arbiter-max-timeout); the chain then moves on.
    """
    from dataclasses import replace

    from claimgraph.service.resolvers import RESOLVER_LIMITS, run_resolvers

    d = RESOLVER_LIMITS
    limits = replace(
        d,
        rules=replace(d.rules, max_steps=cel_max_steps or d.rules.max_steps),
        max_output=arbiter_max_output or d.max_output,
        max_timeout=arbiter_max_timeout or d.max_timeout,
    )
    every = _duration_s(interval)
    with graph_session() as g:
        try:
            while True:
                done = run_resolvers(g, agent=agent, limits=limits)
                for cid, v, r in done:
                    if as_json:
                        emit(
                            {
                                "conflict_id": cid,
                                "action": v.action,
                                "resolver": v.resolver,
                                "winner": v.winner,
                                "rationale": v.rationale,
                                "inputs": json.loads(v.inputs_json()),
                                "decision": r.as_dict(),
                            }
                        )
                    else:
                        say(
                            f"{cid}: {v.resolver} → {v.action}"
                            + (f" {v.winner}" if v.winner else "")
                            + f" — {r.kind} {r.reason} at v{r.version}"
                        )
                if not follow:
                    if not done and not as_json:
                        say("no open conflicts with a resolver chain to run")
                    return
                time.sleep(every)
        except KeyboardInterrupt:
            pass


def calibration_cmd(
    edge_type: Annotated[str, typer.Argument(help="Edge type.")],
    at: AtOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Each writer's record in resolved conflicts of EDGE_TYPE and its calibrated accuracy."""
    from claimgraph.core.governance import accuracy

    with graph_session() as g:
        version = g.head() if at is None else at
        schema = g.reader.schema(version)
        et = schema.edge_types.get(edge_type) if schema else None
        if et is None:
            raise InputError(
                f"edge type {cut(edge_type)} is not in the schema at version {version}"
            )
        rec = g.calibration(edge_type, at=version)
        rows = [
            {
                "agent": a,
                "wins": w,
                "losses": lo,
                "accuracy": round(accuracy(w, lo, et.merge_prior), 6),
            }
            for a, (w, lo) in sorted(rec.items())
        ]
        if as_json:
            emit(
                {
                    "edge_type": edge_type,
                    "version": version,
                    "prior": list(et.merge_prior),
                    "writers": rows,
                }
            )
            return
        neutral = accuracy(0, 0, et.merge_prior)
        say(f"v{version} {edge_type}: prior {list(et.merge_prior)} (a new writer: {neutral:.2f})")
        if not rows:
            say("  no resolved conflicts yet")
        for r in rows:
            say(
                f"  {r['agent']:<28} won {r['wins']:>5}  lost {r['losses']:>5}  {r['accuracy']:.3f}"
            )


def register(app: typer.Typer) -> None:
    app.command("escalations", rich_help_panel="Govern")(escalations_cmd)
    add_write(
        app,
        "escalate",
        "escalate",
        "Hand a conflict to a person: it stays quarantined and is listed by `escalations`.",
        panel="Govern",
    )
    app.command("tick", rich_help_panel="Govern")(tick_cmd)
    app.command("ticker", rich_help_panel="Govern")(ticker_cmd)
    app.command("calibration", rich_help_panel="Govern")(calibration_cmd)
    app.add_typer(resolvers_app, name="resolvers", rich_help_panel="Govern")
