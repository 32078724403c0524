"""One agent's MCP session: who it is (from the transport), the run it works in, its tools.

An :class:`AgentSession` is what every MCP tool call of one session goes through. Its
identity comes from the transport, never from a tool argument: an HTTP bearer token, a
``--token`` on stdio, or on stdio over an embedded data directory ``--agent`` (the trusted
local owner's mode: the process owns the data, nothing proves who typed the name).

Each session works inside a run (:class:`~claimgraph.service.runs.Run`). The first call
starts one under the session's task, pinned at head — or at a shared snapshot id, which is the
``snapshot_id`` of any run in the runs log — so every read is served at the pinned version and
traced, and writes carry ``based_on_version`` and ``run_id``. Each call keeps the pin's lease
at least 90% of its length (renewing when a tenth has passed);
``start_run`` ends the run and starts a fresh one at a newer version; ``end_run`` ends it. The
run is an ordinary run: ``claimgraph runs replay RUN_ID`` replays it.

Results are small, self-explaining dicts: a read's ``state`` (present, absent, unknown), the
version it was served at, the conflict id and what to do when unknown; a write's decision,
its reason and version. A refusal (a role or task the identity lacks) is recorded in the log
as a ``refused`` command, as the HTTP API records its refusals, and returned as a result.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from claimgraph.core.commands import COMMANDS, Sender
from claimgraph.core.model import LIMITS, Command, Reason
from claimgraph.core.schema import Pattern
from claimgraph.errors import AuthError, ClaimgraphError, NotFoundError
from claimgraph.projections.reader import EdgeView, NeighborView, SlotView
from claimgraph.service.api import Receipt, node
from claimgraph.service.port import GraphPort
from claimgraph.service.queries import PathsResult, ReachResult
from claimgraph.service.runs import Run, Snapshot
from claimgraph.service.traces import digest

__all__ = ["AgentSession", "Identity"]

Direction = Literal["out", "in"]
Walk = Literal["out", "in", "both"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a session acts as: an agent, the tasks it may act in, its roles.

    ``checked``: the transport proved it (a token), so roles and tasks are enforced here and
    refusals recorded; ``False`` for the trusted local owner (``--agent``) and for a graph
    behind the HTTP API, whose server enforces and records them itself.
    """

    agent: str
    tasks: tuple[str, ...] = ("*",)
    roles: frozenset[str] = frozenset()
    checked: bool = False
    how: str = "token"  # token | local-owner | server

    def may_act_in(self, task: str) -> bool:
        return any(Pattern.of(t).matches(task) for t in self.tasks)

    def has_role(self, role: str) -> bool:
        return role in self.roles or "admin" in self.roles

    @property
    def default_task(self) -> str:
        """The task a session runs in unless told: the identity's one literal task, or ''."""
        literal = [t for t in self.tasks if not any(c in t for c in "*?[")]
        return literal[0] if len(self.tasks) == 1 and literal else ""


_ROLE = {
    Sender.RESOLVER: ("resolver", Reason.NOT_RESOLVER),
    Sender.ADMIN: ("admin", Reason.NOT_ADMIN),
}

_EXPLAIN = {
    "present": "The edge holds at version {v}.",
    "absent": "No claim makes this edge hold at version {v}.",
    "unknown": (
        "Writers disagree: conflict {c} quarantines this at version {v}, so neither value is "
        "readable. Do not act on a guess: call conflicts_near to see the claims, "
        "escalate_conflict('{c}', reason) if a person must decide, or start_run later to read "
        "a newer version once it is resolved."
    ),
}


