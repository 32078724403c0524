"""The fold of decisions into graph state: ``evolve(state, decision, version)`` (pure, no I/O).

Theory of operation
-------------------
The decisions log is the graph's history and every decision states its effects explicitly, so
folding it needs no policy judgement, only bookkeeping. The same fold serves two readers:

* the **governor** (``streams.governor.decide``) reads a :class:`GraphState` to judge the next
  command, then folds its own decision in;
* the **projector** folds the same decisions and writes what changed (:class:`Changes`) as
  versioned rows into RocksDB, so that any version can be read later.

Rules, applied in this order for one decision at version ``v``:

1. the claim the decision carries is stored with a status given by the decision kind
   (accepted → visible, conflicted → lost, quarantined → withheld in ``conflict_id``);
2. ``supersedes`` → superseded, ``withheld`` → withheld in ``conflict_id``,
   ``released`` → visible, ``dismissed`` → dismissed; a retract's ``target`` → retired;
3. a conflict with no withheld claim left is closed.

An edge reads **unknown** while it has a withheld claim in an open conflict or one of its
exclusive slots is under an open conflict; otherwise **present** when it has a visible
``assert`` claim, else **absent**. Visible claims on one edge always agree in polarity, and
visible asserts in an exclusive slot are always on one edge: ``decide`` keeps both invariants.

Keys are strings joined with ``\\x1f`` (ids may not contain control characters):
edge ``type␟stype␟sid␟otype␟oid``, slot ``type␟out␟stype␟sid`` or ``type␟in␟otype␟oid``.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from claimgraph.core.chain import GENESIS, chain_next
from claimgraph.core.entities import (
    DISMISSED,
    LOST,
    RETIRED,
    SEP,
    STATUS_NAMES,
    SUPERSEDED,
    VISIBLE,
    WITHHELD,
    Changes,
    ClaimState,
    ConflictState,
    EdgeState,
    GrantState,
    KeyState,
    Table,
    edge_key,
    edge_parts,
    fold_key,
    reader_key,
    requires_signatures,
    shared_float,
    slot_keys,
)
from claimgraph.core.model import Decision
from claimgraph.core.schema import EdgeType, GraphSchema, parse_schema
from claimgraph.core.wire import encode_decision

# The version of what the fold builds (the classes below and their meaning). Checkpoints record
# it and are skipped when it differs; bump it with any change to the fold's state or behaviour.
STATE_FORMAT = 4

__all__ = [
    "DISMISSED",
    "LOST",
    "RETIRED",
    "SEP",
    "STATE_FORMAT",
    "STATUS_NAMES",
    "SUPERSEDED",
    "VISIBLE",
    "WITHHELD",
    "Changes",
    "ClaimState",
    "ConflictState",
    "EdgeState",
    "GraphState",
    "edge_key",
    "edge_parts",
    "slot_keys",
]


# Where claims and edges are kept: ``None``, Python dicts; else a factory of the native core's
# tables (``claimgraph.native`` installs it when the native module is loaded). The tables are
# mappings in insertion order whose items are write-through views with the attributes of
# ClaimState / EdgeState, so the fold below runs unchanged on either, and folds the same state.
TABLES: Callable[[], tuple[Any, Any]] | None = None


class GraphState:
    """The folded state of one graph: claims, edges, slots, conflicts, grants, schema.

    ``native_tables``: keep claims and edges in the native core's tables (off the Python heap;
    the default when the native core is loaded) or, False, in Python dicts.
    """

    def __init__(self, graph: str, native_tables: bool | None = None) -> None:
        self.graph = graph
        self.schema: GraphSchema | None = None
        self.schema_rev = 0
        self.claims: Table[ClaimState]
        self.edges: Table[EdgeState]
        if TABLES is not None and native_tables is not False:
            self.claims, self.edges = TABLES()
        else:
            claims: dict[str, ClaimState] = {}
            edges: dict[str, EdgeState] = {}
            self.claims, self.edges = claims, edges
        self.slot_holder: dict[str, str] = {}  # exclusive slot → edge holding visible asserts
        self.slot_conflict: dict[str, str] = {}  # exclusive slot → open conflict id
        self.slot_changed: dict[str, int] = {}
        self.conflicts: dict[str, ConflictState] = {}
        self.grants: dict[str, GrantState] = {}
        self.open_conflicts: dict[str, None] = {}  # open conflict ids, in opening order
        # confidence-weighted-merge: vote group (a slot, or an edge) → agent → its latest
        # claim there, visible or not — each writer's latest claim counts once in a merge
        self.votes: dict[str, dict[str, str]] = {}
        # (edge type, agent) → [wins, losses] in resolved conflicts: calibration
        self.record: dict[tuple[str, str], list[int]] = {}
        self.keys: dict[str, KeyState] = {}  # signing keys (claimgraph.core.governor.authority)
        self.keys_active = False  # a graph with an active key requires signed commands
        self.other_commands: set[str] = set()  # ids of commands that are not claims
        self._sides: dict[str, tuple[bool, bool]] = {}  # edge type → exclusive sides
        self.head = -1  # version of the last decision folded in
        # Where versions are not dense (Kafka offsets), the governor folds decisions by
        # sequence number and keeps the offsets of the committed ones here; None means
        # versions are sequence numbers (the embedded logs).
        self.offsets: list[int] | None = None
        self.last_log_time = 0
        self.decisions = 0
        self.rules: int | None = None  # the rules revision of the last decision (None: empty)
        self.chain = GENESIS  # the decisions hash chain up to head (core.chain)
        self.placed: int | None = None  # Kafka: the partition an accepted place put it on

    # -- queries used by decide() and by readers -------------------------------------------

    def seen(self, command_id: str) -> bool:
        return command_id in self.claims or command_id in self.other_commands

    def edge_type(self, name: str) -> EdgeType | None:
        return self.schema.edge_types.get(name) if self.schema else None

    def slots_of(self, key: str) -> tuple[str, ...]:
        """The exclusive slots of an edge under the schema in force (hot: cached by type)."""
        name = key[: key.index(SEP)]
        sides = self._sides.get(name)
        if sides is None:
            et = self.edge_type(name)
            sides = self._sides[name] = (
                (et.subject_exclusive, et.object_exclusive) if et is not None else (False, False)
            )
        if sides == (False, False):
            return ()
        t, st, si, ot, oi = key.split(SEP)
        if sides == (True, False):
            return (SEP.join((t, "out", st, si)),)
        if sides == (False, True):
            return (SEP.join((t, "in", ot, oi)),)
        return (SEP.join((t, "out", st, si)), SEP.join((t, "in", ot, oi)))

    def edge_conflict(self, key: str) -> str | None:
        """The open conflict that makes an edge unknown, if any."""
        es = self.edges.get(key)
        if es is not None and es.withheld:
            c = self.claims[es.withheld[0]].conflict
            if c is not None:
                return c
        for s in self.slots_of(key):
            c = self.slot_conflict.get(s)
            if c is not None:
                return c
        return None

    def conflicts_touching(self, key: str) -> set[str]:
        """Every open conflict that makes an edge unknown (its own claims, or a slot)."""
        out: set[str] = set()
        es = self.edges.get(key)
        if es is not None:
            for c in es.withheld:
                conflict = self.claims[c].conflict
                if conflict is not None:
                    out.add(conflict)
        for s in self.slots_of(key):
            conflict = self.slot_conflict.get(s)
            if conflict is not None:
                out.add(conflict)
        return out

    def edge_own(self, key: str) -> tuple[str, str | None, list[str]]:
        """Like :meth:`edge_read` but ignoring slot conflicts: what an edge row stores."""
        es = self.edges.get(key)
        if es is None:
            return "absent", None, []
        visible = list(es.visible)
        if es.withheld:
            return "unknown", self.claims[es.withheld[0]].conflict, visible
        if visible and self.claims[visible[0]].asserts:
            return "present", None, visible
        return "absent", None, visible

    def edge_read(self, key: str) -> tuple[str, str | None, list[str]]:
        """(state, conflict id, visible claim ids) of an edge at the folded head."""
        conflict = self.edge_conflict(key)
        es = self.edges.get(key)
        visible = list(es.visible) if es else []
        if conflict is not None:
            return "unknown", conflict, visible
        if visible and self.claims[visible[0]].asserts:
            return "present", None, visible
        return "absent", None, visible

    def known_head(self) -> int:
        """The newest version a reader can have seen when the next command is decided.

        Embedded: the previous decision's version. Kafka: the offset of the last decision of
        the last *committed* transaction (decisions in flight have no offset yet).
        """
        if self.offsets is None:
            return self.head
        return self.offsets[-1] if self.offsets else -1

    def seq_of(self, version: int) -> int:
        """The sequence number (count - 1) of the newest decision at or below ``version``."""
        if self.offsets is None:
            return version
        return bisect_right(self.offsets, version) - 1

    def changed_at(self, key: str) -> int:
        """The last version at which the read state of the edge or one of its slots changed."""
        es = self.edges.get(key)
        v = es.changed if es else -1
        for s in self.slots_of(key):
            v = max(v, self.slot_changed.get(s, -1))
        return v

    # -- the fold -----------------------------------------------------------------------------

    def evolve(self, d: Decision, version: int, raw: bytes | None = None) -> Changes:
        """Fold one decision in (mutates ``self``); return what changed at ``version``.

        ``raw`` is the decision record as stored (it extends the hash chain); without it the
        decision is encoded again, in the current wire version.
        """
        ch = Changes()
        self.head = version
        self.decisions += 1
        self.rules = d["rules"]
        self.chain = chain_next(self.chain, encode_decision(d) if raw is None else raw)
        if d["log_time"] > self.last_log_time:
            self.last_log_time = d["log_time"]
        kind = d["kind"]
        cid = d["command_id"]
        claim = d["claim"]
        duplicate = kind == "rejected" and d["reason"] == "duplicate_command"
        if cid and not duplicate and (claim is None or kind == "rejected"):
            self.other_commands.add(cid)
        if kind == "rejected":
            return ch
        if d["command_type"] == "place":
            self.placed = d["count"]
        before: dict[str, str] = {}
        conflict_id = d["conflict_id"]
        if claim is not None:
            key = edge_key(
                sys.intern(claim["edge_type"]),
                sys.intern(claim["subject_type"]),
                claim["subject_id"],
                sys.intern(claim["object_type"]),
                claim["object_id"],
            )
            self._remember(before, key)
            status = {"accepted": VISIBLE, "conflicted": LOST, "quarantined": WITHHELD}[kind]
            cs = ClaimState(
                key,
                sys.intern(claim["agent"]),
                claim["polarity"] == "assert",
                claim["asserted_at"],
                LOST,
                None,
                shared_float(claim["confidence"]),
                claim["based_on_version"],
            )
            self.claims[claim["claim_id"]] = cs
            ch.new_claim = claim
            if self._merges(claim["edge_type"]):
                self.votes.setdefault(self.vote_group(key), {})[cs.agent] = claim["claim_id"]
            if status == WITHHELD:
                assert conflict_id is not None
                self._withhold(claim["claim_id"], conflict_id, d, version, before, ch)
            elif status == VISIBLE:
                self._show(claim["claim_id"], before, ch)
            else:
                ch.claims.append((claim["claim_id"], LOST))
        for x in d["exits"]:  # revision 4: a conflict merged into the one this decision names
            if x["action"] == "merge" and conflict_id is not None:
                merged = self.conflicts[x["conflict_id"]]
                for c in list(merged.claims):  # withheld, released or superseded below
                    self._leave_conflict(c, self.claims[c], ch)
                merged.outcome = f"merged into {conflict_id}"
        for c in d["supersedes"]:
            self._hide(c, SUPERSEDED, before, ch)
        for c in d["withheld"]:
            assert conflict_id is not None
            self._withhold(c, conflict_id, d, version, before, ch)
        if d["command_type"] == "retract" and kind == "retired" and d["target"]:
            self._hide(d["target"], RETIRED, before, ch)
            self._drop_vote(d["target"])
        resolution = d["command_type"] == "resolve" or any(
            x["action"] == "fallback" for x in d["exits"]
        )
        if resolution:
            self._calibrate(d, ch)
        for c in d["released"]:
            self._show(c, before, ch)
        for c in d["dismissed"]:
            self._hide(c, DISMISSED, before, ch)
            self._drop_vote(c)
        for x in d["exits"]:
            conflict = self.conflicts.get(x["conflict_id"])
            if conflict is not None and x["action"] == "escalate" and conflict.open:
                conflict.escalated_at = version
                conflict.escalation = f"{x['trigger']}: {x['detail']}"
                if conflict.conflict_id not in ch.conflicts:
                    ch.conflicts.append(conflict.conflict_id)
        if conflict_id is not None:
            self._maybe_close(conflict_id, d, version, before, ch)
        for touched in list(ch.conflicts):
            if touched != conflict_id:
                self._maybe_close(touched, d, version, before, ch)
        if d["schema"] is not None:
            s = d["schema"]
            self.adopt_schema(parse_schema(s["document"], s["source"]), s["revision"])
        if d["grant"] is not None:
            self.grants[d["grant"]["grant_id"]] = GrantState(d["grant"])
        if d["command_type"] == "revoke" and d["target"] in self.grants:
            self.grants[d["target"]].revoked = True
        if d["key"] is not None or d["command_type"] == "revoke_key":
            fold_key(self.keys, d)
            self.keys_active = requires_signatures(self.keys)
        if d["command_type"] == "read_blocked" and d["target"] in self.conflicts:
            conflict = self.conflicts[d["target"]]
            conflict.blocked_reads += d["count"]
            run = d["run_id"]
            if run is not None and run not in conflict.blocked_runs:
                conflict.blocked_runs.append(run)
            if run is not None and d["rules"] >= 2:
                conflict.readers.add(reader_key(d["agent"], run))
            elif run is None and d["rules"] >= 4:  # outside a run: once per (reader, conflict)
                conflict.readers.add(reader_key(d["agent"], ""))
            if d["target"] not in ch.conflicts:
                ch.conflicts.append(d["target"])
        self._mark_changed(before, version, ch)
        return ch

    def adopt_schema(self, schema: GraphSchema, revision: int) -> None:
        """Put ``schema`` in force as revision ``revision`` (what a published schema does).

        The fold calls it for an accepted ``publish_schema``; a what-if
        (:mod:`claimgraph.service.whatif`) calls it to put a proposed schema in force
        without a decision, so without taking a version.
        """
        self.schema = schema
        self.schema_rev = revision
        self._sides = {}
        self._rebuild_slot_holders()  # cardinalities may have changed

    def _merges(self, edge_type: str) -> bool:
        et = self.edge_type(edge_type)
        return et is not None and et.conflict_policy.value == "confidence-weighted-merge"

    def vote_group(self, key: str) -> str:
        """Where an edge's claims are merged: its (first) exclusive slot, else the edge."""
        slots = self.slots_of(key)
        return slots[0] if slots else key

    def _drop_vote(self, claim_id: str) -> None:
        cs = self.claims[claim_id]
        group = self.votes.get(self.vote_group(cs.edge))
        if group is not None and group.get(cs.agent) == claim_id:
            del group[cs.agent]

    def _calibrate(self, d: Decision, ch: Changes) -> None:
        """A resolution is ground truth for calibration: released claims won, dismissed lost."""
        for ids, slot in ((d["released"], 0), (d["dismissed"], 1)):
            for c in ids:
                cs = self.claims.get(c)
                if cs is None or cs.status != WITHHELD:
                    continue
                k = (cs.edge[: cs.edge.index(SEP)], cs.agent)
                rec = self.record.get(k)
                if rec is None:
                    rec = self.record[k] = [0, 0]
                rec[slot] += 1
                if k not in ch.calibration:
                    ch.calibration.append(k)

    def record_of(self, edge_type: str) -> dict[str, tuple[int, int]]:
        """agent → (wins, losses) in resolved conflicts of ``edge_type``."""
        return {a: (w, lo) for (t, a), (w, lo) in self.record.items() if t == edge_type}

    def _rebuild_slot_holders(self) -> None:
        """Recompute which edge holds each exclusive slot under the schema now in force."""
        self.slot_holder = {}
        for key, es in self.edges.items():
            if any(self.claims[c].asserts for c in es.visible):
                for s in self.slots_of(key):
                    self.slot_holder[s] = key

    def slot_violations(self, schema: GraphSchema) -> list[str]:
        """Slots that would hold visible asserts on several edges under ``schema``."""
        seen: dict[str, str] = {}
        bad: list[str] = []
        for key, es in self.edges.items():
            if not any(self.claims[c].asserts for c in es.visible):
                continue
            for s in slot_keys(schema.edge_types.get(key.split(SEP, 1)[0]), key):
                if s in seen and seen[s] != key:
                    bad.append(s)
                seen[s] = key
        return bad

    def _edge(self, key: str) -> EdgeState:
        """The edge's state, added empty if it has none (a table copies what it is given)."""
        es = self.edges.get(key)
        if es is None:
            self.edges[key] = EdgeState()
            es = self.edges[key]
        return es

    def _remember(self, before: dict[str, str], key: str) -> None:
        if key not in before:
            before[key] = self.edge_read(key)[0]

    def _show(self, claim_id: str, before: dict[str, str], ch: Changes) -> None:
        cs = self.claims[claim_id]
        key = cs.edge
        self._remember(before, key)
        self._leave_conflict(claim_id, cs, ch)
        cs.status = VISIBLE
        es = self._edge(key)
        es.visible = (*es.visible, claim_id)
        if cs.asserts:
            for s in self.slots_of(key):
                self.slot_holder[s] = key
        ch.claims.append((claim_id, VISIBLE))
        ch.touch_edge(key)

    def _hide(self, claim_id: str, status: int, before: dict[str, str], ch: Changes) -> None:
        cs = self.claims[claim_id]
        key = cs.edge
        self._remember(before, key)
        if cs.status == VISIBLE:
            es = self.edges[key]
            es.visible = tuple(c for c in es.visible if c != claim_id)
            if not any(self.claims[c].asserts for c in es.visible):
                for s in self.slots_of(key):
                    if self.slot_holder.get(s) == key:
                        del self.slot_holder[s]
        self._leave_conflict(claim_id, cs, ch)
        cs.status = status
        ch.claims.append((claim_id, status))
        ch.touch_edge(key)

    def _withhold(
        self,
        claim_id: str,
        conflict_id: str,
        d: Decision,
        version: int,
        before: dict[str, str],
        ch: Changes,
    ) -> None:
        cs = self.claims[claim_id]
        if cs.status == VISIBLE:
            self._hide(claim_id, WITHHELD, before, ch)
        else:
            self._remember(before, cs.edge)
        conflict = self.conflicts.get(conflict_id)
        if conflict is None:
            conflict = self.conflicts[conflict_id] = ConflictState(
                conflict_id, cs.edge.split(SEP, 1)[0], version, opened_time=d["log_time"]
            )
            self.open_conflicts[conflict_id] = None
        # a withheld deny disputes its edge only: denials do not occupy exclusive slots
        for s in self.slots_of(cs.edge) if cs.asserts else ():
            if s not in conflict.slots:
                conflict.slots.append(s)
            if self.slot_conflict.get(s) != conflict_id:
                self.slot_conflict[s] = conflict_id
                ch.slots.append(s)
        conflict.claims.append(claim_id)
        conflict.members.append(claim_id)
        cs.status = WITHHELD
        cs.conflict = conflict_id
        es = self._edge(cs.edge)
        es.withheld = (*es.withheld, claim_id)
        if (claim_id, WITHHELD) not in ch.claims:
            ch.claims.append((claim_id, WITHHELD))
        ch.touch_edge(cs.edge)
        if conflict_id not in ch.conflicts:
            ch.conflicts.append(conflict_id)

    def _leave_conflict(self, claim_id: str, cs: ClaimState, ch: Changes | None = None) -> None:
        if cs.status != WITHHELD or cs.conflict is None:
            return
        if ch is not None and cs.conflict not in ch.conflicts:
            ch.conflicts.append(cs.conflict)  # its row lists the claims it still holds
        conflict = self.conflicts[cs.conflict]
        conflict.claims.remove(claim_id)
        es = self.edges[cs.edge]
        es.withheld = tuple(c for c in es.withheld if c != claim_id)
        cs.conflict = None

    def _maybe_close(
        self, conflict_id: str, d: Decision, version: int, before: dict[str, str], ch: Changes
    ) -> None:
        conflict = self.conflicts.get(conflict_id)
        if conflict is None or not conflict.open or conflict.claims:
            return
        conflict.closed_at = version
        self.open_conflicts.pop(conflict_id, None)
        if conflict.outcome.startswith("merged into "):
            pass  # its claims moved to another conflict (rules revision 4)
        elif d["reason"] == "conflict_settled":
            conflict.outcome = "settled"  # its claims came to agree (rules revision 2)
        else:
            conflict.outcome = {"resolve": "resolved", "retract": "released"}.get(
                d["command_type"], "fallback" if d["exits"] else "emptied"
            )
        for s in conflict.slots:
            if self.slot_conflict.get(s) == conflict_id:
                del self.slot_conflict[s]
                ch.slots.append(s)
                holder = self.slot_holder.get(s)
                for key in _slot_edges(self, s, holder):
                    self._remember(before, key)
                    ch.touch_edge(key)
        if conflict_id not in ch.conflicts:
            ch.conflicts.append(conflict_id)

    def _mark_changed(self, before: dict[str, str], version: int, ch: Changes) -> None:
        for s in ch.slots:
            self.slot_changed[s] = version
        for key, state in before.items():
            if self.edge_read(key)[0] != state:
                self._edge(key).changed = version
                for s in self.slots_of(key):
                    self.slot_changed[s] = version


def _slot_edges(state: GraphState, slot: str, holder: str | None) -> list[str]:
    return [holder] if holder else []
