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

from claimgraph.core.model import LIMITS, Cardinality, ConflictPolicy, OnStale, OnUnknown
from claimgraph.errors import SchemaError

__all__ = [
    "DOMAIN_FALLBACKS",
    "DecisionChecks",
    "EdgeType",
    "Exits",
    "Fallback",
    "GraphSchema",
    "Pattern",
    "ResolverSpec",
    "Rule",
    "Writer",
    "duration_ms",
    "load_schema_file",
    "parse_schema",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,127}$")
FALLBACK_MODES = ("fail_closed", "default", "escalate")
EXIT_ACTIONS = ("escalate", "fallback")
RESOLVER_KINDS = ("rules", "majority", "weighted", "arbiter", "human", "fallback")
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
    """What readers of an unknown slot are served, by domain.

    ``safe`` lists the outcomes an *automatic* resolver may pick in a fail-closed domain (the
    declared ``value`` and any other conservative values); anything else needs a human.
    """

    mode: str  # fail_closed | default | escalate
    value: str | None = None
    safe: tuple[str, ...] = ()

    @property
    def fails_closed(self) -> bool:
        return self.mode == "fail_closed"

    def is_safe(self, asserts: bool, object_id: str) -> bool:
        """Whether an outcome is conservative: a denial, or one of the safe values."""
        return not asserts or object_id == self.value or object_id in self.safe


@dataclass(frozen=True, slots=True)
class Exits:
    """A quarantine's exit conditions: so no conflict is a permanent hole.

    ``deadline_ms``: log time after which a ``tick`` makes the conflict exit;
    ``max_blocked_reads``: blocked reads (counted in the log) that make it exit;
    ``escalate_after_runs``: runs it may block (reported at their end) before it escalates;
    ``on_exit``: ``escalate`` (hand it to a human, with its evidence) or ``fallback`` (release
    the claims holding the domain's fallback value if any — else escalate).
    """

    deadline_ms: int | None = None
    max_blocked_reads: int | None = None
    escalate_after_runs: int | None = None
    on_exit: str = "escalate"


@dataclass(frozen=True, slots=True)
class DecisionChecks:
    """Checks for decision-like edge types with several writers (the second article)."""

    outlier_ratio: float = 0.5  # a confidence below ratio × the group's mean is an outlier
    max_time_skew_ms: int = 5 * 60_000  # asserted_at spread that makes the data stale
    max_version_skew: int | None = None  # based_on_version spread that makes it stale


@dataclass(frozen=True, slots=True)
class Rule:
    """A declarative resolver rule: CEL conditions over the claims of a conflict."""

    name: str
    when: str  # CEL over `claims` (a list of maps) → bool
    adopt: str | None = None  # CEL over one claim `c` → bool: the claim(s) to adopt
    escalate: str | None = None  # or: escalate with this reason
    reject_all: bool = False  # or: reject every claim


