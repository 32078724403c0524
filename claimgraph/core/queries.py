"""The one query catalogue: every read, its parameters and their bounds, its result (pure).

The reads' counterpart of :mod:`claimgraph.core.commands`. A read is declared here once: its
parameters (name, :class:`~claimgraph.core.commands.Domain`, default, the name HTTP gives it),
its result type, whether a run traces it (and replay re-executes it), and what it says when its
answer is cut (:class:`Cut`: a GC horizon, a result cap, a page). Every graph answers each of
them through the port's one read operation, ``read(name, **params)``
(:class:`claimgraph.service.port.GraphPort`), and the surfaces are tested complete against this
table (``tests/test_query_catalogue.py``): the typed SDK methods of every graph (embedded,
Kafka, attached, HTTP, async), a run's methods, the HTTP routes and their OpenAPI (bounds and
operation ids), the MCP tools and the CLI read commands.

The domains use the command catalogue's kinds; a node is text ``type:id`` (``node=True``: in
Python a ``(type, id)`` tuple is taken too). ``at`` and ``timeout`` are the versioned reads'
common parameters (:data:`AT`, :data:`TIMEOUT`), declared once below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from claimgraph.core.commands import I64, LIMITS, Domain, Kind, cut, field_violation

__all__ = [
    "AT",
    "PAGE_PARAMS",
    "QUERIES",
    "QUERY_LIMITS",
    "REQUIRED",
    "TIMEOUT",
    "Cut",
    "Param",
    "QuerySpec",
    "params_violation",
    "query",
]

# Bounds of the queries beyond one hop (paths, reach) and of pages; see service.queries.
QUERY_LIMITS = {"max_hops": 6, "limit": 1000, "expansions": 20_000, "seconds": 10.0}
MAX_WAIT = 30.0  # the longest a read may wait for its version (seconds), on every surface


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: object = _Required()  # the default of a parameter that has none


class Cut(StrEnum):
    """How a read says its answer is not whole (each is a field of the result)."""

    NONE = "none"  # never cut: the answer is whole
    HORIZON = "horizon"  # ``cut_below``: GC removed what was below the horizon
    LIMIT = "limit"  # ``truncated: true`` and ``truncated_by``: a cap stopped the walk
    PAGE = "page"  # ``truncated`` and ``next_cursor``: more follows; the SDK follows it
    ABSENT = "absent"  # None (HTTP 404) when the thing is not there at the version


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a read."""

    name: str  # the Python keyword (and MCP argument)
    domain: Domain
    default: object = REQUIRED
    doc: str = ""
    node: bool = False  # a node: 'type:id' (a (type, id) tuple in Python too)
    http: str = ""  # its query-string name when not ``name`` (``from``, ``edge_type``)
    positional: bool = False  # leads the Python signature, before ``*``
    py: str = ""  # its Python keyword when not ``name`` (``obj``: ``object`` is a builtin)
    checked: bool = True  # its domain is checked here (False: the read checks its shape)
    annotation: str = ""  # its Python type when the domain's is not it (generated signatures)
    # The CLI (claimgraph.cli.catalogue): a required parameter is an argument, the others
    # options named ``--<http or name>`` unless ``cli`` names the flag; ``switch``: an enum of
    # two values as one flag (``cli``) picking the other one; ``time``: an int of ms since the
    # epoch that the CLI (like JSON Lines) also takes as ISO 8601 text. ``cli`` may name a
    # short form after the long one (``--evidence -e``); a write's required parameter with a
    # ``cli`` flag is a required option, and ``cli_none`` names the flag that sends its None
    # (``--reject-all`` for resolve's winner).
    cli: str = ""
    switch: bool = False
    time: bool = False
    cli_none: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def keyword(self) -> str:
        """The name Python gives it."""
        return self.py or self.name

    @property
    def wire(self) -> str:
        """The name HTTP gives it."""
        return self.http or self.name


def _p(name: str, domain: Domain, default: object = REQUIRED, doc: str = "", **kw: object) -> Param:
    return Param(name, domain, default, doc, **kw)  # type: ignore[arg-type]


