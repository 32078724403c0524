"""The MCP tools and resources, declared once for every transport (the official ``mcp`` SDK).

Each tool's description is written for a model: what it does, what comes back, what to do when
the answer is ``unknown``. The parameters are typed and described (``Annotated`` with pydantic
``Field``), so the SDK derives each tool's JSON schema from its signature — and so does
``claimgraph tools`` (:mod:`claimgraph.mcp.toolspec`). The read and write tools are made from
the query and write catalogues (:mod:`claimgraph.core.queries`, :mod:`claimgraph.core.writes`):
their parameters, types, bounds and defaults are declared there once; only what a model is told
of each tool (``READ_DOCS``, ``WRITE_DOCS``) is written here.

A tool never takes an identity: ``session_of(ctx)`` finds the caller's
:class:`~claimgraph.mcp.session.AgentSession` from the transport. The graph work of a call runs
in a worker thread, so a slow read never blocks the event loop serving other sessions.

Arguments are strict, as at every ingress: a number is a JSON number (``"0.5"`` and ``true``
are not confidences), an integer is not a float; their bounds are the command catalogue's
(:func:`~claimgraph.service.inputs.param_type`), and the service layer checks every command
against its declared domain again. An error of ours is a tool error whose text begins with
its reason code (``too_large: ...``, ``too_many: ...``, ``invalid_field: ...``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import re
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, create_model

from claimgraph import __version__
from claimgraph.core.commands import COMMANDS, Kind
from claimgraph.core.model import LIMITS
from claimgraph.core.queries import QUERIES, Param, QuerySpec
from claimgraph.core.schema import GraphSchema
from claimgraph.core.writes import WRITES, WriteSpec
from claimgraph.errors import (
    AuthError,
    ClaimgraphError,
    DecodeError,
    InputError,
    LimitError,
    NotFoundError,
    UnknownSlotError,
    VersionError,
)
from claimgraph.mcp.session import AgentSession
from claimgraph.service.access import STATUS
from claimgraph.service.inputs import param_type
from claimgraph.service.principals import Principal
from claimgraph.service.queries import QUERY_LIMITS
from claimgraph.service.scoped import may_send, role_for

__all__ = [
    "INSTRUCTIONS",
    "MAX_READ_EDGES",
    "MAX_WRITE_CLAIMS",
    "TOOL_COMMANDS",
    "WRITE_DOCS",
    "ClaimItem",
    "EdgeItem",
    "SessionOf",
    "build_server",
    "offered",
    "reason_of",
    "shaped",
]

SessionOf = Callable[[Context[Any, Any, Any]], AgentSession]
T = TypeVar("T")

INSTRUCTIONS = (
    "claimgraph is a shared, governed knowledge graph: every edge is a claim some agent made, "
    "and a governor decides each write. Every read answers as of one graph version (present, "
    "absent or unknown) and says which; pass that version to a write as based_on_version. "
    "To read one version throughout and have your reads and writes traced, call start_run and "
    "pass its run_id to later calls; end_run when done. 'unknown' means writers disagree and "
    "the edge is quarantined: never guess its value; look at conflicts_near, "
    "escalate_conflict if it blocks you, or read again later. Your identity comes from the "
    "connection; you cannot act as another agent."
)

_ID = LIMITS["id"]
Node = Annotated[
    str,
    Field(
        strict=True,
        max_length=2 * _ID + 1,
        description="A node as 'type:id', e.g. 'service:checkout'.",
    ),
]
EdgeType = Annotated[
    str, Field(strict=True, max_length=_ID, description="An edge type the graph schema defines.")
]
At = Annotated[
    int | None,
    Field(
        strict=True,
        ge=-1,
        le=2**63 - 1,
        description="Read at this version instead of the run's pinned one (or head).",
    ),
]
RunId = Annotated[
    str | None,
    Field(
        strict=True,
        max_length=_ID,
        description="Work in this run (the run_id start_run returned; any session of yours). "
        "Default: the run this session started, if any; else no run (reads at head).",
    ),
]
Hops = Annotated[
    int,
    Field(strict=True, ge=1, le=QUERY_LIMITS["max_hops"], description="At most this many edges."),
]
EdgeTypes = Annotated[
    list[str] | None, Field(description="Follow only these edge types (default: all).")
]


MAX_WRITE_CLAIMS = 100  # claims per write_claims call
MAX_READ_EDGES = 100  # edges per read_edges call


class EdgeItem(BaseModel):
    """One edge of a read_edges call."""

    model_config = ConfigDict(extra="forbid", strict=True)
    edge_type: EdgeType
    subject: Node
    object: Node


def _tool_arg(spec: WriteSpec, p: Param) -> tuple[Any, Any]:
    """A write parameter as a tool argument: its type and bounds from the write catalogue (the
    one mapping the HTTP bodies use too), its default as the catalogue gives it."""
    t = param_type(spec, p, optional=p.default is None)
    if p.required:
        return t, ...
    if isinstance(p.default, tuple):  # a sequence's default: an empty list
        return t, Field(default_factory=list)
    return t, p.default


_CLAIM = WRITES["claim"]

# One claim of a write_claims call: the parameters of assert_edge, and its polarity.
ClaimItem: Any = create_model(  # type: ignore[call-overload]
    "ClaimItem",
    __config__=ConfigDict(extra="forbid", strict=True),
    __doc__="One claim of a write_claims call.",
    **{
        p.name: _tool_arg(_CLAIM, p)
        for p in _CLAIM.params
        if p.name == "polarity" or p in WRITES["assert_"].tool_params
    },
)


def build_server(session_of: SessionOf, *, name: str = "claimgraph", **settings: Any) -> FastMCP:
    """The MCP server; ``session_of`` maps a request's context to the caller's session."""
    settings.setdefault("log_level", "WARNING")  # the SDK configures logging on construction
    mcp = FastMCP(name, instructions=INSTRUCTIONS, **settings)
    mcp._mcp_server.version = __version__  # what the server reports at initialisation

    async def call(ctx: Context[Any, Any, Any], fn: Callable[..., T], *args: Any) -> T:
        s = session_of(ctx)
        try:
            out, moved = await anyio.to_thread.run_sync(partial(_checked, s, fn, *args))
        except ClaimgraphError as exc:  # mapped to MCP's vocabulary: a tool error, reason first
            raise ToolError(f"{reason_of(exc)}: {exc}") from None
        if moved:  # the schema its tools were typed by is no longer the one in force
            with contextlib.suppress(Exception):  # a stateless request has no one to tell
                await ctx.session.send_tool_list_changed()
        return out

    # -- runs --------------------------------------------------------------------------------

    @mcp.tool()
    async def run_info(ctx: Context[Any, Any, Any], run_id: RunId = None) -> dict[str, Any]:
        """Your run (run_id's, or the one this session started): its id, the version your
        reads are pinned to, the newest version (head) and the snapshot id other agents can
        join. Without a run, says so: reads are then served at head."""
        return await call(ctx, AgentSession.run_info, run_id)

    @mcp.tool()
    async def start_run(
        ctx: Context[Any, Any, Any],
        task: Annotated[
            str | None,
            Field(
                strict=True,
                max_length=_ID,
                description="The task to act in (default: this session's, or your one task).",
            ),
        ] = None,
        snapshot_id: Annotated[
            str | None,
            Field(
                strict=True,
                max_length=_ID,
                description="Join another run's snapshot (same pinned version) by its id.",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Start a run pinned at the newest version (or at a shared snapshot): every read in
        it answers as of that version and is traced. Returns its run_id: pass it to later
        calls (from any session). Ends the run this session started before, if any."""
        return await call(ctx, AgentSession.start_run, task, snapshot_id)

    @mcp.tool()
    async def end_run(
        ctx: Context[Any, Any, Any],
        status: Annotated[
            str,
            Field(
                strict=True, max_length=STATUS, description="How the work ended, e.g. ok or failed."
            ),
        ] = "ok",
        run_id: RunId = None,
    ) -> dict[str, Any]:
        """End your run (run_id's, or the one this session started): its trace is closed and
        can be replayed, its pinned version released."""
        return await call(ctx, AgentSession.end_run, status, run_id)

    # -- reads -------------------------------------------------------------------------------

    @mcp.tool()
    async def read_edges(
        ctx: Context[Any, Any, Any],
        edges: Annotated[
            list[EdgeItem],
            Field(
                min_length=1,
                max_length=MAX_READ_EDGES,
                description=f"The edges to read, in order (at most {MAX_READ_EDGES}).",
            ),
        ],
        at: At = None,
        run_id: RunId = None,
    ) -> dict[str, Any]:
        """Several read_edge questions in one call, all at the same version (your run's
        pinned one, or head): one answer per edge, in order, each as read_edge gives it
        (present, absent or unknown with a conflict_id — never guess an unknown edge's value)."""
        items = [e.model_dump() for e in edges]
        return await call(ctx, AgentSession.read_edges, items, at, run_id)

    for spec in QUERIES.values():
        if spec.mcp and not spec.post:
            mcp.tool(name=spec.mcp, description=READ_DOCS.get(spec.mcp, spec.summary))(
                _read_tool(spec, call)
            )

    @mcp.tool()
    async def conflicts_near(
        ctx: Context[Any, Any, Any],
        node: Node,
        include_escalated: Annotated[
            bool,
            Field(strict=True, description="Also list conflicts already escalated to a person."),
        ] = True,
        run_id: RunId = None,
    ) -> dict[str, Any]:
        """Open conflicts (quarantined or escalated) whose claims touch node, with every
        claim side by side: owner, confidence, evidence, reasoning."""
        return await call(ctx, AgentSession.conflicts_near, node, include_escalated, run_id)

    # -- writes ------------------------------------------------------------------------------

    for wspec in WRITES.values():
        if wspec.mcp:
            mcp.tool(name=wspec.mcp, description=WRITE_DOCS[wspec.mcp])(_write_tool(wspec, call))

    @mcp.tool(description=WRITE_DOCS["write_claims"])
    async def write_claims(
        ctx: Context[Any, Any, Any],
        claims: Annotated[
            list[ClaimItem],
            Field(max_length=MAX_WRITE_CLAIMS, description="The claims, in order."),
        ],
        run_id: RunId = None,
    ) -> dict[str, Any]:
        items = [c.model_dump() for c in claims]
        return await call(ctx, AgentSession.write_claims, items, run_id)

    # -- resources ---------------------------------------------------------------------------

    @mcp.resource(
        "claimgraph://schema",
        name="graph-schema",
        description="The graph schema in force at your pinned version: node and edge types, "
        "writers, cardinality, conflict policies.",
        mime_type="application/json",
    )
    async def schema_resource() -> str:
        ctx = mcp.get_context()
        return json.dumps(await call(ctx, AgentSession.schema))

    @mcp.resource(
        "claimgraph://grants",
        name="my-grants",
        description="Who you are to the graph: your agent name, tasks, roles and the edge "
        "types you may write.",
        mime_type="application/json",
    )
    async def grants_resource() -> str:
        ctx = mcp.get_context()
        return json.dumps(await call(ctx, AgentSession.grants))

    for t in mcp._tool_manager.list_tools():  # docstrings' indentation is not for a model
        t.description = " ".join((t.description or "").split())

    async def list_tools() -> list[Any]:
        """The tools the caller's roles allow (a resolver's tools only to a resolver), their
        edge and node types those of the schema in force at the caller's version."""
        session = session_of(mcp.get_context())
        schema = await anyio.to_thread.run_sync(partial(_counted, session, schema_in_force))
        session.listed_schema = "" if schema is None else schema.digest
        who = session.identity
        tools = [t for t in await FastMCP.list_tools(mcp) if offered(t.name, who, schema)]
        if schema is None:
            return tools
        return [t.model_copy(update={"inputSchema": shaped(t.inputSchema, schema)}) for t in tools]

    mcp._mcp_server.list_tools()(list_tools)  # type: ignore[no-untyped-call]  # per session
    return mcp


def schema_in_force(session: AgentSession) -> GraphSchema | None:
    """The schema in force at the session's version (None: none yet), parsed once per
    schema document."""
    row = session.scoped.schema_info(at=session.read_version())
    if row is None:
        return None
    return _parsed(row["document"], row.get("source") or "<schema>")


@functools.lru_cache(maxsize=8)
def _parsed(document: str, source: str) -> GraphSchema:
    from claimgraph.core.schema import parse_schema

    return parse_schema(document, source)


_NODE_ARGS = frozenset({"subject", "object", "node", "src", "dst"})


def shaped(schema: dict[str, Any], graph: GraphSchema) -> dict[str, Any]:
    """A tool's input schema with the graph schema's types in it: an ``edge_type`` is one of
    the edge types (an enum), an ``edge_types`` list's items too, and a node argument
    (``subject``, ``object``, ``node``, ``src``, ``dst``) starts with one of the node types.
    The governor still decides every write (a stale list is a recorded rejection)."""
    edge_types, node_types = sorted(graph.edge_types), sorted(graph.node_types)
    prefix = "^(" + "|".join(re.escape(t) for t in node_types) + "):." if node_types else None

    def strings(s: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        if s.get("type") == "string":
            return {**s, **extra}
        if "anyOf" in s:
            return {**s, "anyOf": [strings(a, extra) for a in s["anyOf"]]}
        if s.get("type") == "array" and isinstance(s.get("items"), dict):
            return {**s, "items": strings(s["items"], extra)}
        return s

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        if key in ("edge_type", "edge_types") and edge_types:
            return strings(node, {"enum": edge_types})
        if key in _NODE_ARGS and prefix is not None:
            return strings(node, {"pattern": prefix})
        if "properties" in node and isinstance(node["properties"], dict):
            props = {k: walk(v, k) for k, v in node["properties"].items()}
            return {
                **{k: walk(v) for k, v in node.items() if k != "properties"},
                "properties": props,
            }
        return {k: walk(v) for k, v in node.items()}

    out: dict[str, Any] = walk(schema)
    return out


# The command each write tool sends (its roles decide who is offered it).
TOOL_COMMANDS = {s.mcp: s.command for s in WRITES.values() if s.mcp} | {"write_claims": "claim"}


def offered(tool: str, principal: Principal | None, schema: GraphSchema | None = None) -> bool:
    """Whether ``tool`` is offered to ``principal`` (None: to anyone; every tool is listed
    then, as ``claimgraph tools`` prints them). A tool whose command needs a role the
    principal lacks is not listed; called anyway, the service refuses and records it.

    A local owner (``claimgraph mcp --agent``, trusted in process) has no roles of its own:
    the schema's principals are what the governor judges it by, so with ``schema`` (the one
    in force) it is offered a resolver's tools only when the schema makes it a resolver, and
    an admin's only when it makes it an admin."""
    ctype = TOOL_COMMANDS.get(tool)
    if principal is None or ctype is None:
        return True
    if not may_send(principal, ctype):
        return False
    role = role_for(ctype)
    if principal.how != "local-owner" or schema is None or role is None:
        return True
    return (
        schema.is_admin(principal.agent) if role == "admin" else schema.is_resolver(principal.agent)
    )


# what an agent is told of each read tool (its parameters come from the query catalogue)
READ_DOCS = {
    "read_edge": "Does edge_type(subject -> object) hold? Answers present, absent or unknown, "
    "with the version it was read at (your run's pinned one, or head). unknown comes with a "
    "conflict_id: writers disagree and the edge is quarantined — do not guess its value.",
    "read_slot": "What an exclusive slot holds (e.g. the one environment a service deploys "
    "to): present with the nodes it holds, absent (empty) or unknown (quarantined).",
    "neighbors": "A node's edges at your pinned version, or head (present and unknown ones), "
    "optionally filtered by who claimed them, how confidently and when.",
    "find_paths": "Paths from src to dst of at most max_hops edges, shortest first. A path "
    "through a quarantined edge is 'unknown' and names its conflicts; 'unknown' lists every "
    "quarantined edge met.",
    "reach": "Every node within max_hops of node, nearest first (e.g. what a service depends "
    "on, transitively). certain: false means reached only through quarantined edges.",
}


_CLAIM_DOC = COMMANDS["claim"].summary

# what an agent is told of each write tool (its parameters come from the write catalogue)
WRITE_DOCS = {
    "assert_edge": f"{_CLAIM_DOC} This asserts edge_type(subject -> object) holds, based on "
    "your run's pinned version (or on based_on_version: the version of the read you acted "
    "on). The answer is the governor's decision: accepted, quarantined (another writer "
    "disagrees), or rejected with a reason.",
    "deny_edge": f"{_CLAIM_DOC} This denies that edge_type(subject -> object) holds (e.g. you "
    "checked and the dependency is gone). Returns the governor's decision.",
    "write_claims": f"{_CLAIM_DOC} This writes several claims at once (at most "
    f"{MAX_WRITE_CLAIMS}), each asserting or denying edge_type(subject -> object), in one "
    "write. Returns one decision per claim, in order.",
    "retract_claim": COMMANDS["retract"].summary + " Only your own claims.",
    "escalate_conflict": COMMANDS["escalate"].summary + " Use it when a quarantined edge "
    "blocks your work and a person must decide; needs the resolver role.",
    "resolve_conflict": COMMANDS["resolve"].summary + " Needs the resolver role; give the "
    "winning claim_id, or none to reject every claim.",
}


def _field(p: Param) -> Any:
    """A read parameter as an MCP tool argument: its type and bounds from its domain."""
    d = p.domain
    kw: dict[str, Any] = {"strict": True, "description": p.doc or d.describe()}
    t: Any
    if d.kind is Kind.BOOL:
        t = bool
    elif d.kind in (Kind.INT, Kind.TIME, Kind.FLOAT):
        t = float if d.kind is Kind.FLOAT else int
        kw.update(ge=d.lo, le=d.hi)
    elif d.kind is Kind.ENUM:
        t = Literal[tuple(d.values)]
        del kw["strict"]  # a literal is exact already
    elif d.kind is Kind.LIST:
        size = d.item.size if d.item is not None else None
        t = list[Annotated[str, Field(strict=True, max_length=size)]]
        kw["max_length"] = d.size
        del kw["strict"]
    else:
        t = str
        kw["max_length"] = d.size
    if d.nullable:
        t = t | None
    return Annotated[t, Field(**kw)]


def _read_tool(spec: QuerySpec, call: Callable[..., Any]) -> Callable[..., Any]:
    """The MCP tool of a catalogued read: its parameters (by their catalogue names), ``at``
    and ``run_id``; answered by :meth:`AgentSession.read`."""
    names = {p.name: p.keyword for p in spec.params}

    async def tool(ctx: Context[Any, Any, Any], **kw: Any) -> dict[str, Any]:
        at, run_id = kw.pop("at", None), kw.pop("run_id", None)
        params = {names[k]: v for k, v in kw.items()}
        out: dict[str, Any] = await call(ctx, AgentSession.read, spec.name, params, at, run_id)
        return out

    P = inspect.Parameter
    params = [P("ctx", P.POSITIONAL_OR_KEYWORD, annotation=Context[Any, Any, Any])]
    for p in spec.params:
        default = P.empty if p.required else p.default
        params.append(P(p.name, P.KEYWORD_ONLY, default=default, annotation=_field(p)))
    params += [
        P("at", P.KEYWORD_ONLY, default=None, annotation=At),
        P("run_id", P.KEYWORD_ONLY, default=None, annotation=RunId),
    ]
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=dict[str, Any]
    )
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": dict[str, Any]}
    tool.__name__ = spec.mcp
    return tool


def _write_tool(spec: WriteSpec, call: Callable[..., Any]) -> Callable[..., Any]:
    """The MCP tool of a catalogued write: its tool parameters (by their catalogue names) and
    ``run_id``; answered by :meth:`AgentSession.write`."""
    names = {p.name: p.keyword for p in spec.tool_params}

    async def tool(ctx: Context[Any, Any, Any], **kw: Any) -> dict[str, Any]:
        run_id = kw.pop("run_id", None)
        params = {names[k]: v for k, v in kw.items()}
        out: dict[str, Any] = await call(ctx, AgentSession.write, spec.name, params, run_id)
        return out

    P = inspect.Parameter
    params = [P("ctx", P.POSITIONAL_OR_KEYWORD, annotation=Context[Any, Any, Any])]
    for p in spec.tool_params:
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        default = P.empty if p.required else default
        params.append(P(p.name, P.KEYWORD_ONLY, default=default, annotation=_tool_arg(spec, p)[0]))
    params.append(P("run_id", P.KEYWORD_ONLY, default=None, annotation=RunId))
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=dict[str, Any]
    )
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": dict[str, Any]}
    tool.__name__ = spec.mcp
    return tool