@dataclass(frozen=True, slots=True)
class ResolverSpec:
    """One entry of an edge type's resolver chain."""

    kind: str  # rules | majority | weighted | arbiter | human | fallback
    rules: tuple[Rule, ...] = ()
    margin: float = 0.0  # weighted: minimum margin between the best two outcomes
    command: tuple[str, ...] = ()  # arbiter: an external command (JSON on stdin/stdout)
    url: str | None = None  # arbiter: or an HTTP endpoint (JSON POST)
    timeout: float = 30.0
    name: str = ""


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
    merge_prior: tuple[float, float] = (2.0, 2.0)  # Beta prior of a writer's accuracy
    exits: Exits = Exits()
    decision: DecisionChecks | None = None
    resolvers: tuple[ResolverSpec, ...] = ()
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
    humans: tuple[Pattern, ...] = ()
    _auth_cache: dict[tuple[str, str, str], bool] = field(
        default_factory=dict, compare=False, repr=False
    )

    def is_admin(self, agent: str) -> bool:
        return any(p.matches(agent) for p in self.admins)

    def is_resolver(self, agent: str) -> bool:
        return (
            self.is_admin(agent)
            or any(p.matches(agent) for p in self.resolvers)
            or self.is_human(agent)
        )

    def is_human(self, agent: str) -> bool:
        """Principals whose verdicts count as a person's (``principals.humans``)."""
        return any(p.matches(agent) for p in self.humans)

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
    "decision",
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
    margin, prior = _merge(c, raw.get("merge"), f"{path}.merge", policy)
    exits = _exits(c, raw.get("quarantine"), f"{path}.quarantine", fallback)
    decision = _decision_checks(c, raw.get("decision"), f"{path}.decision")
    resolvers = _resolvers(c, raw.get("resolvers"), f"{path}.resolvers")
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
        merge_prior=prior,
        exits=exits,
        decision=decision,
        resolvers=resolvers,
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
    c.keys(raw, path, ("mode", "value", "safe"), ())
    mode = c.choice(raw.get("mode", default_mode), f"{path}.mode", FALLBACK_MODES) or default_mode
    value = raw.get("value")
    if value is not None and not isinstance(value, str):
        c.fail(f"{path}.value", f"expected a string value, got {_kind(value)}")
        value = None
    if mode in ("fail_closed", "default") and value is None:
        c.fail(f"{path}.value", f"mode {mode} needs the value served to readers")
    safe = raw.get("safe", [])
    if not isinstance(safe, list) or not all(isinstance(x, str) for x in safe):
        c.fail(f"{path}.safe", f"expected a list of conservative values, got {_kind(safe)}")
        safe = []
    return Fallback(mode, value, tuple(safe))


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def duration_ms(text: str) -> int | None:
    """``500ms``, ``90s``, ``15m``, ``2h``, ``30d``, ``2w`` → ms; ``None`` if not a positive
    duration (the one parser for schema deadlines, retention ages and CLI intervals)."""
    m = _DURATION.match(text.strip().lower())
    if m is None:
        return None
    ms = int(float(m.group(1)) * _UNIT_MS[m.group(2)])
    return ms if ms > 0 else None


