"""The query catalogue (claimgraph.core.queries) against every surface: each catalogued read is
on every graph with the catalogue's parameters and defaults, on a run when traced, on HTTP with
the catalogue's bounds and a stable operation id, in MCP and the CLI where it says; the port's
one read operation answers every catalogued read as its typed method does, on each transport;
and a toy read added to the catalogue is reported missing from every surface until it is there."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.commands import Domain, Kind
from claimgraph.core.queries import (
    PAGE_PARAMS,
    QUERIES,
    QUERY_LIMITS,
    Param,
    QuerySpec,
    params_violation,
)
from claimgraph.errors import InputError
from claimgraph.http.app import create_app
from claimgraph.projections.retention import gc_graph
from claimgraph.sdk.aio import AsyncEmbeddedGraph, AsyncGraph
from claimgraph.sdk.aio_http import AsyncHttpGraph
from claimgraph.sdk.aio_runs import AsyncRun
from claimgraph.sdk.http import HttpGraph
from claimgraph.service.attached import AttachedGraph
from claimgraph.service.graph import Graph
from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.service.port import GraphAPI
from claimgraph.service.runs import Run
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file

GRAPHS = (GraphAPI, Graph, KafkaGraph, AttachedGraph, HttpGraph, AsyncGraph, AsyncHttpGraph)


def _signature(fn: Any) -> tuple[list[str], dict[str, Any]]:
    """(positional parameter names in order, keyword-only name → default) of ``fn``."""
    pos, kw = [], {}
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            pos.append(p.name)
            if p.default is not p.empty:
                kw[p.name] = p.default
        elif p.kind is p.KEYWORD_ONLY:
            kw[p.name] = p.default
    return pos, kw


def _want(spec: QuerySpec, params: tuple[Param, ...]) -> tuple[list[str], dict[str, Any]]:
    pos = [p.keyword for p in params if p.positional]
    kw = {p.keyword: p.default for p in params if not p.required}
    return pos, kw


def surface_problems(catalogue: dict[str, QuerySpec]) -> list[str]:
    """Every way a surface differs from ``catalogue`` (empty: all agree)."""
    out = []
    for spec in catalogue.values():
        for cls in GRAPHS:
            fn = getattr(cls, spec.name, None)
            if fn is None:
                out.append(f"{cls.__name__} has no {spec.name}")
            elif _signature(fn) != _want(spec, spec.all_params):
                out.append(
                    f"{cls.__name__}.{spec.name}{_signature(fn)} != {_want(spec, spec.all_params)}"
                )
        if spec.traced:
            for run in (Run, AsyncRun):
                fn = getattr(run, spec.name, None)
                if fn is None:
                    out.append(f"{run.__name__} has no {spec.name}")
                elif _signature(fn) != _want(spec, spec.params):
                    out.append(
                        f"{run.__name__}.{spec.name}{_signature(fn)} != {_want(spec, spec.params)}"
                    )
            if not spec.recorded:
                out.append(f"runs do not replay {spec.name} (no recorded arguments)")
    return out


def test_every_catalogued_read_is_on_every_graph_and_run_as_declared() -> None:
    """Each read: the same positional parameters, keywords and defaults on the port, the
    embedded, Kafka, attached, HTTP and async graphs (and on runs when traced)."""
    assert surface_problems(dict(QUERIES)) == []
    for spec in QUERIES.values():
        assert spec.traced == bool(spec.recorded), spec.name
        assert set(spec.recorded) <= {p.name for p in spec.params}, spec.name


def test_a_toy_read_in_the_catalogue_is_missing_from_every_surface_until_written() -> None:
    """Adding a read to the catalogue alone is caught: every graph, run, the replayed reads,
    HTTP, MCP and the CLI say they lack it."""
    toy = QuerySpec(
        "toy",
        "A toy read.",
        (Param("n", Domain(Kind.INT, lo=0, hi=9), 1),),
        "int",
        "/v1/toy",
        traced=True,
        mcp="toy",
        cli="toy",
    )
    problems = surface_problems({"toy": toy})
    for where in [c.__name__ for c in GRAPHS] + ["Run", "AsyncRun", "recorded"]:
        assert any(where in p for p in problems), where
    assert "/v1/toy" not in _openapi()["paths"]
    assert "toy" not in _mcp_tools() and "toy" not in _cli_commands()


def _openapi() -> dict[str, Any]:
    import json

    return json.loads((Path(__file__).parent.parent / "docs" / "openapi.json").read_text())


def _mcp_tools() -> dict[str, dict[str, Any]]:
    from claimgraph.mcp.toolspec import mcp_tools

    return {t["name"]: t["input_schema"] for t in mcp_tools()}


def _cli_commands() -> set[str]:
    import typer

    from claimgraph.cli.main import app

    group = typer.main.get_command(app)
    return set(group.commands)  # type: ignore[attr-defined]


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The bounds a JSON schema puts on a value (through anyOf for nullable ones)."""
    out: dict[str, Any] = {}
    for s in [schema, *schema.get("anyOf", [])]:
        for k in ("minimum", "maximum", "maxLength", "enum"):
            if k in s:
                out[k] = s[k]
        if "items" in s:
            out.update({f"items.{k}": v for k, v in _bounds(s["items"]).items()})
    return out