def _counted(s: AgentSession, fn: Callable[..., T], *args: Any) -> T:
    """One tool call, as one of its principal's requests in flight when the transport does
    not count them itself (stdio; ``/mcp`` is behind the HTTP gate, which does)."""
    if not s.counts_requests:
        return fn(s, *args)
    with s.scoped.access.request(s.identity):
        return fn(s, *args)


def _checked(s: AgentSession, fn: Callable[..., T], *args: Any) -> tuple[T, bool]:
    """One tool call, and whether the session should be told its tool list changed: it
    listed its tools typed by one schema, and another is in force at its version now (a
    publish, seen at the session's next call; told once per change)."""
    out = _counted(s, fn, *args)
    listed = s.listed_schema
    if listed is None:
        return out, False
    row = s.scoped.schema_info(at=s.read_version())
    now = "" if row is None else str(row["digest"])
    if now == listed:
        return out, False
    s.listed_schema = now
    return out, True


def reason_of(exc: ClaimgraphError) -> str:
    """The reason code an error of ours is reported with (as HTTP's problem+json names it)."""
    if isinstance(exc, AuthError | LimitError | DecodeError):
        return exc.reason
    for cls, reason in (
        (NotFoundError, "not_found"),
        (UnknownSlotError, "unknown_slot"),
        (VersionError, "version_unavailable"),
        (InputError, "invalid_field"),
    ):
        if isinstance(exc, cls):
            return reason
    return "internal"