def _duration(c: _Checker, value: Any, path: str) -> int | None:
    """A duration such as ``90s``, ``15m``, ``2h``, ``1d`` (or a number of ms) as ms."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    ms = duration_ms(value) if isinstance(value, str) else None
    if ms is None:
        c.fail(path, f"expected a positive duration such as 90s, 15m, 2h or 1d, got {_kind(value)}")
    return ms


def _positive_int(c: _Checker, value: Any, path: str) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    c.fail(path, f"expected a whole number >= 1, got {_kind(value)}")
    return None


def _unit(c: _Checker, value: Any, path: str) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    c.fail(path, f"expected a number in [0, 1], got {_kind(value)}")
    return None


def _merge(
    c: _Checker, raw: Any, path: str, policy: str | None
) -> tuple[float, tuple[float, float]]:
    margin, prior = 0.1, (2.0, 2.0)
    if raw is None:
        return margin, prior
    if not isinstance(raw, dict):
        c.fail(
            path, f"expected a mapping {{margin: 0..1, prior: [wins, losses]}}, got {_kind(raw)}"
        )
        return margin, prior
    c.keys(raw, path, ("margin", "prior"), ())
    if "margin" in raw:
        m = _unit(c, raw["margin"], f"{path}.margin")
        margin = m if m is not None else margin
    if "prior" in raw:
        p = raw["prior"]
        if (
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in p)
        ):
            prior = (float(p[0]), float(p[1]))
        else:
            c.fail(
                f"{path}.prior",
                f"expected [wins, losses]: two positive numbers (a Beta prior), got {_kind(p)}",
            )
    if policy not in (None, ConflictPolicy.CONFIDENCE_WEIGHTED_MERGE.value):
        c.fail(path, "only meaningful with conflict_policy: confidence-weighted-merge")
    return margin, prior


def _exits(c: _Checker, raw: Any, path: str, fallback: Fallback) -> Exits:
    if raw is None:
        return Exits()
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping of exit conditions, got {_kind(raw)}")
        return Exits()
    c.keys(raw, path, ("deadline", "max_blocked_reads", "escalate_after_runs", "on_exit"), ())
    deadline = _duration(c, raw["deadline"], f"{path}.deadline") if "deadline" in raw else None
    reads = (
        _positive_int(c, raw["max_blocked_reads"], f"{path}.max_blocked_reads")
        if "max_blocked_reads" in raw
        else None
    )
    runs = (
        _positive_int(c, raw["escalate_after_runs"], f"{path}.escalate_after_runs")
        if "escalate_after_runs" in raw
        else None
    )
    on_exit = c.choice(raw.get("on_exit", "escalate"), f"{path}.on_exit", EXIT_ACTIONS)
    if on_exit == "fallback" and fallback.value is None:
        c.fail(
            f"{path}.on_exit",
            "on_exit: fallback needs a fallback value (fallback: {value: ...})",
        )
    return Exits(deadline, reads, runs, on_exit or "escalate")


def _decision_checks(c: _Checker, raw: Any, path: str) -> DecisionChecks | None:
    if raw is None:
        return None
    if raw is True:
        return DecisionChecks()
    if not isinstance(raw, dict):
        c.fail(
            path,
            "expected a mapping {outlier_ratio, max_time_skew, max_version_skew} "
            f"(or true for the defaults), got {_kind(raw)}",
        )
        return None
    c.keys(raw, path, ("outlier_ratio", "max_time_skew", "max_version_skew"), ())
    d = DecisionChecks()
    ratio = (
        _unit(c, raw["outlier_ratio"], f"{path}.outlier_ratio") if "outlier_ratio" in raw else None
    )
    skew = (
        _duration(c, raw["max_time_skew"], f"{path}.max_time_skew")
        if "max_time_skew" in raw
        else None
    )
    vskew = (
        _positive_int(c, raw["max_version_skew"], f"{path}.max_version_skew")
        if "max_version_skew" in raw
        else None
    )
    return DecisionChecks(
        ratio if ratio is not None else d.outlier_ratio,
        skew if skew is not None else d.max_time_skew_ms,
        vskew,
    )


def _cel(c: _Checker, value: Any, path: str) -> str | None:
    if not isinstance(value, str) or not value.strip():
        c.fail(path, f"expected a CEL expression (text), got {_kind(value)}")
        return None
    from claimgraph.core.rules import (
        compile_cel,  # CEL (cel-python): a sandboxed expression language
    )

    problem = compile_cel(value)
    if problem is not None:
        c.fail(path, f"not a valid CEL expression: {problem}")
        return None
    return value


def _rules(c: _Checker, raw: Any, path: str) -> tuple[Rule, ...]:
    if not isinstance(raw, list) or not raw:
        c.fail(path, f"expected a non-empty list of rules, got {_kind(raw)}")
        return ()
    out: list[Rule] = []
    for i, r in enumerate(raw):
        rp = f"{path}[{i}]"
        if not isinstance(r, dict):
            c.fail(
                rp,
                f"expected a mapping {{name, when, adopt | escalate | reject_all}}, got {_kind(r)}",
            )
            continue
        c.keys(r, rp, ("name", "when", "adopt", "escalate", "reject_all"), ("when",))
        name = r.get("name", f"rule-{i + 1}")
        if not isinstance(name, str) or not _NAME.match(name):
            c.fail(f"{rp}.name", f"expected a rule name, got {_kind(name)}")
            name = f"rule-{i + 1}"
        when = _cel(c, r.get("when"), f"{rp}.when") if "when" in r else None
        actions = [k for k in ("adopt", "escalate", "reject_all") if k in r]
        if len(actions) != 1:
            c.fail(
                rp,
                "expected exactly one action: adopt (CEL over c), "
                "escalate (a reason) or reject_all: true",
            )
            continue
        adopt = _cel(c, r["adopt"], f"{rp}.adopt") if "adopt" in r else None
        esc = r.get("escalate")
        if "escalate" in r and (not isinstance(esc, str) or not esc):
            c.fail(f"{rp}.escalate", f"expected an escalation reason, got {_kind(esc)}")
        if "reject_all" in r and r["reject_all"] is not True:
            c.fail(f"{rp}.reject_all", "expected true")
        if when is not None:
            out.append(
                Rule(name, when, adopt, esc if isinstance(esc, str) else None, "reject_all" in r)
            )
    return tuple(out)


def _resolvers(c: _Checker, raw: Any, path: str) -> tuple[ResolverSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        c.fail(
            path, f"expected a list of resolvers ({', '.join(RESOLVER_KINDS)}), got {_kind(raw)}"
        )
        return ()
    out: list[ResolverSpec] = []
    for i, entry in enumerate(raw):
        rp = f"{path}[{i}]"
        if isinstance(entry, str):
            entry = {entry: {}}
        if not isinstance(entry, dict) or len(entry) != 1:
            c.fail(
                rp,
                f"expected one of {', '.join(RESOLVER_KINDS)} "
                f"(a name or a one-key mapping), got {_kind(entry)}",
            )
            continue
        ((kind, conf),) = entry.items()
        if kind not in RESOLVER_KINDS:
            c.fail(rp, f"unknown resolver {kind!r}; expected one of: {', '.join(RESOLVER_KINDS)}")
            continue
        kp = f"{rp}.{kind}"
        if kind == "rules":
            out.append(ResolverSpec("rules", rules=_rules(c, conf, kp), name="rules"))
            continue
        conf = {} if conf is None else conf
        if not isinstance(conf, dict):
            c.fail(kp, f"expected a mapping of options, got {_kind(conf)}")
            continue
        if kind == "weighted":
            c.keys(conf, kp, ("margin",), ())
            m = _unit(c, conf["margin"], f"{kp}.margin") if "margin" in conf else 0.0
            out.append(ResolverSpec("weighted", margin=m or 0.0, name="weighted"))
        elif kind == "arbiter":
            c.keys(conf, kp, ("name", "command", "url", "timeout"), ())
            cmd = conf.get("command")
            url = conf.get("url")
            if (cmd is None) == (url is None):
                c.fail(kp, "expected exactly one of command (a list of arguments) or url")
                continue
            if cmd is not None and (
                not isinstance(cmd, list) or not cmd or not all(isinstance(x, str) for x in cmd)
            ):
                c.fail(f"{kp}.command", f"expected a list of strings, got {_kind(cmd)}")
                continue
            if url is not None and (
                not isinstance(url, str) or not url.startswith(("http://", "https://"))
            ):
                c.fail(f"{kp}.url", f"expected an http(s) URL, got {_kind(url)}")
                continue
            t = conf.get("timeout", 30)
            if not isinstance(t, int | float) or isinstance(t, bool) or not 0 < t <= 600:
                c.fail(f"{kp}.timeout", f"expected seconds in (0, 600], got {_kind(t)}")
                t = 30
            name = conf.get("name", "arbiter")
            if not isinstance(name, str) or not _NAME.match(name):
                c.fail(f"{kp}.name", f"expected a name, got {_kind(name)}")
                name = "arbiter"
            out.append(
                ResolverSpec(
                    "arbiter",
                    command=tuple(cmd) if cmd else (),
                    url=url,
                    timeout=float(t),
                    name=name,
                )
            )
        else:
            c.keys(conf, kp, (), ())
            out.append(ResolverSpec(kind, name=kind))
    return tuple(out)


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
    humans: tuple[Pattern, ...] = ()
    pr = raw.get("principals")
    if pr is not None:
        if not isinstance(pr, dict):
            c.fail(
                "principals",
                f"expected a mapping {{admins: [...], resolvers: [...]}}, got {_kind(pr)}",
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
        humans=humans,
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
