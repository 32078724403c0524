"""The graph schema (policy): node types, edge types, writers and conflict policy (pure).

A schema is a YAML document published through the log by an admin, so every decision names
the revision that made it. :func:`parse_schema` validates a document completely and reports
every problem with its path inside the document and what was expected::

    principals: {admins: [admin], resolvers: [reviewer, "human:*"]}
    node_types: [service, database, environment]
    edge_types:
      - name: deployment_target
        subject: service
        object: environment
        writers: [{agent: release-agent, task: promote-release}]
        cardinality: one-to-one
        conflict_policy: last-write-wins-with-timestamp
        on_stale: reject          # reject | quarantine | accept   (default reject)
        on_unknown: unknown       # unknown | halt                 (default unknown)
        domain: general           # payment, refund, permission → fail closed; ...
        fallback: {mode: escalate}

Writer, admin and resolver entries are shell-style patterns (``*``, ``?``, ``[ab]``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any

import yaml

from .errors import SchemaError
from .model import LIMITS, Cardinality, ConflictPolicy, OnStale, OnUnknown

__all__ = [
    "DOMAIN_FALLBACKS",
    "EdgeType",
    "Fallback",
    "GraphSchema",
    "Pattern",
    "Writer",
    "load_schema_file",
    "parse_schema",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,127}$")
FALLBACK_MODES = ("fail_closed", "default", "escalate")
# The second article's rule of thumb: money and permissions fail closed, suggestions fall back
# to a default, anything else goes to a human.
DOMAIN_FALLBACKS = {
    "payment": "fail_closed",
    "refund": "fail_closed",
    "permission": "fail_closed",
    "recommendation": "default",
    "search": "default",
}


@dataclass(frozen=True, slots=True)
class Pattern:
    """A shell-style pattern over agent or task names."""

    text: str
    regex: re.Pattern[str] = field(compare=False, repr=False)

    @classmethod
    def of(cls, text: str) -> Pattern:
        return cls(text, re.compile(translate(text)))

    def matches(self, value: str) -> bool:
        return self.regex.match(value) is not None


@dataclass(frozen=True, slots=True)
class Writer:
    """An (agent, task) pair allowed to claim an edge type."""

    agent: Pattern
    task: Pattern

    def matches(self, agent: str, task: str) -> bool:
        return self.agent.matches(agent) and self.task.matches(task)


@dataclass(frozen=True, slots=True)
class Fallback:
    """What readers of an unknown slot are served, by domain."""

    mode: str  # fail_closed | default | escalate
    value: str | None = None


@dataclass(frozen=True, slots=True)
class EdgeType:
    """One edge type and its policy."""

    name: str
    subject: str
    object: str
    writers: tuple[Writer, ...]
    cardinality: Cardinality
    conflict_policy: ConflictPolicy
    on_stale: OnStale = OnStale.REJECT
    on_unknown: OnUnknown = OnUnknown.UNKNOWN
    domain: str = "general"
    fallback: Fallback = Fallback("escalate")
    merge_margin: float = 0.1
    description: str = ""

    @property
    def subject_exclusive(self) -> bool:
        """A subject holds at most one object (many-to-one, one-to-one)."""
        return self.cardinality in (Cardinality.MANY_TO_ONE, Cardinality.ONE_TO_ONE)

    @property
    def object_exclusive(self) -> bool:
        """An object is held by at most one subject (one-to-many, one-to-one)."""
        return self.cardinality in (Cardinality.ONE_TO_MANY, Cardinality.ONE_TO_ONE)


@dataclass(frozen=True, slots=True)
class GraphSchema:
    """A validated graph schema document."""

    node_types: frozenset[str]
    edge_types: dict[str, EdgeType]
    admins: tuple[Pattern, ...]
    resolvers: tuple[Pattern, ...]
    digest: str
    source: str
    document: str
    _auth_cache: dict[tuple[str, str, str], bool] = field(
        default_factory=dict, compare=False, repr=False
    )

    def is_admin(self, agent: str) -> bool:
        return any(p.matches(agent) for p in self.admins)

    def is_resolver(self, agent: str) -> bool:
        return self.is_admin(agent) or any(p.matches(agent) for p in self.resolvers)

    def may_write(self, edge_type: EdgeType, agent: str, task: str) -> bool:
        """Whether the schema's writers admit (agent, task) for ``edge_type``."""
        key = (edge_type.name, agent, task)
        hit = self._auth_cache.get(key)
        if hit is None:
            hit = any(w.matches(agent, task) for w in edge_type.writers)
            if len(self._auth_cache) < 65536:
                self._auth_cache[key] = hit
        return hit


