"""The validated graph schema: patterns, writers, edge types and their governance (pure).

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

import re
from dataclasses import dataclass, field
from fnmatch import translate

from claimgraph.core.model import Cardinality, ConflictPolicy, OnStale, OnUnknown

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
    "fail_closed_warnings",
]

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

    def is_safe(self, asserts: bool, object_id: str, *, strict: bool = False) -> bool:
        """Whether an outcome is conservative: one of the safe values asserted.

        ``strict`` (governor rules revision 2 on): a denial is not safe — denying REJECT
        leaves the way open to APPROVE. Without it (revision 1) any denial counted as safe.
        """
        if strict:
            return asserts and (object_id == self.value or object_id in self.safe)
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
    # principals.signatures: required — every command must be signed (rules revision 2 on)
    signatures_required: bool = False
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


def fail_closed_warnings(schema: GraphSchema) -> list[tuple[str, str]]:
    """Combinations under which an edge type in a fail-closed domain cannot fail closed.

    (edge type, why) pairs; ``claimgraph schema check`` prints them. None of them is an
    error: the governor still refuses every automatic move off the safe value.
    """
    out: list[tuple[str, str]] = []
    for et in schema.edge_types.values():
        if not et.fallback.fails_closed:
            continue
        if not et.subject_exclusive:
            out.append(
                (et.name, "its subject has no exclusive slot (cardinality), so there is no "
                 "single decision a reader is served the fallback value for"),
            )  # fmt: skip
        if not schema.humans:
            out.append(
                (et.name, f"principals.humans is empty: a disagreement can never be settled "
                 f"away from {et.fallback.value!r} (only an undisputed claim moves it)"),
            )  # fmt: skip
        if et.on_unknown == OnUnknown.HALT:
            out.append(
                (et.name, "on_unknown: halt raises on an unknown slot instead of serving "
                 f"{et.fallback.value!r}"),
            )  # fmt: skip
    return out
