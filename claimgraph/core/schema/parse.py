"""Parsing a schema document: YAML → a validated :class:`GraphSchema` (pure).

Parsing is pure, so a document is parsed once per process: :func:`parse_schema` keeps the
last few schemas by the digest of their text (every reader and the governor share them).

A document is hostile until parsed: YAML is composed into nodes first (aliases stay shared
nodes, so a 400-byte alias bomb costs nothing yet), the node graph is measured — aliases,
nodes counted with every alias expanded, depth, cycles — against :data:`STRICT` (governor
rules revision 2 on, and ``claimgraph schema check``) or the catastrophe bounds of
:data:`LENIENT` (revision 1, and documents already accepted), and only then constructed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import yaml

from claimgraph.core.model import LIMITS, Cardinality, ConflictPolicy, OnStale, OnUnknown
from claimgraph.core.schema.checker import NAME, Checker, kind_of
from claimgraph.core.schema.policies import (
    parse_decision_checks,
    parse_exits,
    parse_fallback,
    parse_merge,
    parse_resolvers,
)
from claimgraph.core.schema.types import EdgeType, GraphSchema, Pattern, Writer
from claimgraph.errors import SchemaError

_EDGE_KEYS = (
    "name",
    "subject",
    "object",
    "writers",
    "cardinality",
    "conflict_policy",
    "on_stale",
    "on_unknown",
    "domain",
    "fallback",
    "merge",
    "quarantine",
    "resolvers",
    "decision",
    "description",
)


def _edge_type(c: Checker, raw: Any, path: str, nodes: set[str]) -> EdgeType | None:
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping describing an edge type, got {kind_of(raw)}")
        return None
    before = len(c.problems)
    c.keys(
        raw,
        path,
        _EDGE_KEYS,
        ("name", "subject", "object", "writers", "cardinality", "conflict_policy"),
    )
    name = c.name(raw.get("name"), f"{path}.name", "edge type") if "name" in raw else None
    ends: list[str | None] = []
    for end in ("subject", "object"):
        if end not in raw:
            ends.append(None)
            continue
        v = c.name(raw[end], f"{path}.{end}", "node type")
        if v is not None and v not in nodes:
            c.fail(
                f"{path}.{end}",
                f"node type {v!r} is not declared in node_types "
                f"(declared: {', '.join(sorted(nodes)) or 'none'})",
            )
        ends.append(v)
    writers: list[Writer] = []
    w = raw.get("writers")
    if "writers" in raw and not isinstance(w, list):
        c.fail(f"{path}.writers", f"expected a list of {{agent, task}} entries, got {kind_of(w)}")
    elif isinstance(w, list):
        if not w:
            c.fail(
                f"{path}.writers",
                "expected at least one writer (use grants for "
                "temporary scope, or agent: '*' deliberately)",
            )
        for i, entry in enumerate(w):
            wp = f"{path}.writers[{i}]"
            if not isinstance(entry, dict):
                c.fail(wp, f"expected a mapping {{agent: ..., task: ...}}, got {kind_of(entry)}")
                continue
            c.keys(entry, wp, ("agent", "task"), ("agent",))
            a = c.pattern(entry.get("agent"), f"{wp}.agent") if "agent" in entry else None
            t = c.pattern(entry.get("task", "*"), f"{wp}.task")
            if a and t:
                writers.append(Writer(a, t))
    card = (
        c.choice(raw.get("cardinality"), f"{path}.cardinality", tuple(x.value for x in Cardinality))
        if "cardinality" in raw
        else None
    )
    policy = (
        c.choice(
            raw.get("conflict_policy"),
            f"{path}.conflict_policy",
            tuple(x.value for x in ConflictPolicy),
        )
        if "conflict_policy" in raw
        else None
    )
    on_stale = c.choice(
        raw.get("on_stale", "reject"), f"{path}.on_stale", tuple(x.value for x in OnStale)
    )
    on_unknown = c.choice(
        raw.get("on_unknown", "unknown"), f"{path}.on_unknown", tuple(x.value for x in OnUnknown)
    )
    domain = raw.get("domain", "general")
    if not isinstance(domain, str) or not NAME.match(domain):
        c.fail(
            f"{path}.domain",
            f"expected a domain name such as payment, refund, "
            f"permission, recommendation, search or general, got {kind_of(domain)}",
        )
        domain = "general"
    fallback = parse_fallback(c, raw.get("fallback"), f"{path}.fallback", domain)
    margin, prior = parse_merge(c, raw.get("merge"), f"{path}.merge", policy)
    exits = parse_exits(c, raw.get("quarantine"), f"{path}.quarantine", fallback)
    decision = parse_decision_checks(c, raw.get("decision"), f"{path}.decision")
    resolvers = parse_resolvers(c, raw.get("resolvers"), f"{path}.resolvers")
    desc = raw.get("description", "")
    if not isinstance(desc, str):
        c.fail(f"{path}.description", f"expected text, got {kind_of(desc)}")
        desc = ""
    if (
        len(c.problems) != before
        or name is None
        or None in ends
        or card is None
        or policy is None
        or on_stale is None
        or on_unknown is None
    ):
        return None
    assert ends[0] is not None and ends[1] is not None
    return EdgeType(
        name=name,
        subject=ends[0],
        object=ends[1],
        writers=tuple(writers),
        cardinality=Cardinality(card),
        conflict_policy=ConflictPolicy(policy),
        on_stale=OnStale(on_stale),
        on_unknown=OnUnknown(on_unknown),
        domain=domain,
        fallback=fallback,
        merge_margin=margin,
        merge_prior=prior,
        exits=exits,
        decision=decision,
        resolvers=resolvers,
        description=desc,
    )


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """Bounds on a YAML document's node graph, checked before anything is constructed."""

    aliases: int | None  # alias uses (None: unbounded)
    nodes: int  # nodes, counting each alias as the whole subtree it names
    depth: int  # nesting of sequences and mappings