class _Checker:
    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def keys(
        self, node: dict[str, Any], path: str, allowed: tuple[str, ...], required: tuple[str, ...]
    ) -> None:
        for k in node:
            if k not in allowed:
                self.fail(
                    f"{path}.{k}" if path else str(k),
                    f"unknown key {k!r}; expected one of: {', '.join(allowed)}",
                )
        for k in required:
            if k not in node:
                self.fail(path or "(top level)", f"missing required key {k!r}")

    def name(self, value: Any, path: str, what: str) -> str | None:
        if not isinstance(value, str):
            self.fail(path, f"expected a {what} name (string), got {_kind(value)}")
            return None
        if not _NAME.match(value):
            self.fail(
                path,
                f"{value!r} is not a valid {what} name: expected a letter, then "
                "letters, digits, '_', '.', ':' or '-' (at most 128 characters)",
            )
            return None
        return value

    def pattern(self, value: Any, path: str) -> Pattern | None:
        if not isinstance(value, str) or not value or len(value) > LIMITS["id"]:
            self.fail(path, f"expected a non-empty pattern string, got {_kind(value)}")
            return None
        return Pattern.of(value)

    def choice(self, value: Any, path: str, options: tuple[str, ...]) -> str | None:
        if value not in options:
            self.fail(path, f"{value!r} is not allowed; expected one of: {', '.join(options)}")
            return None
        return str(value)

    def patterns(self, value: Any, path: str) -> tuple[Pattern, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(path, f"expected a list of patterns, got {_kind(value)}")
            return ()
        out = [self.pattern(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(p for p in out if p is not None)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {
        dict: "a mapping",
        list: "a list",
        str: f"the string {value!r}"[:80],
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


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
    "description",
)


def _edge_type(c: _Checker, raw: Any, path: str, nodes: set[str]) -> EdgeType | None:
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping describing an edge type, got {_kind(raw)}")
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
        c.fail(f"{path}.writers", f"expected a list of {{agent, task}} entries, got {_kind(w)}")
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
                c.fail(wp, f"expected a mapping {{agent: ..., task: ...}}, got {_kind(entry)}")
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
    if not isinstance(domain, str) or not _NAME.match(domain):
        c.fail(
            f"{path}.domain",
            f"expected a domain name such as payment, refund, "
            f"permission, recommendation, search or general, got {_kind(domain)}",
        )
        domain = "general"
    fallback = _fallback(c, raw.get("fallback"), f"{path}.fallback", domain)
    margin = 0.1
    merge = raw.get("merge")
    if merge is not None:
        if not isinstance(merge, dict):
            c.fail(f"{path}.merge", f"expected a mapping {{margin: 0..1}}, got {_kind(merge)}")
        else:
            c.keys(merge, f"{path}.merge", ("margin", "prior"), ())
            m = merge.get("margin", margin)
            if not isinstance(m, int | float) or isinstance(m, bool) or not 0 <= m <= 1:
                c.fail(f"{path}.merge.margin", f"expected a number in [0, 1], got {_kind(m)}")
            else:
                margin = float(m)
            if policy != ConflictPolicy.CONFIDENCE_WEIGHTED_MERGE.value:
                c.fail(
                    f"{path}.merge",
                    "only meaningful with conflict_policy: confidence-weighted-merge",
                )
    q = raw.get("quarantine")
    if q is not None and not isinstance(q, dict):
        c.fail(f"{path}.quarantine", f"expected a mapping of exit conditions, got {_kind(q)}")
    desc = raw.get("description", "")
    if not isinstance(desc, str):
        c.fail(f"{path}.description", f"expected text, got {_kind(desc)}")
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
        description=desc,
    )


def _fallback(c: _Checker, raw: Any, path: str, domain: str) -> Fallback:
    default_mode = DOMAIN_FALLBACKS.get(domain, "escalate")
    if raw is None:
        if default_mode != "escalate":
            c.fail(
                path,
                f"domain {domain!r} needs a fallback value ({default_mode}): "
                "e.g. fallback: {value: REJECT}",
            )
        return Fallback(default_mode)
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping {{mode: ..., value: ...}}, got {_kind(raw)}")
        return Fallback(default_mode)
    c.keys(raw, path, ("mode", "value"), ())
    mode = c.choice(raw.get("mode", default_mode), f"{path}.mode", FALLBACK_MODES) or default_mode
    value = raw.get("value")
    if value is not None and not isinstance(value, str):
        c.fail(f"{path}.value", f"expected a string value, got {_kind(value)}")
        value = None
    if mode in ("fail_closed", "default") and value is None:
        c.fail(f"{path}.value", f"mode {mode} needs the value served to readers")
    return Fallback(mode, value)


def parse_schema(document: str, source: str = "<schema>") -> GraphSchema:
    """Parse and validate a schema document; raise :class:`SchemaError` listing every problem."""
    if len(document.encode("utf-8")) > LIMITS["document"]:
        raise SchemaError(source, [("", f"document is larger than {LIMITS['document']} bytes")])
    try:
        raw = yaml.safe_load(document)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SchemaError(source, [(where, f"not valid YAML: {problem}")]) from None
    c = _Checker()
    if not isinstance(raw, dict):
        raise SchemaError(
            source, [("", f"expected a mapping with node_types and edge_types, got {_kind(raw)}")]
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
        c.fail("node_types", f"expected a list of node type names, got {_kind(nt)}")
    elif isinstance(nt, list):
        for i, n in enumerate(nt):
            v = c.name(n, f"node_types[{i}]", "node type")
            if v is not None:
                if v in nodes:
                    c.fail(f"node_types[{i}]", f"node type {v!r} is declared twice")
                nodes.add(v)
    admins: tuple[Pattern, ...] = ()
    resolvers: tuple[Pattern, ...] = ()
    pr = raw.get("principals")
    if pr is not None:
        if not isinstance(pr, dict):
            c.fail(
                "principals",
                f"expected a mapping {{admins: [...], resolvers: [...]}}, got {_kind(pr)}",
            )
        else:
            c.keys(pr, "principals", ("admins", "resolvers"), ("admins",))
            admins = c.patterns(pr.get("admins"), "principals.admins")
            resolvers = c.patterns(pr.get("resolvers"), "principals.resolvers")
    else:
        c.fail(
            "principals",
            "missing: name at least one admin "
            "(principals: {admins: [admin]}) so the schema can be changed later",
        )
    edges: dict[str, EdgeType] = {}
    et = raw.get("edge_types")
    if "edge_types" in raw and not isinstance(et, list):
        c.fail("edge_types", f"expected a list of edge types, got {_kind(et)}")
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
    )


def load_schema_file(path: str) -> GraphSchema:
    """Read and validate a schema file (errors name the file)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SchemaError(path, [("", f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError:
        raise SchemaError(path, [("", "not UTF-8 text")]) from None
    return parse_schema(text, source=path)
