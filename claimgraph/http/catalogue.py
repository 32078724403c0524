"""The read routes, derived from the query catalogue: one ``GET`` per catalogued read.

Each read of :mod:`claimgraph.core.queries` that is a plain ``GET`` (not ``post``, not served
in pages) becomes a route at its ``route``: its parameters by their HTTP names, bounded by
their declared domains (so OpenAPI states the catalogue's bounds), ``run`` for the reads that
can meet a quarantine (``in_run``), the operation id the read's name, and the read answered
through the service layer's one read operation (``Scoped.read`` for the reads a principal's
runs account for, the graph's ``read`` for the rest). The answer is the result as JSON, or
``{"version": v, <answer>: result}`` when the catalogue names the field that holds it; a read
cut as ``absent`` answers 404 when the thing is not there. A new read, or a new parameter of
one, needs nothing here.

The reads whose routes do more than answer (a batch in a body, pages of a browsable graph)
stay in :mod:`claimgraph.http.reads`; the catalogue test holds them to the same parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from claimgraph.core.commands import Kind
from claimgraph.core.queries import QUERIES, Cut, Param, QuerySpec
from claimgraph.errors import NotFoundError
from claimgraph.http.answers import QUERY_ANSWERS, described
from claimgraph.http.bodies import PROBLEM_RESPONSES
from claimgraph.http.context import Context, decision_json
from claimgraph.http.queries import PathsOut, ReachOut
from claimgraph.http.reads import RunQuery, at_of, served

__all__ = ["RESPONSE_MODELS", "derived", "router"]

# the typed answers of reads whose result has a model (OpenAPI names their fields)
RESPONSE_MODELS: dict[str, type[BaseModel]] = {"PathsResult": PathsOut, "ReachResult": ReachOut}


def derived(spec: QuerySpec) -> bool:
    """Whether ``spec``'s route is derived here (a plain GET: not a body, not pages)."""
    return not spec.post and not spec.paged


def _annotation(spec: QuerySpec, p: Param) -> Any:
    """``p``'s FastAPI annotation: its type and bounds from its domain, its HTTP name."""
    d = p.domain
    kw: dict[str, Any] = {"description": p.doc or d.describe()}
    if p.wire != p.keyword:
        kw["alias"] = p.wire
    t: Any
    if d.kind is Kind.BOOL:
        t = bool
    elif d.kind in (Kind.INT, Kind.TIME, Kind.FLOAT):
        t = float if d.kind is Kind.FLOAT else int
        kw.update(ge=d.lo, le=d.hi)
    elif d.kind is Kind.ENUM:
        t = Literal[tuple(d.values)]
    elif d.kind is Kind.LIST:
        size = d.item.size if d.item is not None else None
        t = list[Annotated[str, Field(max_length=size)]]
        kw["max_length"] = d.size
    else:
        t = str
        kw["max_length"] = d.size
        if not d.nullable:
            kw["min_length"] = 1
    if d.nullable:
        t = t | None
    where = Path if "{" + p.name + "}" in spec.route else Query
    return Annotated[t, where(**kw)]


def _signature(spec: QuerySpec) -> inspect.Signature:
    params = [
        inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)
    ]
    for p in spec.all_params:
        default = inspect.Parameter.empty if p.required else p.default
        params.append(
            inspect.Parameter(
                p.keyword,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=_annotation(spec, p),
            )
        )
    if spec.in_run:
        params.append(
            inspect.Parameter(
                "run", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=RunQuery
            )
        )
    return inspect.Signature(params)


def _plain(value: Any) -> Any:
    """A result as JSON: views as their ``as_dict`` (the whole view, not what a run digests)."""
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _json(spec: QuerySpec, result: Any, version: int | None, params: dict[str, Any]) -> Any:
    if spec.result == "list[tuple[int, Decision]]":
        body: Any = [{**decision_json(d), "version": v} for v, d in result]
    else:
        body = _plain(result)
    if not spec.answer:
        return body
    out: dict[str, Any] = {} if version is None else {"version": version}
    if spec.name == "calibration":  # the record names what it is of
        out["edge_type"] = params["edge_type"]
    return {**out, spec.answer: body}


def _absent(spec: QuerySpec, params: dict[str, Any], version: int | None) -> NotFoundError:
    named = [p for p in spec.params if p.required]
    what = " ".join(
        [spec.name.removesuffix("_info")] + [repr(str(params[p.keyword])[:80]) for p in named]
    )
    return NotFoundError(f"no {what} at version {version}")


def _endpoint(ctx: Context, spec: QuerySpec) -> Callable[..., Any]:
    graph = ctx.graph

    def with_claims(c: dict[str, Any], v: int) -> dict[str, Any]:
        return {**c, "claim_details": [graph.claim_info(x, at=v) for x in c.get("members", [])]}

    async def endpoint(request: Request, **kw: Any) -> Any:
        run = kw.pop("run", None)
        at, timeout = kw.pop("at", None), kw.pop("timeout", 0.0)
        scoped = ctx.scoped(request)
        v: int | None = None
        if spec.in_run and spec.cut is Cut.LIMIT:  # a walk: off the event loop
            res = await run_in_threadpool(
                lambda: scoped.within(
                    run,
                    lambda r: r.read(spec.name, **kw),
                    lambda: scoped.read(spec.name, **kw, at=at, timeout=timeout),
                )
            )
        elif spec.in_run:
            v, res = await served(
                ctx,
                scoped,
                run,
                at,
                timeout,
                lambda r: (r.version, r.read(spec.name, **kw)),
                lambda v: (v, scoped.read(spec.name, **kw, at=v)),
            )
        elif spec.versioned:
            v = await at_of(ctx, scoped, at, timeout)
            res = graph.read(spec.name, **kw, at=v)
        else:
            res = graph.read(spec.name, **kw)
        if res is None and spec.cut is Cut.ABSENT:
            raise _absent(spec, kw, v)
        if spec.name == "conflict" and v is not None:  # with its claims' full evidence
            res = with_claims(res, v)
        model = RESPONSE_MODELS.get(spec.result)
        if model is not None:
            return model.model_validate(res.as_dict())
        return _json(spec, res, v, kw)

    endpoint.__signature__ = _signature(spec)  # type: ignore[attr-defined]
    endpoint.__name__ = spec.name
    return endpoint


def _answer(spec: QuerySpec) -> dict[str, Any]:
    """How the route answers and what OpenAPI says it answers: a typed result through its
    model; the rest as the JSON they are (a record, or an object), described by the read's
    answer model (:data:`~claimgraph.http.answers.QUERY_ANSWERS`)."""
    model = RESPONSE_MODELS.get(spec.result)
    if model is not None:
        return {"response_model": model}
    runtime = Any if spec.cut is Cut.ABSENT else dict[str, Any]
    answer = QUERY_ANSWERS.get(spec.name)  # a read without one still routes; a test says so
    return {"response_model": runtime} if answer is None else described(answer, runtime)


def router(ctx: Context) -> APIRouter:
    """A route per derived read of the catalogue, over ``ctx.graph``."""
    r = APIRouter(tags=["reads"], responses=PROBLEM_RESPONSES)
    for spec in QUERIES.values():
        if not derived(spec):
            continue
        r.add_api_route(
            spec.route,
            _endpoint(ctx, spec),
            methods=["GET"],
            operation_id=spec.name,
            summary=spec.summary,
            description=spec.summary,
            name=spec.name,
            **_answer(spec),
        )
    return r