@dataclass
class AgentSession:
    """One MCP session's identity, run and tools over a graph (any graph port)."""

    graph: GraphPort
    identity: Identity
    task: str = ""
    snapshot_id: str | None = None
    lease: float = 900.0
    _run: Run | None = field(default=None, init=False)
    _renewed: float = field(default=0.0, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> Run:
        """The session's run: started on first use; every call keeps its pin's lease at least
        90% of ``lease`` from now (renewing writes the pin registry, so not on every call)."""
        with self._lock:
            now = time.monotonic()
            if self._run is None:
                self._run = self._start(self.task, self.snapshot_id)
                self._renewed = now
            elif now - self._renewed >= self.lease / 10:
                self._run.renew(self.lease)
                self._renewed = now
            if len(self._run._pending) >= 64:  # reads reach the runs log in batches
                self._run.flush()
            return self._run

    def _start(self, task: str, snapshot_id: str | None) -> Run:
        if snapshot_id:
            snap = Snapshot(self._snapshot_version(snapshot_id), snapshot_id)
        else:
            snap = Snapshot(self.graph.head())  # a fresh id other sessions can join
        return self.graph.run(agent=self.identity.agent, task=task, snapshot=snap, lease=self.lease)

    def _snapshot_version(self, snapshot_id: str) -> int:
        for s in self.graph.runs():
            if s.snapshot_id == snapshot_id:
                return s.pinned_version
        raise NotFoundError(
            f"no run in the runs log has snapshot id {snapshot_id[:80]!r}: a snapshot id is "
            "the snapshot_id of a run (start_run returns it)"
        )

    def run_info(self) -> dict[str, Any]:
        r = self.run()
        return {
            "run_id": r.run_id,
            "agent": r.agent,
            "task": r.task,
            "pinned_version": r.version,
            "snapshot_id": r.snapshot_id,
            "head": self.graph.head(),
            "explain": (
                f"Reads are served at version {r.version} (pinned) and traced; writes are based "
                f"on it. Share snapshot_id with other agents so their runs read the same version."
            ),
        }

    def start_run(self, task: str | None = None, snapshot_id: str | None = None) -> dict[str, Any]:
        """End the current run (if any) and start a fresh one at head or at ``snapshot_id``."""
        with self._lock:
            want = self.task if task is None else task
            if self.identity.checked and not self.identity.may_act_in(want):
                return self._refuse(
                    "start_run", Reason.TASK_NOT_ALLOWED,
                    f"{self.identity.agent!r} may act in tasks {', '.join(self.identity.tasks)}, "
                    f"not {want[:80]!r}", want,
                )  # fmt: skip
            self.end_run("restarted")
            self.task = want
            self._run = self._start(want, snapshot_id)
            self._renewed = time.monotonic()
            return self.run_info()

    def end_run(self, status: str = "ok") -> dict[str, Any]:
        """End the session's run: its trace is closed and its pin released."""
        with self._lock:
            r, self._run = self._run, None
            if r is None:
                return {"ended": None, "explain": "No run was open; the next call starts one."}
            r.close(status)
            return {
                "ended": r.run_id,
                "pinned_version": r.version,
                "status": status,
                "explain": f"Run {r.run_id} ended; replay it with: claimgraph runs replay "
                f"{r.run_id}. The next call starts a fresh run at the newest version.",
            }

    def close(self) -> None:
        """The session ends: so does its run."""
        with contextlib.suppress(ClaimgraphError):  # the graph is away: the pin lapses
            self.end_run("session closed")

    # -- reads -----------------------------------------------------------------------------------

    def _explicit(self, at: int | None) -> int | None:
        """None when a read is the run's (pinned version), else the version asked for."""
        r = self.run()
        return None if at is None or at == r.version else at

    def read_edge(
        self, edge_type: str, subject: str, obj: str, at: int | None = None
    ) -> dict[str, Any]:
        v = self._explicit(at)
        if v is None:
            e = self.run().edge(edge_type, subject, obj)
        else:
            e = self.graph.edge(edge_type, subject, obj, at=v)
            self._off_run(
                "read_edge", {"edge_type": edge_type, "subject": subject, "object": obj}, v, e
            )
        return _edge(e)

    def read_edges(self, edges: Sequence[dict[str, str]], at: int | None = None) -> dict[str, Any]:
        """Several edges in one read at one version, in order; at the pinned version each is
        traced as its own edge read (replay checks each)."""
        wanted = [(e["edge_type"], e["subject"], e["object"]) for e in edges]
        v = self._explicit(at)
        if v is None:
            run = self.run()
            out, version = run.read_edges(wanted), run.version
        else:
            out, version = self.graph.read_edges(wanted, at=v), v
            self._off_run("read_edges", {"edges": [list(w) for w in wanted]}, v, out)
        return {"version": version, "edges": [_edge(e) for e in out]}

    def read_slot(
        self, edge_type: str, node_: str, direction: Direction = "out", at: int | None = None
    ) -> dict[str, Any]:
        v = self._explicit(at)
        if v is None:
            s = self.run().slot(edge_type, node_, direction=direction)
        else:
            s = self.graph.slot(edge_type, node_, direction=direction, at=v)
            self._off_run(
                "read_slot", {"edge_type": edge_type, "node": node_, "direction": direction}, v, s
            )
        return _slot(s)

    def neighbors(
        self,
        node_: str,
        edge_type: str | None = None,
        direction: Direction = "out",
        min_confidence: float | None = None,
        writer: str | None = None,
        asserted_after: int | None = None,
        asserted_before: int | None = None,
        at: int | None = None,
    ) -> dict[str, Any]:
        filters: dict[str, Any] = {
            "min_confidence": min_confidence, "writer": writer,
            "asserted_after": asserted_after, "asserted_before": asserted_before,
        }  # fmt: skip
        v = self._explicit(at)
        if v is None:
            ns = self.run().neighbors(node_, edge_type=edge_type, direction=direction, **filters)
            version = self.run().version
        else:
            ns = self.graph.neighbors(
                node_, edge_type=edge_type, direction=direction, at=v, **filters
            )
            self._off_run("neighbors", {"node": node_, "edge_type": edge_type, **filters}, v, ns)
            version = v
        unknown = [n for n in ns if n.state == "unknown"]
        return {
            "node": node_,
            "version": version,
            "neighbors": [_neighbor(n) for n in ns],
            "explain": f"{len(ns)} neighbours at version {version}"
            + (
                f"; {len(unknown)} unknown (quarantined: see conflict_id, do not act on them)"
                if unknown
                else "."
            ),
        }

    def find_paths(
        self,
        src: str,
        dst: str,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Walk = "out",
        at: int | None = None,
    ) -> dict[str, Any]:
        v = self._explicit(at)
        res: PathsResult
        if v is None:
            res = self.run().paths(
                src, dst, max_hops=max_hops, edge_types=edge_types, direction=direction
            )
        else:
            res = self.graph.paths(
                src, dst, max_hops=max_hops, edge_types=edge_types, direction=direction, at=v
            )
            self._off_run("find_paths", {"src": src, "dst": dst, "max_hops": max_hops}, v, res)
        out = res.as_dict()
        certain = sum(1 for p in res.paths if p.state == "present")
        out["explain"] = (
            f"{len(res.paths)} path(s) of at most {max_hops} hops at version {res.version}; "
            f"{certain} through present edges only"
            + (
                f"; {len(res.unknown)} quarantined edge(s) met (listed in 'unknown' with their "
                "conflict ids): paths through them may not hold"
                if res.unknown
                else ""
            )
            + (f"; cut short by the {res.truncated_by} limit" if res.truncated else "")
            + "."
        )
        return out

    def reach(
        self,
        node_: str,
        direction: Walk = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        at: int | None = None,
    ) -> dict[str, Any]:
        v = self._explicit(at)
        res: ReachResult
        if v is None:
            res = self.run().reach(
                node_, direction=direction, max_hops=max_hops, edge_types=edge_types
            )
        else:
            res = self.graph.reach(
                node_, direction=direction, max_hops=max_hops, edge_types=edge_types, at=v
            )
            self._off_run(
                "reach", {"node": node_, "direction": direction, "max_hops": max_hops}, v, res
            )
        out = res.as_dict()
        unsure = sum(1 for n in res.nodes if not n.certain)
        out["explain"] = (
            f"{len(res.nodes)} node(s) within {max_hops} hops at version {res.version}"
            + (
                f"; {unsure} reached only through quarantined edges (certain: false)"
                if unsure
                else ""
            )
            + (f"; cut short by the {res.truncated_by} limit" if res.truncated else "")
            + "."
        )
        return out

    def conflicts_near(self, node_: str, include_escalated: bool = True) -> dict[str, Any]:
        """Open conflicts whose claims touch ``node_`` (as of the pinned version, traced)."""
        run = self.run()
        want = node(node_)
        out: list[dict[str, Any]] = []
        for c in run.quarantine():
            escalated = c.get("escalated_at") is not None
            if escalated and not include_escalated:
                continue
            claims = [run.claim_info(cid) for cid in c.get("claims", [])]
            touching = [
                x for x in claims
                if x is not None and want in (
                    (x["subject_type"], x["subject_id"]), (x["object_type"], x["object_id"])
                )
            ]  # fmt: skip
            if not touching:
                continue
            out.append(
                {
                    "conflict_id": c["conflict_id"],
                    "edge_type": c["edge_type"],
                    "escalated": escalated,
                    "opened_at": c["opened_at"],
                    "claims": [_claim(x) for x in claims if x is not None],
                }
            )
        return {
            "node": node_,
            "version": run.version,
            "conflicts": out,
            "explain": (
                f"{len(out)} open conflict(s) around {node_} at version {run.version}. "
                "Their edges read unknown until a resolver decides; escalate_conflict hands one "
                "to a person with all the claims and evidence."
                if out
                else f"No open conflict touches {node_} at version {run.version}."
            ),
        }

    # -- writes ----------------------------------------------------------------------------------

    def claim(
        self,
        polarity: Literal["assert", "deny"],
        edge_type: str,
        subject: str,
        obj: str,
        confidence: float,
        evidence: Sequence[str],
        reasoning: str,
    ) -> dict[str, Any]:
        run = self.run()
        try:
            if polarity == "assert":
                r = run.assert_(
                    edge_type, subject, obj, confidence=confidence, evidence=evidence,
                    reasoning=reasoning,
                )  # fmt: skip
            else:
                r = run.deny(
                    edge_type, subject, obj, confidence=confidence, evidence=evidence,
                    reasoning=reasoning,
                )  # fmt: skip
        except AuthError as exc:  # the HTTP API refused (and recorded) it
            return _refused(exc.reason, str(exc))
        return _receipt(r)

    def write_claims(self, claims: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Several claims in one submit; one result per claim, in order."""
        run = self.run()
        try:
            receipts = run.claim_many(claims)
        except AuthError as exc:  # the HTTP API refused (and recorded) them
            return _refused(exc.reason, str(exc))
        return {"results": [_receipt(r) for r in receipts]}

    def retract(self, claim_id: str, reason: str) -> dict[str, Any]:
        run = self.run()
        try:
            return _receipt(run.retract(claim_id, reason=reason))
        except AuthError as exc:
            return _refused(exc.reason, str(exc))

    def escalate(self, conflict_id: str, reason: str) -> dict[str, Any]:
        refusal = self._check_role("escalate")
        if refusal is not None:
            return refusal
        run = self.run()
        try:
            r = self.graph.escalate(conflict_id, agent=self.identity.agent, reason=reason)
        except AuthError as exc:
            return _refused(exc.reason, str(exc))
        run.tool("escalate_conflict", {"conflict_id": conflict_id, "reason": reason}, _receipt(r))
        return _receipt(r)

    def resolve(self, conflict_id: str, winner: str | None, rationale: str) -> dict[str, Any]:
        refusal = self._check_role("resolve")
        if refusal is not None:
            return refusal
        run = self.run()
        try:
            r = self.graph.resolve(
                conflict_id, agent=self.identity.agent, winner=winner, resolver="agent",
                rationale=rationale, task=run.task,
            )  # fmt: skip
        except AuthError as exc:
            return _refused(exc.reason, str(exc))
        out = _receipt(r)
        run.tool("resolve_conflict", {"conflict_id": conflict_id, "winner": winner}, out)
        return out

    # -- resources -------------------------------------------------------------------------------

    def schema(self) -> dict[str, Any]:
        row = self.graph.schema_info(at=self.run().version)
        if row is None:
            return {"schema": None, "explain": "No graph schema is in force yet."}
        return {
            "revision": row.get("revision"),
            "source": row.get("source"),
            "version": self.run().version,
            "document": row.get("document"),
        }

    def grants(self) -> dict[str, Any]:
        """What this identity may do: its tasks and roles, and the edge types whose writers
        (in the schema in force at the pinned version) match it."""
        from claimgraph.core.schema import parse_schema

        row = self.graph.schema_info(at=self.run().version)
        writable: list[dict[str, Any]] = []
        if row is not None:
            schema = parse_schema(row["document"], row.get("source", "<schema>"))
            for et in schema.edge_types.values():
                tasks = [w.task.text for w in et.writers if w.agent.matches(self.identity.agent)]
                if tasks:
                    writable.append({"edge_type": et.name, "tasks": tasks})
        return {
            "agent": self.identity.agent,
            "identity_from": self.identity.how,
            "tasks": list(self.identity.tasks),
            "roles": sorted(self.identity.roles),
            "session_task": self.task,
            "writable_edge_types": writable,
            "explain": "Run-time grants (grant commands) add to the schema's writers; the "
            "governor decides every write and records a rejection with its reason.",
        }

    # -- helpers ---------------------------------------------------------------------------------

    def _off_run(self, name: str, args: dict[str, Any], at: int, result: Any) -> None:
        """A read at a version other than the pinned one: traced as a tool call (its digest)."""
        self.run().tool(name, {**args, "at": at}, {"digest": digest(result)})

    def _check_role(self, ctype: str) -> dict[str, Any] | None:
        role = _ROLE.get(COMMANDS[ctype].sender)
        if role is None or not self.identity.checked or self.identity.has_role(role[0]):
            return None
        return self._refuse(ctype, role[1], f"{self.identity.agent!r} has no {role[0]} role", "")

    def _refuse(self, ctype: str, reason: Reason, detail: str, task: str) -> dict[str, Any]:
        """Record a refusal as the HTTP API does (a ``refused`` command), and say so."""
        command = {
            "type": "refused",
            "command_id": f"refused-{uuid.uuid4()}",
            "graph": self.graph.name,
            "agent": self.identity.agent,
            "task": task[:200],
            "reason": reason.value,
            "detail": detail[: LIMITS["detail"]],
            "declared_agent": "",
            "refused_type": ctype,
        }
        (rec,) = self.graph.submit([cast(Command, command)])
        out = _refused(reason.value, detail)
        out["version"] = rec.version
        return out


# -- result shapes -------------------------------------------------------------------------------


def _n(t: tuple[str, str]) -> str:
    return f"{t[0]}:{t[1]}"


def _edge(e: EdgeView) -> dict[str, Any]:
    out: dict[str, Any] = {
        "state": e.state,
        "version": e.version,
        "edge": f"{e.edge_type}({_n(e.subject)} -> {_n(e.object)})",
        "conflict_id": e.conflict_id,
        "claims": list(e.claims),
    }
    out["explain"] = _EXPLAIN[e.state].format(v=e.version, c=e.conflict_id)
    if e.fallback is not None:
        out["fallback"] = e.fallback
        out["explain"] += f" Its domain fails safe: act on the fallback value {e.fallback!r}."
    return out


def _slot(s: SlotView) -> dict[str, Any]:
    out: dict[str, Any] = {
        "state": s.state,
        "version": s.version,
        "slot": f"{s.edge_type}({_n(s.node)}, {s.direction})",
        "holds": [_n(n) for n in s.nodes],
        "conflict_id": s.conflict_id,
    }
    if s.state == "present":
        out["explain"] = f"At version {s.version} the slot holds {', '.join(out['holds'])}."
    elif s.state == "absent":
        out["explain"] = f"At version {s.version} the slot is empty."
    else:
        out["explain"] = _EXPLAIN["unknown"].format(v=s.version, c=s.conflict_id)
    if s.fallback is not None:
        out["fallback"] = s.fallback
        out["explain"] += f" Its domain fails safe: act on the fallback value {s.fallback!r}."
    return out


def _neighbor(n: NeighborView) -> dict[str, Any]:
    return {
        "edge_type": n.edge_type,
        "direction": n.direction,
        "node": _n(n.node),
        "state": n.state,
        "conflict_id": n.conflict_id,
        "claims": list(n.claims),
    }


def _claim(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "claim_id": c["claim_id"],
        "agent": c["agent"],
        "task": c["task"],
        "polarity": c["polarity"],
        "edge": f"{c['edge_type']}({c['subject_type']}:{c['subject_id']} -> "
        f"{c['object_type']}:{c['object_id']})",
        "confidence": c["confidence"],
        "evidence": list(c["evidence"]),
        "reasoning": c["reasoning"],
        "based_on_version": c["based_on_version"],
    }


_WRITE_EXPLAIN = {
    "accepted": "Accepted: the claim is in the graph from version {v}.",
    "quarantined": (
        "Quarantined: your claim disagrees with another writer's, so conflict {c} withholds "
        "the edge (reads say unknown) until a resolver decides. Do not retry the same claim; "
        "escalate_conflict('{c}', reason) if it blocks you."
    ),
    "conflicted": "Conflicted: a newer claim holds the slot; yours is recorded, not applied.",
    "rejected": "Rejected ({r}): {d}",
    "retired": "Retired: the claim left the graph at version {v} (older versions still show it).",
    "resolved": "Resolved: conflict {c} is decided at version {v}.",
}


def _receipt(r: Receipt) -> dict[str, Any]:
    d = r.decision
    conflict = d.get("conflict_id")
    text = _WRITE_EXPLAIN.get(d["kind"], "{k} ({r}) at version {v}.")
    return {
        "decision": d["kind"],
        "reason": d["reason"],
        "version": r.version,
        "claim_id": r.command_id,
        "conflict_id": conflict,
        "explain": text.format(v=r.version, c=conflict, r=d["reason"], d=d["detail"], k=d["kind"]),
    }


def _refused(reason: str, detail: str) -> dict[str, Any]:
    return {
        "decision": "refused",
        "reason": reason,
        "explain": f"Refused ({reason}): {detail}. The refusal is recorded in the log; this "
        "identity cannot do this, whatever the arguments.",
    }
