"""What the fold remembers, one small object per claim, edge, conflict, grant and key (pure).

Keys are strings joined with ``\\x1f`` (ids may not contain control characters): edge
``type␟stype␟sid␟otype␟oid``, slot ``type␟out␟stype␟sid`` or ``type␟in␟otype␟oid``. A claim's
status is one of the small integers below (:data:`STATUS_NAMES` names them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, overload

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from claimgraph.core.model import ClaimRecord, Decision, GrantRecord
from claimgraph.core.schema import EdgeType, Pattern

SEP = "\x1f"
VISIBLE, WITHHELD, LOST, SUPERSEDED, RETIRED, DISMISSED = 1, 2, 3, 4, 5, 6


STATUS_NAMES = {
    VISIBLE: "visible",
    WITHHELD: "withheld",
    LOST: "lost",
    SUPERSEDED: "superseded",
    RETIRED: "retired",
    DISMISSED: "dismissed",
}


def reader_key(agent: str, run: str) -> str:
    """Who a counted blocked read came from: the authenticated reader and its run."""
    return f"{agent}{SEP}{run}"


def edge_key(edge_type: str, s_type: str, s_id: str, o_type: str, o_id: str) -> str:
    """The key of an edge: ``type␟stype␟sid␟otype␟oid``."""
    return SEP.join((edge_type, s_type, s_id, o_type, o_id))


def edge_parts(key: str) -> tuple[str, str, str, str, str]:
    """Split an edge key into (type, subject type, subject id, object type, object id)."""
    t, st, si, ot, oi = key.split(SEP)
    return t, st, si, ot, oi


def slot_keys(et: EdgeType | None, key: str) -> tuple[str, ...]:
    """The exclusive slots an edge belongs to under its edge type's cardinality."""
    if et is None:
        return ()
    subject_side = et.subject_exclusive
    object_side = et.object_exclusive
    if not subject_side and not object_side:
        return ()
    t, st, si, ot, oi = key.split(SEP)
    out: list[str] = []
    if subject_side:
        out.append(SEP.join((t, "out", st, si)))
    if object_side:
        out.append(SEP.join((t, "in", ot, oi)))
    return tuple(out)


V = TypeVar("V")


class Table(Protocol[V]):
    """What the fold needs of its claims and edges tables: a ``dict`` or the native tables
    (``claimgraph.native._rust.ClaimMap`` / ``EdgeMap``, insertion-ordered, items are write-through
    views; nothing is ever removed from them)."""

    def __getitem__(self, key: str, /) -> V: ...
    def __setitem__(self, key: str, value: V, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    @overload
    def get(self, key: str, /) -> V | None: ...
    @overload
    def get(self, key: str, default: V, /) -> V: ...
    def items(self) -> Iterable[tuple[str, V]]: ...
    def values(self) -> Iterable[V]: ...


class ClaimState:
    """What the fold remembers of one claim (kept small: there may be millions)."""

    __slots__ = ("agent", "asserts", "based", "conf", "conflict", "edge", "status", "ts")

    def __init__(
        self,
        edge: str,
        agent: str,
        asserts: bool,
        ts: int,
        status: int,
        conflict: str | None,
        conf: float = 1.0,
        based: int | None = None,
    ) -> None:
        self.edge = edge
        self.agent = agent
        self.asserts = asserts
        self.ts = ts
        self.status = status
        self.conflict = conflict
        self.conf = conf  # confidence: weights in merges, decision checks
        self.based = based  # based_on_version


_CONF: dict[float, float] = {}


def shared_float(x: float) -> float:
    """One float object per distinct confidence (they repeat; there may be millions)."""
    if len(_CONF) > 4096:
        return x
    return _CONF.setdefault(x, x)


class EdgeState:
    """Visible and withheld claims of one edge, and the version its read state last changed."""

    __slots__ = ("changed", "visible", "withheld")

    def __init__(self) -> None:
        # tuples, not lists: most edges hold one claim, and there may be millions of edges
        self.visible: tuple[str, ...] = ()
        self.withheld: tuple[str, ...] = ()
        self.changed = -1


@dataclass(slots=True)
class ConflictState:
    """An open or closed conflict: the claims it withholds and how it ended."""

    conflict_id: str
    edge_type: str
    opened_at: int
    claims: list[str] = field(default_factory=list)
    slots: list[str] = field(default_factory=list)
    closed_at: int | None = None
    outcome: str = ""  # resolved | released | fallback | emptied | settled | merged into <id>
    members: list[str] = field(default_factory=list)  # every claim ever withheld in it
    blocked_reads: int = 0
    opened_time: int = 0  # log time of the decision that opened it (deadlines count from it)
    blocked_runs: list[str] = field(default_factory=list)  # runs it blocked (reported at end)
    escalated_at: int | None = None  # version at which it was escalated to a human
    escalation: str = ""  # why: "deadline: ...", "blocked_reads: ...", "resolver: ..."
    readers: set[str] = field(default_factory=set)  # "agent␟run" counted (rules revision 2)

    @property
    def open(self) -> bool:
        return self.closed_at is None


@dataclass(slots=True)
class GrantState:
    """An accepted grant and whether it was revoked."""

    record: GrantRecord
    revoked: bool = False


@dataclass(slots=True)
class Changes:
    """What one decision changed, for the projector to write at that version."""

    claims: list[tuple[str, int]] = field(default_factory=list)  # (claim id, new status)
    new_claim: ClaimRecord | None = None
    edges: list[str] = field(default_factory=list)  # edge keys whose rows must be rewritten
    slots: list[str] = field(default_factory=list)  # slot keys whose conflict marker changed
    conflicts: list[str] = field(default_factory=list)
    calibration: list[tuple[str, str]] = field(default_factory=list)  # (edge type, agent)

    def touch_edge(self, key: str) -> None:
        if key not in self.edges:
            self.edges.append(key)


@dataclass(slots=True)
class KeyState:
    """A registered signing key (the public half) and whether it was revoked."""

    key_id: str
    key_agent: Pattern
    public: Ed25519PublicKey
    revoked: bool = False


def fold_key(keys: dict[str, KeyState], d: Decision) -> None:
    """Fold a decision into the graph's keys (called by :meth:`GraphState.evolve`)."""
    if d["kind"] == "rejected":
        return
    k = d["key"]
    if k is not None:
        keys[k["key_id"]] = KeyState(
            k["key_id"],
            Pattern.of(k["key_agent"]),
            Ed25519PublicKey.from_public_bytes(k["public_key"]),
        )
    elif d["command_type"] == "revoke_key" and d["target"] in keys:
        keys[d["target"]].revoked = True


def requires_signatures(keys: dict[str, KeyState]) -> bool:
    """A graph requires signatures while it has an active key."""
    return any(not k.revoked for k in keys.values())