_ID = Domain(Kind.ID, LIMITS["id"], limit="id")
_OPT_ID = Domain(Kind.ID, LIMITS["id"], nullable=True, limit="id")
_NODE = Domain(Kind.ID, LIMITS["id"], limit="id", note="'type:id'")
_BOOL = Domain(Kind.BOOL)
_TIME = Domain(Kind.INT, lo=0, hi=I64, nullable=True, note="ms since the epoch")
AT = _p(
    "at",
    Domain(Kind.INT, lo=-1, hi=I64, nullable=True, note="(a version; default: head)"),
    None,
    "Read at this version (default: head).",
)
TIMEOUT = _p(
    "timeout",
    Domain(Kind.FLOAT, lo=0.0, hi=MAX_WAIT, note="seconds"),
    0.0,
    "Seconds to wait for `at` to be applied.",
)


# What a paged route (``paged``) takes besides the read's own parameters: one page of at most
# ``limit`` entries (its own bound, per route) after ``cursor``, matching ``q``. The answer
# says ``truncated`` and gives ``next_cursor`` whenever more may follow.
PAGE_PARAMS = ("limit", "cursor", "q")


def _dir(*values: str) -> Domain:
    return Domain(Kind.ENUM, values=values)


def _edge(positional: bool = True) -> tuple[Param, ...]:
    return (
        _p("edge_type", _ID, doc="The edge type.", positional=positional),
        _p("subject", _NODE, doc="The subject node, 'type:id'.", node=True, positional=True),
        _p(
            "object",
            _NODE,
            doc="The object node, 'type:id'.",
            node=True,
            positional=True,
            py="obj",
        ),
    )


_HOPS = Domain(Kind.INT, lo=1, hi=QUERY_LIMITS["max_hops"], note="(edges)")
_LIMIT = Domain(Kind.INT, lo=1, hi=QUERY_LIMITS["limit"], note="(results)")
_TYPES = Domain(Kind.LIST, 64, item=_ID, nullable=True)
# a walk's own parameters (paths, reach): which edges it follows, and which way
_FOLLOW = _p(
    "edge_types",
    _TYPES,
    None,
    "Follow only this edge type (repeatable).",
    http="edge_type",
    cli="--type",
)
_WALK = _p("direction", _dir("out", "in", "both"), "out", "Walk forward, back or both.")


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """One read."""

    name: str  # the port's read name: the SDK method, and a run's trace op when traced
    summary: str  # one line, for help texts and tool descriptions
    params: tuple[Param, ...]  # before at/timeout
    result: str  # the Python result type, as the SDK names it
    route: str  # its HTTP route (GET unless ``post``), path parameters in braces
    traced: bool = False  # a run traces it and replay re-executes it
    # The arguments every trace of it records (the trace format, frozen once on main): the
    # parameters added since are recorded only when given, and default when absent on replay.
    recorded: tuple[str, ...] = ()
    versioned: bool = True  # takes ``at``
    waits: bool = False  # takes ``timeout`` (waits for ``at``)
    cut: Cut = Cut.NONE
    post: bool = False  # the route takes a JSON body (its params) instead of a query
    paged: bool = False  # the route also serves pages (PAGE_PARAMS); the SDK follows them
    mcp: str = ""  # the MCP tool that serves it ("" none: MCP's agents do not need it)
    cli: str = ""  # the CLI command that prints it ("" none)
    answer: str = ""  # the field of the HTTP answer that holds the result ("": the whole body)
    in_run: bool = False  # it can meet a quarantine: over HTTP it names the run it is read in

    @property
    def all_params(self) -> tuple[Param, ...]:
        """Its parameters with the version ones it takes (``at``, ``timeout``)."""
        return self.params + ((AT,) if self.versioned else ()) + ((TIMEOUT,) if self.waits else ())

    def param(self, name: str) -> Param:
        for p in self.all_params:
            if p.name == name:
                return p
        raise KeyError(name)