def _declared_bounds(p: Param) -> dict[str, Any]:
    d = p.domain
    if d.kind in (Kind.INT, Kind.TIME, Kind.FLOAT):
        return {"minimum": d.lo, "maximum": d.hi}
    if d.kind is Kind.ID:
        return {"maxLength": d.size}
    if d.kind is Kind.ENUM:
        return {"enum": list(d.values)}
    if d.kind is Kind.LIST and d.item is not None:
        return {f"items.{k}": v for k, v in _declared_bounds(Param("", d.item)).items()}
    return {}


def test_http_routes_take_the_catalogued_parameters_with_their_bounds() -> None:
    """Every catalogued GET route's query and path parameters are the catalogue's (by their
    HTTP names, plus ``run`` for reads a run can serve), each bounded as declared."""
    paths = _openapi()["paths"]
    for spec in QUERIES.values():
        if spec.post:
            continue
        op = paths[spec.route]["get"]
        got = {p["name"]: p["schema"] for p in op.get("parameters", [])}
        want = {p.wire: p for p in spec.all_params}
        pages = set(PAGE_PARAMS) if spec.paged else set()
        assert set(got) - {"run"} == set(want) | pages, spec.name
        for name, p in want.items():
            if name in pages:
                continue  # a page's own bound, not the read's
            b = {k: v for k, v in _bounds(got[name]).items() if k in _declared_bounds(p)}
            assert b == _declared_bounds(p), f"{spec.route} {name}: {b}"


def test_mcp_tools_and_cli_commands_serve_the_reads_the_catalogue_names() -> None:
    """MCP tools take no read parameter the catalogue does not declare (besides the run they
    read in); the CLI has every command the catalogue names."""
    tools, commands = _mcp_tools(), _cli_commands()
    for spec in QUERIES.values():
        if spec.mcp:
            assert spec.mcp in tools, spec.mcp
            names = set(tools[spec.mcp].get("properties", {}))
            assert names <= {p.name for p in spec.all_params} | {"run_id"}, (spec.mcp, names)
        if spec.cli:
            assert spec.cli in commands, spec.cli


# -- the one read operation, on every transport ------------------------------------------------

