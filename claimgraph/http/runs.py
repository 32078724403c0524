"""Runs over HTTP: runs the server holds (handles), clients' traces, lists and replays.

``POST /v1/runs`` starts a run the server holds and answers its handle (``run_id``); reads
that name it (``run=RUN_ID``) are served at its pinned version and traced in it, and
``POST /v1/runs/{run_id}/end`` ends it — from any request of the principal that started it,
and only of that principal (the service layer's runs: the same ones MCP's ``start_run``
starts). A client that keeps its own run (the SDK) appends its trace with
``POST /v1/runs/events``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from claimgraph.errors import RunNotFound
from claimgraph.http.answers import (
    AppendedAnswer,
    ReplayAnswer,
    RunEndAnswer,
    RunHandleAnswer,
    RunsAnswer,
    RunTraceAnswer,
    described,
)
from claimgraph.http.bodies import PROBLEM_RESPONSES, STRICT, Id, RunEventsIn
from claimgraph.http.context import Context
from claimgraph.service.access import STATUS
from claimgraph.service.runs import Run

__all__ = ["RunEndIn", "RunStartIn", "router", "run_json"]


class RunStartIn(BaseModel):
    """A run to start: its task (default: the token's one literal task) and, to read one
    version with other runs, a snapshot id."""

    model_config = STRICT
    task: str | None = Field(None, max_length=256)
    snapshot_id: Id | None = None


class RunEndIn(BaseModel):
    model_config = STRICT
    status: str = Field("ok", max_length=STATUS, description="How the work ended.")


def run_json(r: Run, head: int) -> dict[str, Any]:
    """A run held by the server, as its handle's answer."""
    return {
        "run_id": r.run_id,
        "agent": r.agent,
        "task": r.task,
        "pinned_version": r.version,
        "snapshot_id": r.snapshot_id,
        "head": head,
    }


def router(ctx: Context) -> APIRouter:
    """The run routes over ``ctx.graph``."""
    r = APIRouter(tags=["runs"], responses=PROBLEM_RESPONSES)
    graph = ctx.graph

    @r.post("/v1/runs/events", operation_id="append_run_events", **described(AppendedAnswer))
    def post_run_events(request: Request, body: RunEventsIn) -> dict[str, Any]:
        """Append trace events of the principal's runs to the runs log.

        Bounded: ``max_run_events`` events per request (and the body's size), and per run
        ``max_run_trace`` events and ``max_run_bytes`` bytes of payloads; a principal holds at
        most ``max_pins`` live pins. Past a bound the whole request is refused (413/429) and
        nothing of it is appended or pinned.
        """
        scoped = ctx.scoped(request)
        return {"appended": scoped.append_client_events([e.model_dump() for e in body.events])}

    @r.post("/v1/runs", operation_id="start_run", **described(RunHandleAnswer))
    def start_run(request: Request, body: RunStartIn) -> dict[str, Any]:
        """Start a run the server holds, pinned at head (or at ``snapshot_id``'s version): its
        ``run_id`` is the handle reads (``run=``) and ``/end`` name. A task the token may not
        act in is refused (403, recorded); past ``max_pins`` live runs, 429."""
        scoped = ctx.scoped(request)
        run = scoped.start_run(body.task, body.snapshot_id)
        return run_json(run, graph.head())

    @r.post("/v1/runs/{run_id}/end", operation_id="end_run", **described(RunEndAnswer))
    def end_run(request: Request, run_id: str, body: RunEndIn) -> dict[str, Any]:
        """End a run the server holds (only its principal may): its blocked reads are
        reported, its trace closed, its pin released."""
        scoped = ctx.scoped(request)
        run = scoped.end_run(run_id, body.status)
        return {"ended": run.run_id, "pinned_version": run.version, "status": body.status}

    @r.get("/v1/runs", operation_id="runs", **described(RunsAnswer))
    def get_runs(request: Request) -> dict[str, Any]:
        """Every run in the runs log: who, at which pinned version, with what outcome."""
        ctx.principal(request)
        return {"runs": [s.as_dict() for s in graph.runs()]}

    @r.get("/v1/runs/{run_id}", operation_id="run_trace", **described(RunTraceAnswer))
    def get_run(request: Request, run_id: str) -> dict[str, Any]:
        """A run's trace: its pinned version, reads (query and digest), writes, tool calls."""
        ctx.principal(request)
        events = graph.run_events(run_id)
        if not events:
            raise RunNotFound(run_id[:80])
        return {"run_id": run_id, "events": events}

    @r.post("/v1/runs/{run_id}/replay", operation_id="replay_run", **described(ReplayAnswer))
    def replay_run(request: Request, run_id: str) -> dict[str, Any]:
        """Re-execute the run's reads at its pinned version; identical inputs, or the first
        difference."""
        ctx.principal(request)
        return graph.replay_run(run_id).as_dict()

    return r