_SPECS = (
    QuerySpec(
        "edge",
        "One edge at a version: present, absent or unknown (with the conflict id).",
        _edge(),
        "EdgeView",
        "/v1/edge",
        in_run=True,
        traced=True,
        recorded=("edge_type", "subject", "object"),
        waits=True,
        mcp="read_edge",
        cli="get",
    ),
    QuerySpec(
        "read_edges",
        "Several edges at one version, in order: one answer each, as edge gives it.",
        (
            _p(
                "edges",
                Domain(Kind.LIST, 10_000, item=_ID, note="(edge_type, subject, object)"),
                doc="(edge_type, subject, object) triples; at most the server's max_batch.",
                positional=True,
                checked=False,
                annotation="Sequence[EdgeRef]",
            ),
        ),
        "list[EdgeView]",
        "/v1/read/edges",
        answer="edges",
        in_run=True,
        waits=True,
        post=True,
        mcp="read_edges",
    ),
    QuerySpec(
        "slot",
        "What an exclusive slot holds at a version.",
        (
            _p("edge_type", _ID, doc="The edge type.", positional=True),
            _p("node", _NODE, doc="The slot's node, 'type:id'.", node=True, positional=True),
            _p("direction", _dir("out", "in"), "out", "out: the subject's slot; in: the object's."),
        ),
        "SlotView",
        "/v1/slot",
        in_run=True,
        traced=True,
        recorded=("edge_type", "node", "direction"),
        waits=True,
        mcp="read_slot",
        cli="slot",
    ),
    QuerySpec(
        "neighbors",
        "A node's neighbours at a version, optionally filtered by their claims.",
        (
            _p("node", _NODE, doc="The node, 'type:id'.", node=True, positional=True),
            _p("edge_type", _OPT_ID, None, "Only this edge type.", cli="--type"),
            _p(
                "direction",
                _dir("out", "in"),
                "out",
                "out: the node's outgoing edges; in: its incoming ones.",
                cli="--in",
                switch=True,
            ),
            _p("include_absent", _BOOL, False, "Also the edges read absent (denied, retired)."),
            _p(
                "min_confidence",
                Domain(Kind.FLOAT, lo=0.0, hi=1.0, nullable=True),
                None,
                "Only edges with a claim this sure.",
            ),
            _p("writer", _OPT_ID, None, "Only edges claimed by this agent."),
            _p(
                "asserted_after",
                _TIME,
                None,
                "Only claims asserted after (epoch ms).",
                cli="--after",
                time=True,
            ),
            _p(
                "asserted_before",
                _TIME,
                None,
                "Only claims asserted before (epoch ms).",
                cli="--before",
                time=True,
            ),
        ),
        "list[NeighborView]",
        "/v1/neighbors",
        answer="neighbors",
        in_run=True,
        traced=True,
        recorded=("node", "edge_type", "direction", "include_absent"),
        waits=True,
        mcp="neighbors",
        cli="neighbors",
    ),
    QuerySpec(
        "paths",
        "Simple paths src -> dst at a version, shortest first (unknown edges named).",
        (
            _p("src", _NODE, doc="Where paths start, 'type:id'.", node=True, positional=True),
            _p("dst", _NODE, doc="Where paths end, 'type:id'.", node=True, positional=True),
            _p("max_hops", _HOPS, 3, "At most this many edges per path."),
            _FOLLOW,
            _WALK,
            _p("limit", _LIMIT, 100, "At most this many paths."),
        ),
        "PathsResult",
        "/v1/paths",
        in_run=True,
        traced=True,
        recorded=("src", "dst", "max_hops", "edge_types", "direction", "limit"),
        waits=True,
        cut=Cut.LIMIT,
        mcp="find_paths",
        cli="paths",
    ),
    QuerySpec(
        "reach",
        "Every node within max_hops of a node at a version, nearest first.",
        (
            _p("node", _NODE, doc="Where the walk starts, 'type:id'.", node=True, positional=True),
            _WALK,
            _p("max_hops", _HOPS, 2, "At most this many edges away."),
            _FOLLOW,
            _p("limit", _LIMIT, 100, "At most this many nodes."),
        ),
        "ReachResult",
        "/v1/reach",
        in_run=True,
        traced=True,
        recorded=("node", "direction", "max_hops", "edge_types", "limit"),
        waits=True,
        cut=Cut.LIMIT,
        mcp="reach",
        cli="reach",
    ),
    QuerySpec(
        "edges",
        "The graph's edges at a version (present and unknown), at most limit.",
        (_p("limit", Domain(Kind.INT, lo=1, hi=I64), 500, "At most this many edges."),),
        "list[EdgeView]",
        "/v1/graph",
        answer="edges",
        cut=Cut.PAGE,
        paged=True,
    ),
    QuerySpec(
        "history",
        "Every decision that touched an edge, up to a version (cut_below after GC).",
        _edge(),
        "HistoryView",
        "/v1/history",
        traced=True,
        recorded=("edge_type", "subject", "object"),
        waits=True,
        cut=Cut.HORIZON,
        cli="history",
    ),
    QuerySpec(
        "quarantine",
        "Conflicts withheld from the readable graph at a version.",
        (
            _p(
                "include_closed",
                _BOOL,
                False,
                "Closed conflicts too.",
                cli="--all",
            ),
        ),
        "list[dict[str, Any]]",
        "/v1/quarantine",
        answer="conflicts",
        traced=True,
        recorded=("include_closed",),
        paged=True,
        waits=True,
        cli="quarantine",
    ),
    QuerySpec(
        "claim_info",
        "A claim's record and status at a version.",
        (_p("claim_id", _ID, doc="The claim id.", positional=True),),
        "dict[str, Any] | None",
        "/v1/claims/{claim_id}",
        traced=True,
        recorded=("claim_id",),
        cut=Cut.ABSENT,
        cli="claim",
    ),
    QuerySpec(
        "conflict",
        "A conflict at a version, with its claims.",
        (_p("conflict_id", _ID, doc="The conflict id.", positional=True),),
        "dict[str, Any] | None",
        "/v1/conflicts/{conflict_id}",
        traced=True,
        recorded=("conflict_id",),
        cut=Cut.ABSENT,
    ),
    QuerySpec(
        "schema_info",
        "The graph schema in force at a version.",
        (),
        "dict[str, Any] | None",
        "/v1/schema",
        cut=Cut.ABSENT,
    ),
    QuerySpec(
        "escalation",
        "One conflict's self-contained escalation payload at a version.",
        (_p("conflict_id", _ID, doc="The conflict id.", positional=True),),
        "dict[str, Any] | None",
        "/v1/escalations/{conflict_id}",
        cut=Cut.ABSENT,
    ),
    QuerySpec(
        "escalations",
        "Escalated conflicts' evidence payloads (every open one with include_open).",
        (
            _p(
                "include_open",
                _BOOL,
                False,
                "Every open conflict too.",
            ),
        ),
        "list[dict[str, Any]]",
        "/v1/escalations",
        answer="escalations",
    ),
    QuerySpec(
        "calibration",
        "Each writer's resolved-conflict record for an edge type (wins, losses).",
        (_p("edge_type", _ID, doc="The edge type.", positional=True),),
        "dict[str, tuple[int, int]]",
        "/v1/calibration",
        answer="record",
    ),
    QuerySpec(
        "decisions",
        "The decisions log from a version on: (version, decision).",
        (
            _p(
                "start",
                Domain(Kind.INT, lo=0, hi=I64),
                0,
                "The first version.",
                http="from",
                positional=True,
            ),
            _p(
                "limit", Domain(Kind.INT, lo=1, hi=1000), 100, "At most this many.", positional=True
            ),
        ),
        "list[tuple[int, Decision]]",
        "/v1/decisions",
        answer="decisions",
        versioned=False,
        cli="log",
    ),
)

