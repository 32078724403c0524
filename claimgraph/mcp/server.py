"""The MCP tools and resources, declared once for every transport (the official ``mcp`` SDK).

Each tool's description is written for a model: what it does, what comes back, what to do when
the answer is ``unknown``. The parameters are typed and described (``Annotated`` with pydantic
``Field``), so the SDK derives each tool's JSON schema from its signature — and so does
``claimgraph tools`` (:mod:`claimgraph.mcp.toolspec`). Write tools take their summaries from
the command catalogue (:mod:`claimgraph.core.commands`).

A tool never takes an identity: ``session_of(ctx)`` finds the caller's
:class:`~claimgraph.mcp.session.AgentSession` from the transport. The graph work of a call runs
in a worker thread, so a slow read never blocks the event loop serving other sessions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, ConfigDict, Field

from claimgraph import __version__
from claimgraph.core.commands import COMMANDS
from claimgraph.mcp.session import AgentSession
from claimgraph.service.queries import QUERY_LIMITS

__all__ = [
    "INSTRUCTIONS",
    "MAX_READ_EDGES",
    "MAX_WRITE_CLAIMS",
    "ClaimItem",
    "EdgeItem",
    "SessionOf",
    "build_server",
]

SessionOf = Callable[[Context[Any, Any, Any]], AgentSession]
T = TypeVar("T")

INSTRUCTIONS = (
    "claimgraph is a shared, governed knowledge graph: every edge is a claim some agent made, "
    "and a governor decides each write. You work inside a run pinned to one graph version: "
    "every read answers as of that version (present, absent or unknown) and is recorded. "
    "'unknown' means writers disagree and the edge is quarantined: never guess its value; "
    "look at conflicts_near, escalate_conflict if it blocks you, or start_run later. Your "
    "identity comes from the connection; you cannot act as another agent."
)

Node = Annotated[str, Field(description="A node as 'type:id', e.g. 'service:checkout'.")]
EdgeType = Annotated[str, Field(description="An edge type the graph schema defines.")]
At = Annotated[
    int | None,
    Field(description="Read at this version instead of the run's pinned one (rarely needed)."),
]
Confidence = Annotated[
    float, Field(ge=0.0, le=1.0, description="How sure you are, 0..1 (be calibrated).")
]
Evidence = Annotated[
    list[str] | None,
    Field(description="Where this comes from: data sources, ticket or log ids, URLs."),
]
Reasoning = Annotated[str, Field(description="Why you claim this, in a sentence or two.")]
Hops = Annotated[
    int, Field(ge=1, le=QUERY_LIMITS["max_hops"], description="At most this many edges.")
]
EdgeTypes = Annotated[
    list[str] | None, Field(description="Follow only these edge types (default: all).")
]


MAX_WRITE_CLAIMS = 100  # claims per write_claims call
MAX_READ_EDGES = 100  # edges per read_edges call


class EdgeItem(BaseModel):
    """One edge of a read_edges call."""

    model_config = ConfigDict(extra="forbid")
    edge_type: EdgeType
    subject: Node
    object: Node


class ClaimItem(BaseModel):
    """One claim of a write_claims call."""

    model_config = ConfigDict(extra="forbid")
    polarity: Literal["assert", "deny"] = Field(
        "assert", description="assert: the edge holds; deny: it does not."
    )
    edge_type: EdgeType
    subject: Node
    object: Node
    confidence: Confidence = 1.0
    evidence: list[str] = Field(
        default_factory=list,
        description="Where this comes from: data sources, ticket or log ids, URLs.",
    )
    reasoning: Reasoning = ""


def build_server(session_of: SessionOf, *, name: str = "claimgraph", **settings: Any) -> FastMCP:
    """The MCP server; ``session_of`` maps a request's context to the caller's session."""
    settings.setdefault("log_level", "WARNING")  # the SDK configures logging on construction
    mcp = FastMCP(name, instructions=INSTRUCTIONS, **settings)
    mcp._mcp_server.version = __version__  # what the server reports at initialisation

    async def call(ctx: Context[Any, Any, Any], fn: Callable[..., T], *args: Any) -> T:
        s = session_of(ctx)
        return await anyio.to_thread.run_sync(partial(fn, s, *args))

    # -- runs --------------------------------------------------------------------------------

    @mcp.tool()
    async def run_info(ctx: Context[Any, Any, Any]) -> dict[str, Any]:
        """Your current run: its id, the version your reads are pinned to, the newest version
        (head) and the snapshot id other agents can join. Starts a run if none is open."""
        return await call(ctx, AgentSession.run_info)

    @mcp.tool()
    async def start_run(
        ctx: Context[Any, Any, Any],
        task: Annotated[
            str | None, Field(description="The task to act in (default: this session's).")
        ] = None,
        snapshot_id: Annotated[
            str | None,
            Field(description="Join another run's snapshot (same pinned version) by its id."),
        ] = None,
    ) -> dict[str, Any]:
        """End your current run and start a fresh one, pinned at the newest version (or at a
        shared snapshot). Do this to see writes made since your run began."""
        return await call(ctx, AgentSession.start_run, task, snapshot_id)

    @mcp.tool()
    async def end_run(
        ctx: Context[Any, Any, Any],
        status: Annotated[str, Field(description="How the work ended, e.g. ok or failed.")] = "ok",
    ) -> dict[str, Any]:
        """End your run (its trace is closed and can be replayed). The next call starts a new
        run at the newest version."""
        return await call(ctx, AgentSession.end_run, status)

    # -- reads -------------------------------------------------------------------------------

    @mcp.tool()
    async def read_edge(
        ctx: Context[Any, Any, Any], edge_type: EdgeType, subject: Node, object: Node, at: At = None
    ) -> dict[str, Any]:
        """Does edge_type(subject -> object) hold? Answers present, absent or unknown at your
        run's pinned version. unknown comes with a conflict_id: writers disagree and the
        edge is quarantined — do not guess its value."""
        return await call(ctx, AgentSession.read_edge, edge_type, subject, object, at)

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
    ) -> dict[str, Any]:
        """Several read_edge questions in one call, all at the same version (your run's
        pinned one): one answer per edge, in order, each as read_edge gives it (present,
        absent or unknown with a conflict_id — never guess an unknown edge's value)."""
        items = [e.model_dump() for e in edges]
        return await call(ctx, AgentSession.read_edges, items, at)

    @mcp.tool()
    async def read_slot(
        ctx: Context[Any, Any, Any],
        edge_type: EdgeType,
        node: Node,
        direction: Annotated[
            Literal["out", "in"],
            Field(description="out: what node points to; in: what points to node."),
        ] = "out",
        at: At = None,
    ) -> dict[str, Any]:
        """What an exclusive slot holds (e.g. the one environment a service deploys to):
        present with the nodes it holds, absent (empty) or unknown (quarantined)."""
        return await call(ctx, AgentSession.read_slot, edge_type, node, direction, at)

    @mcp.tool()
    async def neighbors(
        ctx: Context[Any, Any, Any],
        node: Node,
        edge_type: Annotated[str | None, Field(description="Only this edge type.")] = None,
        direction: Annotated[Literal["out", "in"], Field(description="out or in.")] = "out",
        min_confidence: Annotated[
            float | None, Field(ge=0, le=1, description="Only edges with a claim this sure.")
        ] = None,
        writer: Annotated[
            str | None, Field(description="Only edges claimed by this agent.")
        ] = None,
        asserted_after: Annotated[
            int | None, Field(description="Only claims asserted after (epoch ms).")
        ] = None,
        asserted_before: Annotated[
            int | None, Field(description="Only claims asserted before (epoch ms).")
        ] = None,
        at: At = None,
    ) -> dict[str, Any]:
        """A node's edges at your pinned version (present and unknown ones), optionally
        filtered by who claimed them, how confidently and when."""
        return await call(
            ctx, AgentSession.neighbors, node, edge_type, direction, min_confidence, writer,
            asserted_after, asserted_before, at,
        )  # fmt: skip

    @mcp.tool()
    async def find_paths(
        ctx: Context[Any, Any, Any],
        src: Node,
        dst: Node,
        max_hops: Hops = 3,
        edge_types: EdgeTypes = None,
        direction: Annotated[
            Literal["out", "in", "both"], Field(description="Walk edges forward, back or both.")
        ] = "out",
        at: At = None,
    ) -> dict[str, Any]:
        """Paths from src to dst of at most max_hops edges, shortest first. A path through a
        quarantined edge is 'unknown' and names its conflicts; 'unknown' lists every
        quarantined edge met."""
        return await call(
            ctx, AgentSession.find_paths, src, dst, max_hops, edge_types, direction, at
        )

    @mcp.tool()
    async def reach(
        ctx: Context[Any, Any, Any],
        node: Node,
        direction: Annotated[
            Literal["out", "in", "both"], Field(description="Walk edges forward, back or both.")
        ] = "out",
        max_hops: Hops = 2,
        edge_types: EdgeTypes = None,
        at: At = None,
    ) -> dict[str, Any]:
        """Every node within max_hops of node, nearest first (e.g. what a service depends on,
        transitively). certain: false means reached only through quarantined edges."""
        return await call(ctx, AgentSession.reach, node, direction, max_hops, edge_types, at)

    @mcp.tool()
    async def conflicts_near(
        ctx: Context[Any, Any, Any],
        node: Node,
        include_escalated: Annotated[
            bool, Field(description="Also list conflicts already escalated to a person.")
        ] = True,
    ) -> dict[str, Any]:
        """Open conflicts (quarantined or escalated) whose claims touch node, with every
        claim side by side: owner, confidence, evidence, reasoning."""
        return await call(ctx, AgentSession.conflicts_near, node, include_escalated)

    # -- writes ------------------------------------------------------------------------------

    claim_doc = COMMANDS["claim"].summary

    assert_doc = (
        f"{claim_doc} This asserts edge_type(subject -> object) holds, based on your run's "
        "pinned version. The answer is the governor's decision: accepted, quarantined "
        "(another writer disagrees), or rejected with a reason."
    )

    @mcp.tool(description=assert_doc)
    async def assert_edge(
        ctx: Context[Any, Any, Any],
        edge_type: EdgeType,
        subject: Node,
        object: Node,
        confidence: Confidence = 1.0,
        evidence: Evidence = None,
        reasoning: Reasoning = "",
    ) -> dict[str, Any]:
        return await call(
            ctx, AgentSession.claim, "assert", edge_type, subject, object, confidence,
            evidence or [], reasoning,
        )  # fmt: skip

    deny_doc = (
        f"{claim_doc} This denies that edge_type(subject -> object) holds (e.g. you checked "
        "and the dependency is gone). Returns the governor's decision."
    )

    @mcp.tool(description=deny_doc)
    async def deny_edge(
        ctx: Context[Any, Any, Any],
        edge_type: EdgeType,
        subject: Node,
        object: Node,
        confidence: Confidence = 1.0,
        evidence: Evidence = None,
        reasoning: Reasoning = "",
    ) -> dict[str, Any]:
        return await call(
            ctx, AgentSession.claim, "deny", edge_type, subject, object, confidence,
            evidence or [], reasoning,
        )  # fmt: skip

    @mcp.tool(
        description=f"{claim_doc} This writes several claims at once (at most "
        f"{MAX_WRITE_CLAIMS}), each asserting or denying edge_type(subject -> object), in one "
        "write. Returns one decision per claim, in order."
    )
    async def write_claims(
        ctx: Context[Any, Any, Any],
        claims: Annotated[
            list[ClaimItem],
            Field(max_length=MAX_WRITE_CLAIMS, description="The claims, in order."),
        ],
    ) -> dict[str, Any]:
        items = [c.model_dump() for c in claims]
        return await call(ctx, AgentSession.write_claims, items)

    @mcp.tool(description=COMMANDS["retract"].summary + " Only your own claims.")
    async def retract_claim(
        ctx: Context[Any, Any, Any],
        claim_id: Annotated[str, Field(description="The claim_id a write returned.")],
        reason: Annotated[str, Field(description="Why you withdraw it.")] = "",
    ) -> dict[str, Any]:
        return await call(ctx, AgentSession.retract, claim_id, reason)

    escalate_doc = COMMANDS["escalate"].summary + (
        " Use it when a quarantined edge blocks your work and a person must decide; needs "
        "the resolver role."
    )

    @mcp.tool(description=escalate_doc)
    async def escalate_conflict(
        ctx: Context[Any, Any, Any],
        conflict_id: Annotated[str, Field(description="The conflict_id a read returned.")],
        reason: Annotated[str, Field(description="What is blocked and why it matters.")],
    ) -> dict[str, Any]:
        return await call(ctx, AgentSession.escalate, conflict_id, reason)

    resolve_doc = COMMANDS["resolve"].summary + (
        " Needs the resolver role; give the winning claim_id, or none to reject every claim."
    )

    @mcp.tool(description=resolve_doc)
    async def resolve_conflict(
        ctx: Context[Any, Any, Any],
        conflict_id: Annotated[str, Field(description="The conflict to decide.")],
        winner: Annotated[
            str | None, Field(description="The winning claim_id (none: reject all).")
        ],
        rationale: Annotated[str, Field(description="Why this claim wins.")] = "",
    ) -> dict[str, Any]:
        return await call(ctx, AgentSession.resolve, conflict_id, winner, rationale)

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
    return mcp
