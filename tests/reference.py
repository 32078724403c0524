"""A reference model of reads and authority, folded from decisions (tests only, no core.state).

Small and slow on purpose: every claim's status sits in one dict and every read is recomputed
from scratch, so each rule can be checked by eye against the documented semantics.

Fold, per decision (rejected decisions change nothing):

1. the decision's claim is *visible* (accepted), *lost* (conflicted) or *withheld* in the
   decision's conflict (quarantined);
2. ``supersedes`` → superseded, ``withheld`` → withheld in ``conflict_id``, a retract's
   ``target`` → retired, ``released`` → visible, ``dismissed`` → dismissed;
3. a conflict is *open* while it withholds at least one claim. While open it *holds* the
   exclusive slots of the edges of every asserting claim withheld in it since it opened (slots
   computed under the schema in force when the claim was withheld; denials hold no slot).

Reads at a version (the fold of decisions ``0..V``):

* an edge is **unknown** when it has a withheld claim, or one of its exclusive slots (per the
  cardinality of the schema in force at V) is held by an open conflict, which the read names:
  the one withholding its claims, else the one holding its subject-side slot, else its
  object-side one (for neighbours: the queried node's side first); otherwise the edge is
  **present** when one of its visible claims asserts it, else **absent**;
* neighbours are the edges of a node that ever had a visible or withheld claim, minus absent
  ones; a slot is unknown while an open conflict holds it, else present when it has a present
  neighbour, else absent.

Schemas are read from the publish decisions with ``yaml.safe_load``, not with
``claimgraph.core.schema``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from typing import Any

import yaml

__all__ = [
    "Authority",
    "Edge",
    "Node",
    "SchemaInfo",
    "Slot",
    "View",
    "fold",
    "schema_info",
    "slots_of",
]

Edge = tuple[str, str, str, str, str]  # (edge type, subject type, subject id, obj type, obj id)
Node = tuple[str, str]  # (type, id)
Slot = tuple[str, str, str, str]  # (edge type, "out" | "in", node type, node id)
Decision = Mapping[str, Any]

EXCLUSIVE_SUBJECT = ("one-to-one", "many-to-one")  # a subject has at most one object
EXCLUSIVE_OBJECT = ("one-to-one", "one-to-many")  # an object has at most one subject


@dataclass(frozen=True)
class EdgeTypeInfo:
    """What the reference needs of one edge type."""

    cardinality: str
    on_unknown: str
    writers: tuple[tuple[str, str], ...]  # (agent pattern, task pattern)


@dataclass(frozen=True)
class SchemaInfo:
    """What the reference needs of one schema document."""

    edge_types: dict[str, EdgeTypeInfo]
    admins: tuple[str, ...]
    resolvers: tuple[str, ...]

    def is_admin(self, agent: str) -> bool:
        return any(fnmatchcase(agent, p) for p in self.admins)

    def is_resolver(self, agent: str) -> bool:
        return self.is_admin(agent) or any(fnmatchcase(agent, p) for p in self.resolvers)


@cache
def schema_info(document: str) -> SchemaInfo:
    """Read a (valid) schema document (cached: the result is never mutated)."""
    raw = yaml.safe_load(document)
    principals = raw.get("principals") or {}
    edge_types = {}
    for e in raw["edge_types"]:
        writers = tuple((w["agent"], w.get("task", "*")) for w in e["writers"])
        edge_types[e["name"]] = EdgeTypeInfo(
            e["cardinality"], e.get("on_unknown", "unknown"), writers
        )
    return SchemaInfo(
        edge_types,
        tuple(principals.get("admins") or ()),
        tuple(principals.get("resolvers") or ()),
    )


def slots_of(schema: SchemaInfo | None, edge: Edge) -> list[Slot]:
    """The exclusive slots of an edge under ``schema``: subject side first, then object side."""
    info = schema.edge_types.get(edge[0]) if schema is not None else None
    if info is None:
        return []
    out: list[Slot] = []
    if info.cardinality in EXCLUSIVE_SUBJECT:
        out.append((edge[0], "out", edge[1], edge[2]))
    if info.cardinality in EXCLUSIVE_OBJECT:
        out.append((edge[0], "in", edge[3], edge[4]))
    return out


@dataclass
class Claim:
    """A claim as the reference remembers it."""

    edge: Edge
    agent: str
    asserts: bool
    status: str = "lost"  # visible | withheld | lost | superseded | retired | dismissed
    conflict: str | None = None


@dataclass
class View:
    """The reference state after folding decisions ``0..version``."""

    version: int = -1
    schema: SchemaInfo | None = None
    claims: dict[str, Claim] = field(default_factory=dict)
    held: dict[str, set[Slot]] = field(default_factory=dict)  # open conflict → held slots
    known: set[Edge] = field(default_factory=set)  # edges that had a visible/withheld claim

    # -- the fold -----------------------------------------------------------------------------

    def apply(self, d: Decision) -> None:
        """Fold the next decision in."""
        self.version += 1
        if d["kind"] == "rejected":
            return
        conflict_id = d["conflict_id"]
        c = d["claim"]
        if c is not None:
            edge: Edge = (
                c["edge_type"],
                c["subject_type"],
                c["subject_id"],
                c["object_type"],
                c["object_id"],
            )
            self.claims[c["claim_id"]] = Claim(edge, c["agent"], c["polarity"] == "assert")
            status = {"accepted": "visible", "conflicted": "lost", "quarantined": "withheld"}
            self._set(c["claim_id"], status[d["kind"]], conflict_id)
        for x in d["supersedes"]:
            self._set(x, "superseded")
        for x in d["withheld"]:
            self._set(x, "withheld", conflict_id)
        if d["command_type"] == "retract" and d["kind"] == "retired":
            self._set(d["target"], "retired")
        for x in d["released"]:
            self._set(x, "visible")
        for x in d["dismissed"]:
            self._set(x, "dismissed")
        for cid in list(self.held):
            if not self.withheld_in(cid):
                del self.held[cid]
        if d["schema"] is not None:
            self.schema = schema_info(d["schema"]["document"])

    def _set(self, claim_id: str, status: str, conflict: str | None = None) -> None:
        claim = self.claims[claim_id]
        claim.status = status
        claim.conflict = None
        if status in ("visible", "withheld"):
            self.known.add(claim.edge)
        if status == "withheld":
            assert conflict is not None, f"{claim_id} withheld without a conflict id"
            claim.conflict = conflict
            # a withheld deny disputes its edge only: denials do not occupy exclusive slots
            slots = slots_of(self.schema, claim.edge) if claim.asserts else set()
            self.held.setdefault(conflict, set()).update(slots)

    # -- reads --------------------------------------------------------------------------------

    def withheld_in(self, conflict_id: str) -> list[str]:
        """The claims an (open) conflict withholds, sorted."""
        return sorted(
            k
            for k, c in self.claims.items()
            if c.status == "withheld" and c.conflict == conflict_id
        )

    def open_conflicts(self) -> dict[str, list[str]]:
        """Open conflict id → the claims it withholds."""
        return {cid: self.withheld_in(cid) for cid in sorted(self.held)}

    def slot_holders(self, slot: Slot) -> list[str]:
        """The open conflicts holding a slot (one at most, if the governor is right)."""
        return sorted(cid for cid, slots in self.held.items() if slot in slots)

    def visible(self, edge: Edge) -> list[str]:
        return sorted(k for k, c in self.claims.items() if c.edge == edge and c.status == "visible")

    def edge_conflicts(self, edge: Edge) -> list[str]:
        """The conflicts withholding claims of this edge (one at most, if the governor is right)."""
        return sorted(
            {
                c.conflict
                for c in self.claims.values()
                if c.edge == edge and c.status == "withheld" and c.conflict is not None
            }
        )

    def edge(self, edge: Edge, first: str = "out") -> tuple[str, str | None, list[str]]:
        """(present | absent | unknown, conflict id, visible claim ids) of an edge.

        The conflict named is the one withholding the edge's claims, else the one holding its
        ``first`` side's slot, else the other side's (which differ only if two open conflicts
        hold the edge, which the invariants rule out).
        """
        visible = self.visible(edge)
        own = self.edge_conflicts(edge)
        if own:
            return "unknown", own[0], visible
        for slot in sorted(slots_of(self.schema, edge), key=lambda s: s[1] != first):
            holders = self.slot_holders(slot)
            if holders:
                return "unknown", holders[0], visible
        if any(self.claims[k].asserts for k in visible):
            return "present", None, visible
        return "absent", None, visible

    def halts(self, edge_type: str) -> bool:
        """Whether an unknown read of this edge type raises (``on_unknown: halt``)."""
        info = self.schema.edge_types.get(edge_type) if self.schema is not None else None
        return info is not None and info.on_unknown == "halt"

    def neighbors(
        self, node: Node, direction: str, edge_type: str | None = None
    ) -> list[tuple[str, Node, str, str | None, list[str]]]:
        """(edge type, other node, state, conflict id, visible claims) of present/unknown edges."""
        out = []
        for e in self.known:
            end, other = ((e[1], e[2]), (e[3], e[4]))
            if direction == "in":
                end, other = other, end
            if end != node or (edge_type is not None and e[0] != edge_type):
                continue
            state, conflict, visible = self.edge(e, first=direction)
            if state != "absent":
                out.append((e[0], other, state, conflict, visible))
        return sorted(out)

    def slot(
        self, edge_type: str, node: Node, direction: str
    ) -> tuple[str, str | None, list[Node]]:
        """(present | absent | unknown, conflict id, present neighbours) of a slot."""
        views = self.neighbors(node, direction, edge_type)
        nodes = sorted(n[1] for n in views if n[2] == "present")
        holders = self.slot_holders((edge_type, direction, *node))
        if holders:
            return "unknown", holders[0], nodes
        info = self.schema.edge_types.get(edge_type) if self.schema is not None else None
        sides = EXCLUSIVE_SUBJECT if direction == "out" else EXCLUSIVE_OBJECT
        if info is not None and info.cardinality in sides:
            # one slot, one answer: an edge of an exclusive slot that reads unknown
            unknown = [n[3] for n in views if n[2] == "unknown"]
            if unknown:
                return "unknown", unknown[0], nodes
        return ("present" if nodes else "absent"), None, nodes


def fold(decisions: Sequence[Decision], version: int) -> View:
    """The reference view at ``version``: decisions ``0..version`` folded (offset = version)."""
    view = View()
    for d in decisions[: version + 1]:
        view.apply(d)
    return view


@dataclass
class Grant:
    """An accepted grant: grantee patterns, edge type (or ``*``), expiry, and revocation."""

    agent: str
    task: str
    edge_type: str
    expires_at: int | None
    revoked: bool = False


@dataclass
class Authority:
    """Who may do what, folded from decisions: the schema in force, grants and claim owners."""

    schema: SchemaInfo | None = None
    grants: dict[str, Grant] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # claim id → agent

    def may_write(self, edge_type: str, agent: str, task: str, now: int) -> bool:
        """A writer of the schema in force, or an active, unrevoked, unexpired grant at ``now``."""
        info = self.schema.edge_types.get(edge_type) if self.schema is not None else None
        if info is None:
            return False
        if any(fnmatchcase(agent, a) and fnmatchcase(task, t) for a, t in info.writers):
            return True
        return any(
            not g.revoked
            and (g.expires_at is None or now < g.expires_at)
            and g.edge_type in (edge_type, "*")
            and fnmatchcase(agent, g.agent)
            and fnmatchcase(task, g.task)
            for g in self.grants.values()
        )

    def apply(self, d: Decision) -> None:
        if d["kind"] == "rejected":
            return
        if d["claim"] is not None:
            self.owners[d["claim"]["claim_id"]] = d["claim"]["agent"]
        if d["schema"] is not None:
            self.schema = schema_info(d["schema"]["document"])
        g = d["grant"]
        if g is not None:
            self.grants[g["grant_id"]] = Grant(
                g["grantee_agent"], g["grantee_task"], g["edge_type"], g["expires_at"]
            )
        if d["command_type"] == "revoke":
            self.grants[d["target"]].revoked = True