SIGNATURES = ("required", "optional")  # principals.signatures (rules revision 2 on)
STRICT = YamlLimits(aliases=64, nodes=20_000, depth=32)
LENIENT = YamlLimits(aliases=None, nodes=1_000_000, depth=256)


def parse_schema(
    document: str, source: str = "<schema>", *, rules: int | None = None
) -> GraphSchema:
    """Parse and validate a schema document; raise :class:`SchemaError` listing every problem.

    ``rules`` is the governor rules revision deciding a ``publish_schema`` (1: the rules
    before revisions, 2 on: :data:`STRICT` bounds, ``principals.signatures``); ``None`` reads
    a document that was already accepted. The result is shared: the same (document, source,
    rules) parses once per process.
    """
    digest = hashlib.sha256(document.encode("utf-8", "surrogatepass")).digest()
    key = (digest, source, rules)
    hit = _PARSED.get(key)
    if hit is None:
        hit = _parse(document, source, rules)
        if len(_PARSED) >= _PARSED_MAX:
            del _PARSED[next(iter(_PARSED))]  # the oldest first
        _PARSED[key] = hit
    return hit


_PARSED: dict[tuple[bytes, str, int | None], GraphSchema] = {}
_PARSED_MAX = 32


def _load(document: str, source: str, limits: YamlLimits) -> Any:
    """Compose, measure, then construct: a document over ``limits`` never gets built."""
    _scan_depth(document, source, limits)
    try:
        loader = yaml.SafeLoader(document)
    except yaml.YAMLError as exc:  # the reader refuses control characters up front
        raise SchemaError(source, [("", f"not valid YAML: {exc}")]) from None
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise SchemaError(source, [("", "not valid YAML: nested too deeply")]) from None
        if node is None:
            return None
        problem = _measure(node, limits)
        if problem is not None:
            raise SchemaError(source, [("", problem)])
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SchemaError(source, [(where, f"not valid YAML: {problem}")]) from None
    finally:
        loader.dispose()


