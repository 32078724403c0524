"""One agent's MCP session: who it is (from the transport), the run it names, its tools.

An :class:`AgentSession` is what every MCP tool call of one session goes through, and it is
thin: identity comes from the transport (an HTTP bearer token, ``--token`` on stdio, or on
stdio over an embedded data directory ``--agent``, the trusted local owner's mode), and
every check, limit and run is the service layer's (:class:`~claimgraph.service.access.Scoped`),
the same the HTTP API calls.

Runs are explicit handles. ``start_run`` starts one (held by the service, pinned at head or at
a shared snapshot id) and returns its ``run_id``; every read and write tool takes ``run_id``
to work in it — from this session or any other of the same principal, so a client that opens
a session per call (LangGraph's MCP adapters) keeps its run — and a session remembers the last
run it started, as a convenience. A stdio server started for one run (``claimgraph mcp --task``
or ``--snapshot``) starts it on the first call. A client that never starts a run reads at head,
without a run per call: each result carries its version, which the write tools accept as
``based_on_version``; a quarantined slot such reads meet counts once per (principal,
conflict), so polling is not escalation. A run ends with ``end_run``, or once unused for its
whole lease; closing a session does not end it.

Results are small, self-explaining dicts: a read's ``state`` (present, absent, unknown), the
version it was served at, the conflict id and what to do when unknown; a write's decision,
its reason and version. A refusal (a role or task the identity lacks) is recorded in the log
as a ``refused`` command, as over HTTP, and returned as a result.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from claimgraph.core.queries import QUERIES
from claimgraph.errors import AuthError, ClaimgraphError
from claimgraph.projections.reader import EdgeView, NeighborView, SlotView
from claimgraph.service.access import Access, Principal, Scoped
from claimgraph.service.api import Receipt, node
from claimgraph.service.port import GraphAPI
from claimgraph.service.queries import PathsResult, ReachResult
from claimgraph.service.runs import Run
from claimgraph.service.traces import digest, jsonable
from claimgraph.service.writes import fields_of, spec_of

__all__ = ["AgentSession", "Identity"]

Direction = Literal["out", "in"]
Walk = Literal["out", "in", "both"]
T = TypeVar("T")
Identity = Principal  # what a session acts as: the service layer's principal

_EXPLAIN = {
    "present": "The edge holds at version {v}.",
    "absent": "No claim makes this edge hold at version {v}.",
    "unknown": (
        "Writers disagree: conflict {c} quarantines this at version {v}, so neither value is "
        "readable. Do not act on a guess: call conflicts_near to see the claims, "
        "escalate_conflict('{c}', reason) if a person must decide, or read again later (a "
        "newer version) once it is resolved."
    ),
}


@dataclass
class AgentSession:
    """One MCP session over the service layer: its principal's scoped graph, the run it
    remembers, and the task its writes outside a run carry."""

    scoped: Scoped
    task: str | None = None
    snapshot_id: str | None = None
    one_run: bool = False  # a stdio server started for one run: the first call starts it
    counts_requests: bool = False  # each tool call is a request in flight (stdio)
    _run_id: str | None = field(default=None, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)
    # the digest of the schema this session's last tools/list was typed by ("": none yet);
    # None: it never listed (nothing to tell it when the schema changes)
    listed_schema: str | None = field(default=None, init=False)

    @classmethod
    def over(cls, graph: GraphAPI, principal: Principal, **kw: Any) -> AgentSession:
        """A session over ``graph`` with a service layer of its own (one process, one
        session: stdio, tests)."""
        return cls(Access(graph).of(principal), **kw)

    @property
    def identity(self) -> Principal:
        return self.scoped.principal

    @property
    def graph(self) -> Scoped:
        return self.scoped

    # -- the run ---------------------------------------------------------------------------------

    def run(self, run_id: str | None = None) -> Run | None:
        """The run a call works in: ``run_id``'s (this principal's, held by the service), or
        the one this session remembers, or — for a server started for one run — a fresh one;
        None: the call is outside a run (reads at head)."""
        if run_id:
            return self.scoped.run(run_id)
        with self._lock:
            if self._run_id is not None:
                r = self.scoped.run_of(self._run_id)
                if r is not None:
                    return r
                self._run_id = None  # ended elsewhere, or its lease lapsed
            if not self.one_run:
                return None
            return self._start(self.task, self.snapshot_id)

    def _start(self, task: str | None, snapshot_id: str | None) -> Run:
        r = self.scoped.start_run(task, snapshot_id)
        self._run_id, self.task, self.snapshot_id = r.run_id, r.task, r.snapshot_id
        return r

    def _info(self, r: Run) -> dict[str, Any]:
        return {
            "run_id": r.run_id,
            "agent": r.agent,
            "task": r.task,
            "pinned_version": r.version,
            "snapshot_id": r.snapshot_id,
            "head": self.scoped.head(),
            "explain": (
                f"Reads in run {r.run_id} are served at version {r.version} (pinned) and "
                "traced; writes in it are based on it. Pass run_id to later calls (any "
                "session of yours); share snapshot_id so other agents' runs read the same "
                "version; end_run when done."
            ),
        }

    def run_info(self, run_id: str | None = None) -> dict[str, Any]:
        r = self.run(run_id)
        if r is None:
            head = self.scoped.head()
            return {
                "run_id": None,
                "agent": self.identity.agent,
                "task": self._task_or_none() or "",
                "pinned_version": None,
                "head": head,
                "explain": (
                    f"No run: each read is served at the newest version (now {head}) and says "
                    "which; pass it to a write as based_on_version. start_run pins a version "
                    "and traces your reads and writes in a run you name by its run_id."
                ),
            }
        return self._info(r)

    def start_run(self, task: str | None = None, snapshot_id: str | None = None) -> dict[str, Any]:
        """End the run this session remembers (if any) and start a fresh one at head or at
        ``snapshot_id``; the answer's ``run_id`` is its handle."""
        with self._lock:
            want = self.task if task is None else task
            try:
                r = self.scoped.start_run(want, snapshot_id)
            except AuthError as exc:
                return _refused(exc.reason, exc.detail, exc.version)
            old, self._run_id = self._run_id, r.run_id
            self.task, self.snapshot_id = r.task, r.snapshot_id
        if old is not None:
            with contextlib.suppress(ClaimgraphError):  # ended elsewhere meanwhile
                self.scoped.end_run(old, "restarted")
        return self._info(r)

    def end_run(self, status: str = "ok", run_id: str | None = None) -> dict[str, Any]:
        """End ``run_id`` (or the run this session remembers): its trace is closed and its
        pin released."""
        with self._lock:
            target = run_id or self._run_id
            if target is None:
                return {"ended": None, "explain": "No run was open: nothing to end."}
            r = self.scoped.end_run(target, status)
            if target == self._run_id:
                self._run_id = None
        return {
            "ended": r.run_id,
            "pinned_version": r.version,
            "status": status,
            "explain": f"Run {r.run_id} ended; replay it with: claimgraph runs replay {r.run_id}.",
        }

    def close(self) -> None:
        """The session ends. A server started for one run ends that run with it; any other
        run stays, for its principal to name from another session, until ``end_run`` or its
        lease lapses."""
        if not self.one_run or self._run_id is None:
            return
        with contextlib.suppress(ClaimgraphError):  # the graph is away: the pin lapses
            self.scoped.end_run(self._run_id, "session closed")

    # -- reads -----------------------------------------------------------------------------------

    def _read(
        self,
        run_id: str | None,
        at: int | None,
        in_run: Callable[[Run], T],
        at_version: Callable[[int | None], T],
        name: str,
        args: dict[str, Any],
    ) -> T:
        """A read in the call's run (at its pinned version, traced), at another version
        ``at`` while in a run (traced as a tool call), or outside a run."""
        run = self.run(run_id)
        if run is None:
            s = self.scoped
            return s.within(None, lambda r: in_run(r), lambda: at_version(at))
        if at is None or at == run.version:
            return in_run(run)
        with self.scoped.in_client_run():  # not the run's read: not its blocked read either
            out = at_version(at)
        run.tool(name, {**args, "at": at}, {"digest": digest(out)})
        return out

    def read(
        self, query: str, params: dict[str, Any], at: int | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        """A catalogued read as the MCP tool the catalogue names for it answers it: in the
        call's run (traced), at ``at``, or at head; shaped for an agent (:data:`_SHAPES`)."""
        spec = QUERIES[query]
        version, out = self._read(
            run_id, at,
            lambda r: (r.version, r.read(query, **params)),
            lambda v: self._at_version(v, lambda x: self.scoped.read(query, **params, at=x)),
            spec.mcp, params,
        )  # fmt: skip
        shape = _SHAPES.get(query)
        if shape is None:  # a read with no shape of its own: its answer, with the version
            return {"version": version, "result": jsonable(out)}
        return shape(out, version, params)

    def read_edge(
        self,
        edge_type: str,
        subject: str,
        obj: str,
        at: int | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        """``read_edge``: one edge (the generic :meth:`read`)."""
        return self.read(
            "edge", {"edge_type": edge_type, "subject": subject, "obj": obj}, at, run_id
        )

    def read_edges(
        self, edges: Sequence[dict[str, str]], at: int | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        """Several edges in one read at one version, in order; in a run each is traced as
        its own edge read (replay checks each)."""
        wanted = [(e["edge_type"], e["subject"], e["object"]) for e in edges]
        self.scoped.bound(len(wanted), "edges")
        v, out = self._read(
            run_id, at,
            lambda r: (r.version, r.read_edges(wanted)),
            lambda v: self._at_version(v, lambda x: self.scoped.read_edges(wanted, at=x)),
            "read_edges", {"edges": [list(w) for w in wanted]},
        )  # fmt: skip
        return {"version": v, "edges": [_edge(e) for e in out]}

    def _at_version(self, at: int | None, read: Callable[[int], T]) -> tuple[int, T]:
        v = self.scoped.head() if at is None else at
        return v, read(v)

    def conflicts_near(
        self, node_: str, include_escalated: bool = True, run_id: str | None = None
    ) -> dict[str, Any]:
        """Open conflicts whose claims touch ``node_`` (in a run: as of its pinned version,
        traced; else at head)."""
        run = self.run(run_id)
        g: Any = run if run is not None else self.scoped
        version = run.version if run is not None else self.scoped.head()
        at: dict[str, Any] = {} if run is not None else {"at": version}
        want = node(node_)
        out: list[dict[str, Any]] = []
        for c in g.quarantine(**at):
            escalated = c.get("escalated_at") is not None
            if escalated and not include_escalated:
                continue
            claims = [g.claim_info(cid, **at) for cid in c.get("claims", [])]
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
            "version": version,
            "conflicts": out,
            "explain": (
                f"{len(out)} open conflict(s) around {node_} at version {version}. "
                "Their edges read unknown until a resolver decides; escalate_conflict hands one "
                "to a person with all the claims and evidence."
                if out
                else f"No open conflict touches {node_} at version {version}."
            ),
        }

    # -- writes ----------------------------------------------------------------------------------

    def _task_or_none(self) -> str | None:
        """The task writes outside a run carry: the session's, or the identity's one literal
        task; None when the identity acts only in tasks it must choose among (patterns)."""
        task = self.identity.default_task if self.task is None else self.task
        if self.identity.checked and not self.identity.may_act_in(task):
            return None
        return task

    def _needs_task(self) -> dict[str, Any]:
        tasks = ", ".join(self.identity.tasks)
        return {
            "decision": "needs_task",
            "reason": "task_not_chosen",
            "explain": (
                f"{self.identity.agent!r} acts only in tasks {tasks}: call "
                "start_run(task=...) with a task they match, then write in that run (pass its "
                "run_id). Nothing was written."
            ),
        }

    def _write(
        self, run_id: str | None, in_run: Callable[[Run], T], outside: Callable[[str], T]
    ) -> T | dict[str, Any]:
        run = self.run(run_id)
        if run is not None:
            return in_run(run)
        task = self._task_or_none()
        if task is None:
            return self._needs_task()
        return outside(task)

    def write(
        self, name: str, params: Mapping[str, Any], run_id: str | None = None
    ) -> dict[str, Any]:
        """A write tool's call: the catalogued write ``name`` (its tool parameters by their
        Python keywords, plus what the tool fixes) as this session's agent. A write that has a
        run (claim, retract) is written in the run, traced, or outside one in the session's
        task (or answers ``needs_task``); the others (resolve, escalate) are the graph's, in the
        run's task when there is one, and recorded in its trace as a tool call."""
        spec = spec_of(name)
        kw = dict(params) | {spec.param(k).keyword: v for k, v in spec.mcp_fixed.items()}
        agent, run = self.identity.agent, self.run(run_id)
        try:
            if spec.run:
                r = self._write(
                    run_id,
                    lambda run: run.write(name, **kw),
                    lambda task: self.scoped.write(name, agent=agent, task=task, **kw),
                )
            else:
                if spec.task:
                    kw["task"] = run.task if run is not None else (self._task_or_none() or "")
                r = self.scoped.write(name, agent=agent, **kw)
        except AuthError as exc:  # a served API refused (and recorded) it
            return _refused(exc.reason, exc.detail, exc.version)
        if isinstance(r, dict):
            return r
        out = _receipt(r)
        if run is not None and not spec.run:
            run.tool(spec.mcp or spec.name, dict(params), out)
        return out

    def write_claims(
        self, claims: Sequence[dict[str, Any]], run_id: str | None = None
    ) -> dict[str, Any]:
        """Several claims in one submit; one result per claim, in order (each item by the
        claim parameters' catalogue names)."""
        self.scoped.bound(len(claims), "claims")
        spec = spec_of("claim")
        items = [{k: v for k, v in c.items() if v is not None} for c in claims]
        agent = self.identity.agent

        def command(task: str, c: dict[str, Any]) -> Any:
            own = {spec.param(k).keyword: v for k, v in c.items()}
            return {"type": "claim", "agent": agent, "task": task, **fields_of(spec, own)}

        try:
            rs = self._write(
                run_id,
                lambda run: run.claim_many(items),
                lambda task: self.scoped.submit([command(task, c) for c in items]),
            )
        except AuthError as exc:
            return _refused(exc.reason, exc.detail, exc.version)
        if isinstance(rs, dict):
            return rs
        return {"results": [_receipt(r) for r in rs]}

    # -- resources -------------------------------------------------------------------------------

    def read_version(self) -> int:
        """The version this session reads at: its run's pinned one, else head."""
        run = self.run()
        return run.version if run is not None else self.scoped.head()

    def schema(self) -> dict[str, Any]:
        v = self.read_version()
        row = self.scoped.schema_info(at=v)
        if row is None:
            return {"schema": None, "explain": "No graph schema is in force yet."}
        return {
            "revision": row.get("revision"),
            "source": row.get("source"),
            "version": v,
            "document": row.get("document"),
        }

    def grants(self) -> dict[str, Any]:
        """What this identity may do: its tasks and roles, and the edge types whose writers
        (in the schema in force) match it."""
        from claimgraph.core.schema import parse_schema

        row = self.scoped.schema_info(at=self.read_version())
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
            "session_task": self._task_or_none(),
            "writable_edge_types": writable,
            "explain": "Run-time grants (grant commands) add to the schema's writers; the "
            "governor decides every write and records a rejection with its reason."
            + (
                ""
                if self._task_or_none() is not None
                else " You act only in tasks you must choose: call start_run(task=...) first."
            ),
        }


def _n(t: tuple[str, str]) -> str:
    return f"{t[0]}:{t[1]}"


def _neighbors(ns: list[NeighborView], version: int, params: dict[str, Any]) -> dict[str, Any]:
    unknown = [n for n in ns if n.state == "unknown"]
    return {
        "node": params["node"],
        "version": version,
        "neighbors": [_neighbor(n) for n in ns],
        "explain": f"{len(ns)} neighbours at version {version}"
        + (
            f"; {len(unknown)} unknown (quarantined: see conflict_id, do not act on them)"
            if unknown
            else "."
        ),
    }


def _paths(res: PathsResult, version: int, params: dict[str, Any]) -> dict[str, Any]:
    out = res.as_dict()
    certain = sum(1 for p in res.paths if p.state == "present")
    out["explain"] = (
        f"{len(res.paths)} path(s) of at most {res.max_hops} hops at version {res.version}; "
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


def _reach(res: ReachResult, version: int, params: dict[str, Any]) -> dict[str, Any]:
    out = res.as_dict()
    unsure = sum(1 for n in res.nodes if not n.certain)
    out["explain"] = (
        f"{len(res.nodes)} node(s) within {res.max_hops} hops at version {res.version}"
        + (f"; {unsure} reached only through quarantined edges (certain: false)" if unsure else "")
        + (f"; cut short by the {res.truncated_by} limit" if res.truncated else "")
        + "."
    )
    return out


# how each read an MCP tool serves is shaped for an agent: (result, version, params) → answer
_SHAPES: dict[str, Callable[[Any, int, dict[str, Any]], dict[str, Any]]] = {
    "edge": lambda e, v, p: _edge(e),
    "slot": lambda s, v, p: _slot(s),
    "neighbors": _neighbors,
    "paths": _paths,
    "reach": _reach,
}


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
    if r.refused:  # the service refused it (a role or task): recorded, with its version
        return _refused(d["reason"], d["detail"], r.version)
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


def _refused(reason: str, detail: str, version: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "decision": "refused",
        "reason": reason,
        "explain": f"Refused ({reason}): {detail}. The refusal is recorded in the log; this "
        "identity cannot do this, whatever the arguments.",
    }
    if version is not None:
        out["version"] = version
    return out