EXAMPLES: dict[str, dict[str, Any]] = {
    "edge": {"edge_type": "depends_on", "subject": "service:a", "obj": "service:b"},
    "read_edges": {"edges": [("depends_on", "service:a", "service:b")]},
    "slot": {"edge_type": "runs_in", "node": "service:api"},
    "neighbors": {"node": "service:a", "min_confidence": 0.5},
    "paths": {"src": "service:a", "dst": "service:c", "max_hops": 2},
    "reach": {"node": "service:a", "max_hops": 2},
    "edges": {"limit": 10},
    "history": {"edge_type": "depends_on", "subject": "service:a", "obj": "service:b"},
    "quarantine": {"include_closed": True},
    "claim_info": {"claim_id": "c-ab"},
    "conflict": {"conflict_id": "nope"},
    "schema_info": {},
    "escalation": {"conflict_id": "nope"},
    "escalations": {"include_open": True},
    "calibration": {"edge_type": "runs_in"},
    "decisions": {"start": 1, "limit": 3},
}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Graph]:
    """A graph with edges, a slot changed after GC (a cut history) and a schema."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    g.assert_("depends_on", "service:a", "service:b", agent="inventory", command_id="c-ab")
    g.assert_("depends_on", "service:b", "service:c", agent="inventory")
    g.assert_("runs_in", "service:api", "environment:prod", agent="release", task="promote")
    gc_graph(g, horizon=2)
    g.assert_("runs_in", "service:api", "environment:dev", agent="release", task="promote")
    try:
        yield g
    finally:
        g.close()


def _same(a: Any, b: Any) -> None:
    from claimgraph.service.traces import jsonable

    def plain(x: Any) -> Any:
        return x.as_dict() if hasattr(x, "as_dict") else jsonable(x)

    assert plain(a) == plain(b)


def test_read_answers_every_catalogued_read_as_its_method_on_each_transport(world: Graph) -> None:
    """``read(name, **params)`` = the typed method, embedded and over HTTP, for every read of
    the catalogue (the examples cover the catalogue, so a new read needs one)."""
    assert set(EXAMPLES) == set(QUERIES)
    app = create_app(world, token_file())
    with claimgraph.connect("http://t", token=TOKENS["tracer"], app=app) as http:
        for g in (world, http):
            for name, params in EXAMPLES.items():
                _same(g.read(name, **params), getattr(g, name)(**params))
        for name, params in EXAMPLES.items():
            _same(http.read(name, **params), world.read(name, **params))


def test_every_catalogued_read_answers_alike_on_every_transport(
    world: Graph, tmp_path: Path
) -> None:
    """The contract of the one read operation: every read of the catalogue, through
    ``read``, gives the embedded graph's answer on the attached graph (secondaries and the
    writer's socket), over HTTP, and on the async embedded and HTTP graphs; and each typed
    method (generated or implemented) gives what ``read`` gives."""
    import anyio

    from claimgraph.service.attached import AttachedGraph
    from claimgraph.service.local_writer import WriterListener

    assert set(EXAMPLES) == set(QUERIES)
    want = {name: world.read(name, **params) for name, params in EXAMPLES.items()}
    app = create_app(world, token_file())
    listener = WriterListener(world)
    attached = AttachedGraph(tmp_path / "g", "test")
    try:
        with claimgraph.connect("http://t", token=TOKENS["tracer"], app=app) as http:
            for g in (attached, http):
                for name, params in EXAMPLES.items():
                    _same(g.read(name, **params), want[name])
                    _same(getattr(g, name)(**params), want[name])
    finally:
        attached.close()
        listener.close()

    async def go() -> None:
        for g in (
            AsyncEmbeddedGraph(world),
            await claimgraph.aconnect("http://t", token=TOKENS["tracer"], app=app),
        ):
            for name, params in EXAMPLES.items():
                _same(await g.read(name, **params), want[name])
                _same(await getattr(g, name)(**params), want[name])
            if isinstance(g, AsyncHttpGraph):
                await g.aclose()

    anyio.run(go)


def test_async_read_answers_as_the_sync_one(world: Graph) -> None:
    """The async graphs' ``read`` gives what the embedded graph's does, for every read."""
    import anyio

    app = create_app(world, token_file())

    async def go() -> None:
        emb = AsyncEmbeddedGraph(world)
        remote = await claimgraph.aconnect("http://t", token=TOKENS["tracer"], app=app)
        try:
            for name, params in EXAMPLES.items():
                want = world.read(name, **params)
                _same(await emb.read(name, **params), want)
                _same(await remote.read(name, **params), want)
        finally:
            await remote.aclose()

    anyio.run(go)


@pytest.mark.parametrize(
    ("name", "params", "phrase"),
    [
        ("nope", {}, "no read 'nope'"),
        ("edge", {"edge_type": "depends_on", "subject": "service:a"}, "needs obj"),
        ("schema_info", {"colour": 1}, "takes no parameter 'colour'"),
        (
            "paths",
            {"src": "s:a", "dst": "s:b", "max_hops": QUERY_LIMITS["max_hops"] + 1},
            "max_hops",
        ),
        ("neighbors", {"node": "s:a", "direction": "up"}, "direction must be one of out, in"),
        ("edge", {"edge_type": "x" * 300, "subject": "s:a", "obj": "s:b"}, "edge_type has 300"),
    ],
)
def test_bad_reads_are_refused_with_a_clear_error(
    world: Graph, name: str, params: dict[str, Any], phrase: str
) -> None:
    """An unknown read, a missing, unknown or out-of-bounds parameter: InputError naming it."""
    spec = QUERIES.get(name)
    if spec is not None:
        assert phrase in (params_violation(spec, params) or "")
    with pytest.raises(InputError, match=phrase.replace("(", r"\(")):
        world.read(name, **params)


# -- the generated surfaces ----------------------------------------------------------------------


def test_the_generated_read_methods_are_what_the_catalogue_makes() -> None:
    """claimgraph/service/catalogue_reads.py and claimgraph/sdk/aio_reads.py are exactly what
    tools/gen_reads.py writes from the catalogue today (regenerate after changing it)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    import gen_reads as gen

    for path, aio in ((gen.SYNC, False), (gen.ASYNC, True)):
        assert path.read_text(encoding="utf-8") == gen.render(aio), f"{path}: regenerate it"


# -- a new read is one declaration plus its implementation -----------------------------------------

TOY = QuerySpec(
    "toy",
    "A toy read: the version and n.",
    (Param("n", Domain(Kind.INT, lo=0, hi=9), 1, "How many."),),
    "dict[str, Any] | None",
    "/v1/toy",
    traced=True,
    recorded=("n",),  # what a trace of it records (the format)
    mcp="toy",
)