QUERIES: Mapping[str, QuerySpec] = {s.name: s for s in _SPECS}


def query(name: str) -> QuerySpec | None:
    """The read ``name`` names (None: not one of them)."""
    return QUERIES.get(name)


def params_violation(spec: QuerySpec, params: Mapping[str, object]) -> str | None:
    """What is wrong with ``params`` (Python keywords) for ``spec``, or None. Pure and total.

    A missing required parameter, an unknown one, or a value outside its domain (a node as
    ``type:id`` text or a ``(type, id)`` pair of ids).
    """
    known = {p.keyword: p for p in spec.all_params}
    for k in params:
        if k not in known:
            return f"{spec.name} takes no parameter {cut(k, 40)}; it takes " + ", ".join(known)
    for p in spec.all_params:
        if p.keyword not in params:
            if p.required:
                return f"{spec.name} needs {p.keyword}: {p.domain.describe()}"
            continue
        value = params[p.keyword]
        if not p.checked or (value is None and p.default is None):
            continue
        if p.node and isinstance(value, tuple):
            if len(value) != 2:
                return f"{p.keyword} must be 'type:id' or a (type, id) pair, got {cut(value)}"
            v = field_violation(f"{p.keyword}[0]", _ID, value[0]) or field_violation(
                f"{p.keyword}[1]", _ID, value[1]
            )
        else:
            if (
                p.domain.kind is Kind.FLOAT
                and isinstance(value, int)
                and not isinstance(value, bool)
            ):
                value = float(value)
            v = field_violation(p.keyword, p.domain, value)
        if v is not None:
            return f"{spec.name}: {v.detail}"
    return None


def _check() -> None:
    """A traced read declares what its traces record, and only its own parameters."""
    for spec in QUERIES.values():
        names = {p.name for p in spec.params}
        if spec.traced != bool(spec.recorded) or not set(spec.recorded) <= names:
            raise AssertionError(f"read {spec.name}: recorded {spec.recorded} (traced, params)")


_check()
