"""A principal's view of the graph: every write admitted, every read accounted (see
:mod:`claimgraph.service.access`, which makes one per principal and holds its runs)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from claimgraph.core.commands import COMMANDS, Sender
from claimgraph.core.model import LIMITS, Command, Reason
from claimgraph.core.wire import encode_command
from claimgraph.errors import (
    AuthError,
    ClaimgraphError,
    InputError,
    LimitError,
    NotFoundError,
    UnknownSlotError,
)
from claimgraph.logconf import events
from claimgraph.service.api import GraphWrites, NodeLike, Receipt
from claimgraph.service.api import node as _as_node
from claimgraph.service.inputs import require_domain
from claimgraph.service.principals import STATUS, Principal, clean
from claimgraph.service.runs import Run, Snapshot, hold_remote_pins, pins_of
from claimgraph.service.traces import check_event, encode_events

if TYPE_CHECKING:
    from claimgraph.projections.reader import EdgeView, NeighborView, SlotView
    from claimgraph.service.access import Access
    from claimgraph.service.queries import PathsResult, ReachResult
    from claimgraph.service.reads import EdgeRef

__all__ = ["CLIENT", "Scoped", "may_send", "role_for"]

T = TypeVar("T")
_log = events("access")

_ROLE = {
    Sender.ADMIN: ("admin", Reason.NOT_ADMIN),
    Sender.RESOLVER: ("resolver", Reason.NOT_RESOLVER),
}
_BY = {Sender.TICKER: "the ticker", Sender.INGRESS: "the system"}


def role_for(ctype: str) -> str | None:
    """The role a principal needs to send a client command of type ``ctype`` (None: none)."""
    role = _ROLE.get(COMMANDS[ctype].sender)
    return None if role is None else role[0]


def may_send(p: Principal, ctype: str) -> bool:
    """Whether ``p``'s roles let it send ``ctype`` (what :meth:`Scoped.command` checks; a
    local owner, trusted, may send every client command): the tools and commands offered to
    a principal are these, so nobody is shown what would only be refused."""
    role = role_for(ctype)
    return COMMANDS[ctype].client and (role is None or p.how == "local-owner" or p.has_role(role))


class CLIENT:
    """Reads attributed to a run a remote client holds (it reports its own blocked reads)."""


class _Pins:
    """A pin registry as one principal may use it: at most ``limit`` live pins of its own."""

    def __init__(self, registry: Any, holder: str, limit: int) -> None:
        self._registry, self._holder, self._limit = registry, holder, limit

    def pin(self, version: int, *, owner: str, lease: float, holder: str = "") -> Any:
        return self._registry.pin(
            version, owner=owner, lease=lease, holder=self._holder, limit=self._limit
        )

    def renew(self, pin_id: str, lease: float) -> Any:
        return self._registry.renew(pin_id, lease)

    def unpin(self, pin_id: str) -> Any:
        return self._registry.unpin(pin_id)


class Scoped(GraphWrites):
    """The graph as one principal may use it: every write admitted, every read accounted.

    The command builders of :class:`~claimgraph.service.api.GraphWrites` (``claim``,
    ``resolve``, ...; ``agent`` and ``task`` default to the principal's), ``submit``, the
    reads that can meet a quarantine, and the principal's runs. Runs started here are ordinary
    :class:`~claimgraph.service.runs.Run` objects over this scoped graph, so their writes,
    trace and pin meet the same checks and limits as everything else.
    """

    signer = None  # the service signs (Access.signer); runs must hand it plain commands

    def __init__(self, access: Access, principal: Principal) -> None:
        self.access = access
        self.principal = principal
        self.default_agent = principal.agent
        self.graph = access.graph
        self.name = access.graph.name
        self.limits = access.limits
        self._blocked: dict[tuple[str, str], set[str]] = {}
        self._pending: list[tuple[str, int]] = []
        self._mu = threading.Lock()
        self._local = threading.local()

    @property
    def _counts_outside(self) -> bool:
        return self.principal.how != "server"  # a served API counts its own reads

    # -- writes -------------------------------------------------------------------------------

    def command(
        self,
        ctype: str,
        fields: dict[str, Any],
        *,
        declared: str | None = None,
        task: str | None = None,
        command_id: str | None = None,
        where: str = "",
    ) -> Command:
        """The command ``fields`` make as this principal, or the ``refused`` record of it.

        Refusals (a declared agent not the principal's, a task or role it lacks, a type only
        the system writes) come back as a ``refused`` command, to be recorded like any other;
        a field outside its declared domain raises :class:`InputError` (nothing recorded).
        """
        p = self.principal
        spec = COMMANDS.get(ctype)
        if spec is None:
            raise InputError(f"{where}unknown command type {clean(str(ctype), 40)!r}")
        task = (p.default_task if p.checked else "") if task is None else task
        if p.checked:
            if not spec.client:
                by = _BY.get(spec.sender, "the system")
                detail = f"{ctype} is written by {by}, never by a client"
                return self._refused(ctype, Reason.SYSTEM_ONLY, detail, declared, "")
            if declared is not None and declared != p.agent:
                return self._refused(
                    ctype,
                    Reason.AGENT_MISMATCH,
                    f"the token belongs to {p.agent!r}; it may not act as {clean(declared, 80)!r}",
                    declared,
                    task,
                )
            role = _ROLE.get(spec.sender)
            if role is not None and not p.has_role(role[0]):
                detail = f"{p.agent!r} has no {role[0]} role"
                return self._refused(ctype, role[1], detail, declared, task)
            # a writer's task is its authority; a resolver's, admin's or reader's command
            # without one acts in no task
            untasked = not task and spec.sender not in (Sender.WRITER, Sender.OWNER)
            if not untasked and not p.may_act_in(task):
                return self._refused(
                    ctype,
                    Reason.TASK_NOT_ALLOWED,
                    f"{p.agent!r} may act in tasks {', '.join(p.tasks)}, not {clean(task, 80)!r}",
                    declared,
                    task,
                )
        agent = p.agent if p.checked or declared is None else declared
        command = cast(
            Command,
            {
                "type": ctype,
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": task,
                **fields,
            },
        )
        require_domain(command, where)  # 422, nothing recorded: the catalogue's bounds
        return command

    def _refused(
        self, ctype: str, reason: Reason, detail: str, declared: str | None, task: str
    ) -> Command:
        return cast(
            Command,
            {
                "type": "refused",
                "command_id": f"refused-{uuid.uuid4()}",
                "graph": self.name,
                "agent": self.principal.agent,
                "task": clean(task),
                "reason": reason.value,
                "detail": detail[: LIMITS["detail"]],
                "declared_agent": clean(declared or ""),
                "refused_type": clean(ctype),
            },
        )

    def refuse(self, ctype: str, reason: Reason, detail: str, task: str = "") -> AuthError:
        """Record a refusal of something that is not a command (a run start) and return the
        error to raise: it carries the refusal's version and decision."""
        (rec,) = self.record([self._refused(ctype, reason, detail, None, task)])
        return AuthError(reason.value, detail, version=rec.version, decision=dict(rec.decision))

    def bound(self, n: int, what: str = "commands") -> None:
        """``max_batch``: more than that many commands (or edges) in one request or tool call
        is refused whole (413), before any of them is looked at."""
        if n > self.limits.max_batch:
            raise LimitError(
                "too_large",
                "--max-batch",
                f"{n} {what} in one request; at most {self.limits.max_batch}",
            )

    def admit(self, commands: Sequence[Command | bytes], where: str = "") -> list[Command]:
        """Built commands (from a run, a batch, the SDK's builders) checked as this principal:
        each comes back as itself or as its ``refused`` record. More than ``max_batch`` at
        once is refused whole (413, nothing recorded)."""
        self.bound(len(commands), "commands")
        out: list[Command] = []
        for i, c in enumerate(commands):
            at = f"{where}commands[{i}]: " if len(commands) > 1 else where
            if isinstance(c, bytes | bytearray):
                if self.principal.checked:
                    raise InputError(
                        f"{at}signed records go to the commands log directly; a principal "
                        "sends commands, and the ingress signs them"
                    )
                out.append(cast(Command, bytes(c)))
                continue
            d = dict(cast(dict[str, Any], c))
            ctype = d.pop("type", "claim")
            d.pop("graph", None)
            declared, task, cid = (
                d.pop("agent", None),
                d.pop("task", None),
                d.pop("command_id", None),
            )
            out.append(
                self.command(ctype, d, declared=declared, task=task, command_id=cid, where=at)
            )
        return out

    def submit(self, commands: Sequence[Command | bytes], where: str = "") -> list[Receipt]:
        """Admit and send commands; one receipt each, in order (a refusal's receipt is its
        recorded ``refused`` decision: :attr:`Receipt.refused`)."""
        return self.record(self.admit(commands, where))

    def record(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Send commands this scoped graph built (:meth:`command`, :meth:`admit`): encoded,
        signed when the service signs, decided in order in one write."""
        if not commands:
            return []
        if self.principal.how == "server":  # a served API: it admits, signs and records
            return self.graph.submit(commands)
        records = [self._encode(c) for c in commands]
        return self.graph.submit(records)

    def _encode(self, command: Command | bytes) -> bytes:
        if isinstance(command, bytes | bytearray):
            return bytes(command)
        try:
            data = encode_command(command)
        except (TypeError, ValueError, OverflowError) as exc:  # e.g. text with lone surrogates
            raise InputError(f"cannot encode the command: {exc}") from None
        signer = self.access.signer
        return signer.sign(data) if signer is not None else data

    def _send(
        self,
        kind: str,
        agent: str | None,
        task: str | None,
        command_id: str | None,
        fields: dict[str, Any],
    ) -> Receipt:
        command = {"type": kind, "agent": agent, "task": task, "command_id": command_id}
        return self.submit([cast(Command, {**command, **fields})])[0]

    def _one(self, command: Command) -> Receipt:
        return self.submit([command])[0]

    # -- reads that can meet a quarantine -----------------------------------------------------

    @property
    def blocked_run(self) -> Any:
        """The run this thread's reads are attributed to (set by runs while they read)."""
        return getattr(self._local, "run", None)

    @blocked_run.setter
    def blocked_run(self, run: Any) -> None:
        self._local.run = run
        if self.principal.how == "server":  # a served API: its reads must name the run too
            self.graph.blocked_run = None if run is CLIENT else run

    @contextmanager
    def in_client_run(self) -> Iterator[None]:
        """Reads of a run a remote client holds: it reports their blocked reads itself."""
        before, self.blocked_run = self.blocked_run, CLIENT
        try:
            yield
        finally:
            self.blocked_run = before

    def _note(self, conflict_id: str | None, query: str, version: int) -> None:
        if not conflict_id:
            return
        run = self.blocked_run
        if run is CLIENT:
            return
        if run is not None:
            with self._mu:
                self._blocked.setdefault((run, conflict_id), set()).add(query)
        elif self._counts_outside and self.access._first_time(self.principal.agent, conflict_id):
            with self._mu:
                self._pending.append((conflict_id, version))

    def flush_blocked(
        self,
        *,
        agent: str = "",
        run: str | None = None,
        pinned: int | None = None,
        task: str = "",
    ) -> list[Receipt]:
        """Report a run's blocked reads (one ``read_blocked`` per conflict it met), as the
        run's principal in the run's task."""
        with self._mu:
            mine = sorted(k for k in self._blocked if run is None or k[0] == run)
            counts = [(k, len(self._blocked.pop(k))) for k in mine]
        return [
            self.read_blocked(
                cid, n, agent=self.principal.agent, run_id=r, pinned_version=pinned, task=task
            )
            for (r, cid), n in counts
        ]

    def pending_reports(self) -> bool:
        """Whether reads outside a run met a conflict not yet reported."""
        return bool(self._pending)

    def report_blocked(self) -> list[Receipt]:
        """Report the blocked reads met outside a run: one ``read_blocked`` without a run per
        (principal, conflict), at the version read (the service's own record of what it
        served, so it is not a request of the principal's to admit)."""
        with self._mu:
            pending, self._pending = self._pending, []
        out = []
        for cid, v in pending:
            try:
                out.append(
                    self.graph.read_blocked(
                        cid, 1, agent=self.principal.agent, run_id=None, pinned_version=v
                    )
                )
            except ClaimgraphError as exc:  # the read stands; the next one reports it again
                self.access._forget(self.principal.agent, cid)
                _log.warning("access.blocked_not_reported", conflict=cid, error=str(exc)[:300])
        return out

    def within(self, run_id: str | None, in_run: Callable[[Run], T], outside: Callable[[], T]) -> T:
        """A read in the run ``run_id`` names (``in_run``), or outside a run (``outside``),
        synchronously: a run held here for this principal serves it at its pinned version; a
        run id not held here is the client's own run (it reports its blocked reads); without
        one, a blocked read is reported before this returns."""
        run = self.run_of(run_id) if run_id else None
        if run is not None:
            return in_run(run)
        if run_id:
            with self.in_client_run():
                return outside()
        out = outside()
        self.report_blocked()
        return out

    def _at(self, at: int | None, timeout: float) -> int:
        if at is None:
            return self.graph.head()
        if timeout > 0 and at > self.graph.head():
            with self.waiting():
                self.graph.wait_for(at, min(timeout, self.limits.max_wait))
        return at

    def waiting(self) -> AbstractContextManager[None]:
        """One of the principal's reads waiting for a version (``max_waits``; 429 past it)."""
        p = self.principal
        return self.access.waits.hold(p.agent, repr(p.agent))

    def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> EdgeView:
        v = self._at(at, timeout)
        q = f"edge {edge_type} {_as_node(subject)} {_as_node(obj)}"
        try:
            e = self.graph.edge(edge_type, subject, obj, at=v)
        except UnknownSlotError as exc:  # a halted read is a blocked read too
            self._note(exc.conflict_id, q, v)
            raise
        if e.state == "unknown":
            self._note(e.conflict_id, q, v)
        return e

    def read_edges(
        self, edges: Sequence[EdgeRef], *, at: int | None = None, timeout: float = 0.0
    ) -> list[EdgeView]:
        from claimgraph.service.reads import edge_refs

        wanted = edge_refs(edges)
        self.bound(len(wanted), "edges")
        v = self._at(at, timeout)
        return [self.edge(t, s, o, at=v) for t, s, o in wanted]

    def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: Literal["out", "in"] = "out",
        at: int | None = None,
        timeout: float = 0.0,
    ) -> SlotView:
        v = self._at(at, timeout)
        q = f"slot {edge_type} {_as_node(node)} {direction}"
        try:
            s = self.graph.slot(edge_type, node, direction=direction, at=v)
        except UnknownSlotError as exc:  # a halted read is a blocked read too
            self._note(exc.conflict_id, q, v)
            raise
        if s.state == "unknown":
            self._note(s.conflict_id, q, v)
        return s

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: Literal["out", "in"] = "out",
        at: int | None = None,
        timeout: float = 0.0,
        include_absent: bool = False,
        **filters: Any,
    ) -> list[NeighborView]:
        v = self._at(at, timeout)
        q = f"neighbors {_as_node(node)} {edge_type} {direction}"
        try:
            ns = self.graph.neighbors(
                node,
                edge_type=edge_type,
                direction=direction,
                at=v,
                include_absent=include_absent,
                **filters,
            )
        except UnknownSlotError as exc:  # a halted read is a blocked read too
            self._note(exc.conflict_id, q, v)
            raise
        for n in ns:
            if n.state == "unknown":
                self._note(n.conflict_id, q, v)
        return ns

    def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
        **kw: Any,
    ) -> PathsResult:
        v = self._at(at, timeout)
        res: PathsResult = self.graph.paths(src, dst, at=v, **kw)
        for h in res.unknown:
            self._note(h.conflict_id, f"paths {h.edge_type} {h.subject} {h.object}", v)
        return res

    def reach(
        self, node: NodeLike, *, at: int | None = None, timeout: float = 0.0, **kw: Any
    ) -> ReachResult:
        v = self._at(at, timeout)
        res: ReachResult = self.graph.reach(node, at=v, **kw)
        for h in res.unknown:
            self._note(h.conflict_id, f"reach {h.edge_type} {h.subject} {h.object}", v)
        return res

    def read(self, query: str, /, **params: Any) -> Any:
        """Any catalogued read as this principal: the reads that can meet a quarantine
        (``in_run``) accounted here, every other one the graph's own."""
        from claimgraph.service.reads import catalogued

        spec = catalogued(query, params)
        if spec.in_run:
            return getattr(self, spec.name)(**params)
        return self.graph.read(spec.name, **params)

    def head(self) -> int:
        return self.graph.head()

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        return self.graph.wait_for(version, timeout)

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return self.graph.run_events(run_id)

    def close(self) -> None:
        """Nothing to close: the graph is the service's, not the principal's."""

    def __getattr__(self, name: str) -> Any:
        # every other read (history, claims, conflicts, schema, runs, ...) is the graph's own:
        # none of them meets a quarantine or costs more than one request
        if name not in _READS:
            raise AttributeError(name)
        return getattr(self.graph, name)

    @property
    def pins(self) -> _Pins | None:
        """The graph's pin registry, at most ``max_pins`` live pins of this principal's."""
        registry = pins_of(self.graph)
        if registry is None:
            return None
        return _Pins(registry, self.principal.agent, self.limits.max_pins)

    # -- the runs of this principal -----------------------------------------------------------

    def start_run(
        self,
        task: str | None = None,
        snapshot_id: str | None = None,
        *,
        lease: float | None = None,
    ) -> Run:
        """Start a run held here, pinned at head or at a shared snapshot; its ``run_id`` is
        the handle later calls name. A task the principal may not act in is refused (and
        recorded); past ``max_pins`` live runs, 429."""
        p = self.principal
        want = p.default_task if task is None else task
        if p.checked and not p.may_act_in(want):
            raise self.refuse(
                "start_run",
                Reason.TASK_NOT_ALLOWED,
                f"{p.agent!r} may act in tasks {', '.join(p.tasks)}, not {clean(want, 80)!r}",
                want,
            )
        if len(want) > LIMITS["id"] or not want.isprintable():
            raise InputError(f"task must be at most {LIMITS['id']} printable characters")
        self.access.sweep()
        held = self.access.live_runs(p.agent)
        if pins_of(self.graph) is None and len(held) >= self.limits.max_pins:
            raise LimitError(
                "too_many",
                "--max-pins",
                f"{p.agent!r} holds {len(held)} live runs; at most {self.limits.max_pins} "
                "(end runs, or let their leases lapse)",
                429,
            )
        lease = self.access.lease if lease is None else lease
        if snapshot_id:
            snap = Snapshot(self._snapshot_version(snapshot_id), snapshot_id)
        else:
            snap = Snapshot(self.graph.head())  # a fresh id other runs can join
        run = Run(self, agent=p.agent, task=want, snapshot=snap, lease=lease)
        self.access._hold(p.agent, run, lease)
        return run

    def _snapshot_version(self, snapshot_id: str) -> int:
        for s in self.graph.runs():
            if s.snapshot_id == snapshot_id:
                return int(s.pinned_version)
        raise NotFoundError(
            f"no run in the runs log has snapshot id {clean(snapshot_id, 80)!r}: a snapshot id "
            "is the snapshot_id of a run (start_run returns it)"
        )

    def run_of(self, run_id: str) -> Run | None:
        """The run ``run_id`` if this process holds it for this principal (its pin's lease is
        kept at least 90% long); None if it holds no such run; 403 if another principal's."""
        h = self.access._held(run_id)
        if h is None:
            return None
        if h.agent != self.principal.agent:
            raise AuthError(
                "not_run_owner",
                f"run {clean(run_id, 80)!r} belongs to another principal; only the principal "
                "that started a run may use it",
            )
        now = self.access.now()
        h.used = now
        if now - h.renewed >= h.lease / 10:
            h.run.renew(h.lease)
            h.renewed = now
        if len(h.run._pending) >= 64:  # reads reach the runs log in batches
            h.run.flush()
        return h.run

    def run(self, run_id: str) -> Run:
        """The run ``run_id`` (held here, this principal's) or NotFoundError."""
        r = self.run_of(run_id)
        if r is None:
            raise NotFoundError(
                f"no live run {clean(run_id, 80)!r} here: start_run returns a run id (a run "
                "ends with end_run, or once unused for its whole lease)"
            )
        return r

    def end_run(self, run_id: str, status: str = "ok") -> Run:
        """End a run held here: its blocked reads are reported, its trace closed, its pin
        released. ``status`` is at most :data:`STATUS` characters."""
        if len(status) > STATUS:
            raise InputError(f"status has {len(status)} characters; at most {STATUS} allowed")
        r = self.run(run_id)
        self.access._drop(run_id)
        r.close(status)
        return r

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """The trace of a run held here: counted against its limits, then appended."""
        self.access.tally.charge(self.principal.agent, list(events))
        self.graph.append_run_events(events)

    def append_client_events(self, events: Sequence[dict[str, Any]]) -> int:
        """Trace events of runs a remote client holds (the SDK over HTTP, a CLI beside the
        writer): each must be the principal's, within ``max_run_events`` per request and the
        per-run limits; a start pins its version (``max_pins``), an end releases it. Past a
        bound the whole request is refused and nothing of it appended or pinned."""
        from claimgraph.service.bounded import InputLimits, loads
        from claimgraph.service.limits import RUN_EVENT_PAYLOAD

        p, lim = self.principal, self.limits
        if len(events) > lim.max_run_events:
            raise LimitError(
                "too_large",
                "--max-run-events",
                f"{len(events)} trace events in one request; at most {lim.max_run_events}",
            )
        bounds = InputLimits(max_line=4 * RUN_EVENT_PAYLOAD, max_depth=lim.max_depth)
        out = []
        for e in events:
            ev = dict(e)
            declared = ev.get("agent")
            if p.checked and declared is not None and declared != p.agent:
                raise AuthError(
                    Reason.AGENT_MISMATCH.value,
                    f"the token belongs to {p.agent!r}, not to {clean(str(declared), 80)!r}",
                )
            if p.checked or declared is None:
                ev["agent"] = p.agent
            ev["graph"] = self.name
            payload = ev.get("payload")
            if isinstance(payload, str):
                loads(payload.encode("utf-8", "surrogatepass"), bounds)
            check_event(ev)
            held = self.access._held(str(ev["run_id"]))
            if held is not None:
                raise InputError(
                    f"run {clean(str(ev['run_id']), 80)!r} is held by this server: its trace "
                    "is written by the server"
                )
            out.append(ev)
        try:
            encode_events(out)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot encode the events: {exc}") from None
        self.access.tally.charge(p.agent, out)
        # pins first: a start at a pruned version, or past max_pins, fails the request whole
        hold_remote_pins(self.graph, out, p.agent, lim.max_pins)
        self.graph.append_run_events(out)
        return len(out)


# the graph's reads that meet no quarantine and cost one request: a scoped graph passes them on
_READS = frozenset(
    {
        "head", "wait_for", "history", "quarantine", "claim_info", "conflict", "schema_info",
        "runs", "run_events", "replay_run", "escalation", "escalations", "calibration",
        "decisions", "edges", "horizon", "snapshot", "wait",
    }
)  # fmt: skip