def _toy(self: Any, *, n: int = 1, at: int | None = None) -> dict[str, Any]:
    """The toy read's one implementation (the embedded graph's)."""
    return {"version": self._at(at, 0.0), "n": n}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> QuerySpec:
    """The toy read declared in the catalogue and implemented by the embedded graph."""
    from claimgraph.service.reads import GraphReads

    monkeypatch.setitem(QUERIES, "toy", TOY)  # type: ignore[arg-type]
    monkeypatch.setattr(GraphReads, "toy", _toy, raising=False)
    return TOY


def test_a_toy_read_declared_once_is_on_every_surface(world: Graph, toy: QuerySpec) -> None:
    """Declared in the catalogue and implemented once, a read is an HTTP route with its
    bounds and operation id in OpenAPI, answered through the sync and async SDKs and a run,
    and a typed method in the generated sync, async and run surfaces."""
    import sys

    import anyio

    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    import gen_reads as gen

    app = create_app(world, token_file())
    op = app.openapi()["paths"]["/v1/toy"]["get"]
    assert op["operationId"] == "toy"
    got = {p["name"]: p["schema"] for p in op["parameters"]}
    assert set(got) == {"n", "at"} and (got["n"]["minimum"], got["n"]["maximum"]) == (0, 9)
    head = world.head()
    with claimgraph.connect("http://t", token=TOKENS["tracer"], app=app) as http:
        assert http.read("toy", n=3) == {"version": head, "n": 3}
        with pytest.raises(InputError, match="n must be"):
            http.read("toy", n=10)
        with http.run() as run:
            assert run.read("toy", n=2) == {"version": head, "n": 2}
        (read,) = [e for e in run.events if e["kind"] == "read"]
        assert '"op": "toy"' in read["payload"] and '"n": 2' in read["payload"]

    async def remote() -> Any:
        g = await claimgraph.aconnect("http://t", token=TOKENS["tracer"], app=app)
        try:
            return await g.read("toy", n=4)
        finally:
            await g.aclose()

    assert anyio.run(remote) == {"version": head, "n": 4}
    for aio in (False, True):
        ns: dict[str, Any] = {}
        exec(compile(gen.render(aio), "<generated>", "exec"), ns)
        prefix = "Async" if aio else ""
        for cls, want in (
            (ns[f"{prefix}CatalogueReads"], ["self", "n", "at"]),
            (ns[f"{prefix}RunReads"], ["self", "n"]),
        ):
            assert list(inspect.signature(cls.toy).parameters) == want
            assert inspect.signature(cls.toy).parameters["n"].default == 1
            assert inspect.iscoroutinefunction(cls.toy) is aio


def test_the_read_by_name_block_runs(world: Graph) -> None:
    """docs/how-to/queries.md's ``read`` example runs as written: its sync line on the
    embedded graph, its awaited line on the async one (the block's ``g`` and ``ag``)."""
    import anyio

    from tests.docs_text import block

    sync, awaited = block("python", 'g.read("neighbors"').strip().splitlines()
    while world.head() < 12:
        world.assert_("depends_on", f"service:x{world.head()}", "service:y", agent="inventory")
    world.assert_("depends_on", "service:checkout", "service:billing", agent="inventory")
    assert eval(sync, {"g": world}) == []  # at version 12 checkout has no edge yet
    assert [n.node for n in eval(sync.replace("at=12", "at=None"), {"g": world})] == [
        ("service", "billing")
    ]

    async def go() -> Any:
        return await eval(awaited.removeprefix("await "), {"ag": AsyncEmbeddedGraph(world)})

    res = anyio.run(go)
    assert res.src == ("service", "a") and len(res.paths) == 1


def test_the_toy_read_is_an_mcp_tool(tmp_path: Path, toy: QuerySpec) -> None:
    """Declared once, the toy read is an MCP tool with its bounded argument, answered through
    a real MCP session on a served graph, and its out-of-bounds argument refused."""
    import anyio
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.mcp_fixtures import result, served

    schema = _mcp_tools()["toy"]
    assert set(schema["properties"]) == {"n", "at", "run_id"}
    assert (schema["properties"]["n"]["minimum"], schema["properties"]["n"]["maximum"]) == (0, 9)
    with served(tmp_path / "g") as (url, g, _sessions):

        async def go() -> tuple[dict[str, Any], bool]:
            headers = {"Authorization": f"Bearer {TOKENS['tracer']}"}
            async with (
                httpx.AsyncClient(headers=headers, timeout=30) as client,
                streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                ok = result(await s.call_tool("toy", {"n": 5}))
                bad = await s.call_tool("toy", {"n": 10})
                return ok, bad.isError

        ok, refused = anyio.run(go)
        assert ok == {"version": g.head(), "result": {"version": g.head(), "n": 5}}
        assert refused