def _scan_depth(document: str, source: str, limits: YamlLimits) -> None:
    """Refuse a document nested too deeply before composing it (composing recurses).

    Flow brackets are counted in the text first, in one pass: PyYAML's scanner takes time
    quadratic in flow nesting before it yields the first events.
    """
    depth = deepest = 0
    for ch in document:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}" and depth:
            depth -= 1
    if deepest > limits.depth:
        raise SchemaError(source, [("", f"the document nests deeper than {limits.depth} levels")])
    depth = 0
    try:
        for event in yaml.parse(document, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > limits.depth:
                    raise SchemaError(
                        source, [("", f"the document nests deeper than {limits.depth} levels")]
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return  # composing reports it, with its line and column


def _measure(root: yaml.Node, limits: YamlLimits) -> str | None:
    """What makes the node graph exceed ``limits`` (None: it fits), without expanding it."""
    size: dict[int, int] = {}  # id(node) → nodes under it, aliases expanded
    deep: dict[int, int] = {}  # id(node) → its depth
    on_path: set[int] = set()
    aliases = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [x for pair in node.value for x in pair]
        if done:
            on_path.discard(nid)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            deep[nid] = 1 + max((deep[id(k)] for k in kids), default=0)
            if size[nid] > limits.nodes:
                return f"the document expands to more than {limits.nodes} YAML nodes"
            if deep[nid] > limits.depth:
                return f"the document nests deeper than {limits.depth} levels"
            continue
        if nid in size:  # seen before: an alias of a finished node
            aliases += 1
            if limits.aliases is not None and aliases > limits.aliases:
                return f"the document uses more than {limits.aliases} YAML aliases"
            continue
        if nid in on_path:
            return "the document refers to itself (a recursive YAML alias)"
        on_path.add(nid)
        stack.append((node, True))
        for k in reversed(kids):
            if id(k) in on_path:
                return "the document refers to itself (a recursive YAML alias)"
            stack.append((k, False))
    return None


def _parse(document: str, source: str, rules: int | None) -> GraphSchema:
    if len(document.encode("utf-8", "surrogatepass")) > LIMITS["document"]:
        raise SchemaError(source, [("", f"document is larger than {LIMITS['document']} bytes")])
    strict = rules is not None and rules >= 2  # bounds of revision 2 (None: already accepted)
    raw = _load(document, source, STRICT if strict else LENIENT)
    c = Checker(strict=strict)
    newer = rules is None or rules >= 2  # what revision 2 added to the document
    if not isinstance(raw, dict):
        raise SchemaError(
            source, [("", f"expected a mapping with node_types and edge_types, got {kind_of(raw)}")]
        )
    c.keys(
        raw,
        "",
        ("graph", "description", "principals", "node_types", "edge_types"),
        ("node_types", "edge_types"),
    )
    nodes: set[str] = set()
    nt = raw.get("node_types")
    if "node_types" in raw and not isinstance(nt, list):
        c.fail("node_types", f"expected a list of node type names, got {kind_of(nt)}")
    elif isinstance(nt, list):
        for i, n in enumerate(nt):
            v = c.name(n, f"node_types[{i}]", "node type")
            if v is not None:
                if v in nodes:
                    c.fail(f"node_types[{i}]", f"node type {v!r} is declared twice")
                nodes.add(v)
    admins: tuple[Pattern, ...] = ()
    resolvers: tuple[Pattern, ...] = ()
    humans: tuple[Pattern, ...] = ()
    signatures = False
    pr = raw.get("principals")
    if pr is not None:
        if not isinstance(pr, dict):
            c.fail(
                "principals",
                f"expected a mapping {{admins: [...], resolvers: [...]}}, got {kind_of(pr)}",
            )
        else:
            known = ("admins", "resolvers", "humans", *(("signatures",) if newer else ()))
            c.keys(pr, "principals", known, ("admins",))
            if newer and "signatures" in pr:
                sig = c.choice(pr["signatures"], "principals.signatures", SIGNATURES)
                signatures = sig == "required"
            admins = c.patterns(pr.get("admins"), "principals.admins")
            resolvers = c.patterns(pr.get("resolvers"), "principals.resolvers")
            humans = c.patterns(pr.get("humans"), "principals.humans")
    else:
        c.fail(
            "principals",
            "missing: name at least one admin "
            "(principals: {admins: [admin]}) so the schema can be changed later",
        )
    edges: dict[str, EdgeType] = {}
    et = raw.get("edge_types")
    if "edge_types" in raw and not isinstance(et, list):
        c.fail("edge_types", f"expected a list of edge types, got {kind_of(et)}")
    elif isinstance(et, list):
        for i, e in enumerate(et):
            parsed = _edge_type(c, e, f"edge_types[{i}]", nodes)
            if parsed is not None:
                if parsed.name in edges:
                    c.fail(f"edge_types[{i}].name", f"edge type {parsed.name!r} is declared twice")
                edges[parsed.name] = parsed
    if c.problems:
        raise SchemaError(source, c.problems)
    digest = hashlib.sha256(document.encode("utf-8")).hexdigest()[:16]
    return GraphSchema(
        node_types=frozenset(nodes),
        edge_types=edges,
        admins=admins,
        resolvers=resolvers,
        digest=digest,
        source=source,
        document=document,
        humans=humans,
        signatures_required=signatures,
    )
