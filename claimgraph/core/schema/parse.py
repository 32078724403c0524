"""Parsing a schema document: YAML → a validated :class:`GraphSchema` (pure).

Parsing is pure, so a document is parsed once per process: :func:`parse_schema` keeps the
last few schemas by the digest of their text (every reader and the governor share them).
"""

from __future__ import annotations

import hashlib
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


def parse_schema(document: str, source: str = "<schema>") -> GraphSchema:
    """Parse and validate a schema document; raise :class:`SchemaError` listing every problem.

    The result is shared: the same (document, source) parses once per process.
    """
    key = (hashlib.sha256(document.encode("utf-8", "surrogatepass")).digest(), source)
    hit = _PARSED.get(key)
    if hit is None:
        hit = _parse(document, source)
        if len(_PARSED) >= _PARSED_MAX:
            del _PARSED[next(iter(_PARSED))]  # the oldest first
        _PARSED[key] = hit
    return hit


_PARSED: dict[tuple[bytes, str], GraphSchema] = {}
_PARSED_MAX = 32


def _parse(document: str, source: str) -> GraphSchema:
    if len(document.encode("utf-8")) > LIMITS["document"]:
        raise SchemaError(source, [("", f"document is larger than {LIMITS['document']} bytes")])
    try:
        raw = yaml.safe_load(document)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SchemaError(source, [(where, f"not valid YAML: {problem}")]) from None
    c = Checker()
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
    pr = raw.get("principals")
    if pr is not None:
        if not isinstance(pr, dict):
            c.fail(
                "principals",
                f"expected a mapping {{admins: [...], resolvers: [...]}}, got {kind_of(pr)}",
            )
        else:
            c.keys(pr, "principals", ("admins", "resolvers", "humans"), ("admins",))
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
    )
