"""Runs over HTTP: clients append their runs' traces; anyone with a token lists and replays."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from claimgraph.core.model import Reason
from claimgraph.errors import AuthError, InputError, LimitError, RunNotFound
from claimgraph.http.bodies import PROBLEM_RESPONSES, RUN_EVENT_PAYLOAD, RunEventsIn
from claimgraph.http.context import Context, clean
from claimgraph.http.limits import HttpLimits
from claimgraph.service.bounded import InputLimits, loads
from claimgraph.service.runs import hold_remote_pins
from claimgraph.service.traces import check_event, encode_events

__all__ = ["router"]


def _payload_limits(lim: HttpLimits) -> InputLimits:
    """A payload is JSON text inside the body: parsed with the body's nesting bound."""
    return InputLimits(max_line=4 * RUN_EVENT_PAYLOAD, max_depth=lim.max_depth)


def router(ctx: Context) -> APIRouter:
    """The run routes over ``ctx.graph``."""
    r = APIRouter(tags=["runs"], responses=PROBLEM_RESPONSES)
    graph = ctx.graph

    @r.post("/v1/runs/events")
    def post_run_events(request: Request, body: RunEventsIn) -> dict[str, Any]:
        """Append trace events of the principal's runs to the runs log.

        Bounded: ``max_run_events`` events per request (and the body's size), and per run
        ``max_run_trace`` events and ``max_run_bytes`` bytes of payloads; a principal holds at
        most ``max_pins`` live pins. Past a bound the whole request is refused (413/429) and
        nothing of it is appended or pinned.
        """
        p = ctx.principal(request)
        lim = ctx.limits
        if len(body.events) > lim.max_run_events:
            raise LimitError(
                "too_large",
                "--max-run-events",
                f"{len(body.events)} trace events in one request; at most {lim.max_run_events}",
            )
        events = []
        for e in body.events:
            if e.agent is not None and e.agent != p.agent:
                raise AuthError(
                    Reason.AGENT_MISMATCH.value,
                    f"the token belongs to {p.agent!r}, not to {clean(e.agent, 80)!r}",
                )
            ev = e.model_dump()
            ev.update(graph=graph.name, agent=p.agent)
            loads(ev["payload"].encode("utf-8", "surrogatepass"), _payload_limits(lim))
            check_event(ev)
            events.append(ev)
        try:
            encode_events(events)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot encode the events: {exc}") from None
        ctx.runs.charge(p.agent, events)
        # pins first: a start at a pruned version, or past max_pins, fails the request whole
        hold_remote_pins(graph, events, p.agent, lim.max_pins)
        graph.append_run_events(events)
        return {"appended": len(events)}

    @r.get("/v1/runs")
    def get_runs(request: Request) -> dict[str, Any]:
        """Every run in the runs log: who, at which pinned version, with what outcome."""
        ctx.principal(request)
        return {"runs": [s.as_dict() for s in graph.runs()]}

    @r.get("/v1/runs/{run_id}")
    def get_run(request: Request, run_id: str) -> dict[str, Any]:
        """A run's trace: its pinned version, reads (query and digest), writes, tool calls."""
        ctx.principal(request)
        events = graph.run_events(run_id)
        if not events:
            raise RunNotFound(run_id[:80])
        return {"run_id": run_id, "events": events}

    @r.post("/v1/runs/{run_id}/replay")
    def replay_run(request: Request, run_id: str) -> dict[str, Any]:
        """Re-execute the run's reads at its pinned version; identical inputs, or the first
        difference."""
        ctx.principal(request)
        return graph.replay_run(run_id).as_dict()

    return r
