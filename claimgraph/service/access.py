"""Checks beneath the transports: who calls, what it may do, what it may cost — once.

Every authenticated surface — the HTTP API, MCP over streamable HTTP and over stdio, the
writer socket — does two things of its own: it *authenticates* (a bearer token, the process's
``--token`` or ``--agent``, the socket peer's uid) and it *maps errors* to its own vocabulary
(problem+json, a tool result, an error frame). Everything between is here, so the same input
meets the same check at the same threshold whichever way it comes:

* **principal resolution** — :meth:`Access.authenticate` turns a token into a
  :class:`Principal` or refuses with 401 *before any per-item work*, recording nothing (an
  unauthenticated request is not a way to grow the log);
* **roles and task scope** — :meth:`Scoped.command` builds a command as its principal: a
  declared agent that is not the principal's, a task it may not act in, a role it lacks or a
  command type only the system writes becomes a recorded ``refused`` command (the governor
  rejects it with the same reason), so refusals are part of the history;
* **strict types and sizes** — every field is checked against its declared domain
  (:func:`~claimgraph.service.inputs.require_domain`) before anything is recorded;
* **per-principal limits** (:class:`~claimgraph.service.limits.Limits`) — requests in flight
  (:meth:`Access.request`), reads waiting for a version, commands in one request, trace
  events and bytes per run, live pins (every run's, whether this process holds it or a
  remote client does);
* **runs as explicit handles** — :meth:`Scoped.start_run` starts a run this process holds and
  returns it; its ``run_id`` is the handle later calls name (:meth:`Scoped.run_of`), from any
  surface and any transport session, and only its principal may use it. A run ends when
  :meth:`Scoped.end_run` ends it, or once it is unused for a whole lease (its pin has lapsed
  by then): nothing here knows of a transport session;
* **blocked reads** — a read that meets a quarantined slot inside a run counts for that run
  (reported when it ends); outside an explicit run it counts once per (principal, conflict)
  (rules revision 5), so an agent polling a quarantined slot is not an escalation.

A principal proved by a token is checked here (``Principal.checked``). The trusted local
owner (``--agent`` over a data directory, the writer socket's peer of the same uid) is not:
whoever can open the data directory owns the graph, and the governor judges its commands. A
graph behind a served HTTP API (``claimgraph mcp --url``) is checked by that server, which
counts its reads too.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from claimgraph.core.model import Reason
from claimgraph.errors import AuthError, ClaimgraphError
from claimgraph.logconf import events
from claimgraph.service.limits import DEFAULT_LIMITS, Limits, RunTally, Slots
from claimgraph.service.principals import HOW, ROLES, STATUS, Principal, Resolve, clean
from claimgraph.service.runs import Run
from claimgraph.service.scoped import Scoped

if TYPE_CHECKING:
    from claimgraph.service.port import GraphAPI
    from claimgraph.service.signers import Signer

__all__ = [
    "HOW",
    "ROLES",
    "STATUS",
    "Access",
    "Principal",
    "Resolve",
    "Scoped",
    "clean",
]

_SWEEP = 60.0  # seconds between sweeps of runs unused for their whole lease
_COUNTED = 100_000  # (principal, conflict) pairs remembered as counted outside a run
_PRINCIPALS = 4096  # principals whose scoped graph is kept

_log = events("access")


@dataclass(slots=True)
class _Held:
    """A run this process holds for a principal, and when it was last used."""

    agent: str
    run: Run
    used: float
    renewed: float
    lease: float


class Access:
    """The service layer of one served graph: principals, limits, runs (see the module).

    One per graph a process serves, shared by every surface it serves it on (``serve``'s HTTP
    API, its ``/mcp`` and its writer socket share one), so a principal's limits are counted
    once over all of them.
    """

    def __init__(
        self,
        graph: GraphAPI,
        resolve: Resolve | None = None,
        *,
        limits: Limits = DEFAULT_LIMITS,
        signer: Signer | None = None,
        lease: float = 900.0,
    ) -> None:
        self.graph = graph
        self.resolve: Resolve = resolve or (lambda token: None)
        self.limits = limits
        self.signer = signer
        self.lease = lease
        # no total for requests: the transport's own workers are the total
        self.requests = Slots(limits.max_requests, 1 << 30, "requests", "--max-requests")
        self.waits = Slots(limits.max_waits, limits.max_waits_total, "reads waiting", "--max-waits")
        self.tally = RunTally(limits)
        self._lock = threading.Lock()
        self._runs: dict[str, _Held] = {}
        self._swept = time.monotonic()
        self._counted: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._scoped: OrderedDict[Principal, Scoped] = OrderedDict()

    # -- principals ---------------------------------------------------------------------------

    def lookup(self, token: str | None) -> Principal | None:
        """The principal of a bearer token, or None."""
        return self.resolve(token) if token else None

    def authenticate(self, token: str | None) -> Principal:
        """The token's principal; 401 without a known one — before any work, nothing recorded."""
        p = self.lookup(token)
        if p is None:
            what = "no bearer token" if token is None else "an unknown bearer token"
            raise AuthError(
                Reason.UNAUTHENTICATED.value,
                f"the request carried {what}: a valid bearer token is needed",
                401,
            )
        return p

    def of(self, principal: Principal) -> Scoped:
        """The graph as ``principal`` may use it (one per principal, kept)."""
        with self._lock:
            s = self._scoped.get(principal)
            if s is None:
                s = self._scoped[principal] = Scoped(self, principal)
                while len(self._scoped) > _PRINCIPALS:
                    self._scoped.popitem(last=False)
            else:
                self._scoped.move_to_end(principal)
            return s

    def request(self, principal: Principal | None) -> AbstractContextManager[None]:
        """One request (or tool call) of ``principal`` in flight, for a ``with`` block; past
        ``max_requests`` at once, 429 at once (callers without a principal share one pool)."""
        if principal is None:
            return self.requests.hold("", "unauthenticated callers")
        return self.requests.hold(principal.agent, repr(principal.agent))

    # -- runs held here -----------------------------------------------------------------------

    @staticmethod
    def now() -> float:
        """The clock leases are counted on (monotonic seconds)."""
        return time.monotonic()

    def _hold(self, agent: str, run: Run, lease: float) -> None:
        now = time.monotonic()
        with self._lock:
            self._runs[run.run_id] = _Held(agent, run, now, now, lease)

    def _held(self, run_id: str) -> _Held | None:
        with self._lock:
            return self._runs.get(run_id)

    def _drop(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def live_runs(self, agent: str | None = None) -> list[Run]:
        """The runs held here (of ``agent``, or all)."""
        with self._lock:
            return [h.run for h in self._runs.values() if agent is None or h.agent == agent]

    def sweep(self, now: float | None = None, *, force: bool = False) -> list[str]:
        """End the runs unused for their whole lease (their clients went away; their pins
        have lapsed): at most once a minute unless ``force``. The ids ended."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if not force and now - self._swept < _SWEEP:
                return []
            self._swept = now
            idle = [h for h in self._runs.values() if now - h.used > h.lease]
            for h in idle:
                del self._runs[h.run.run_id]
        for h in idle:
            try:
                h.run.close("lease lapsed")
            except ClaimgraphError as exc:  # the graph is away: the pin lapses by itself
                _log.warning("access.run_not_closed", run=h.run.run_id, error=str(exc)[:300])
        return [h.run.run_id for h in idle]

    def close(self) -> None:
        """End every run held here (the process stops)."""
        with self._lock:
            held, self._runs = list(self._runs.values()), {}
        for h in held:
            try:
                h.run.close("server stopped")
            except ClaimgraphError as exc:
                _log.warning("access.run_not_closed", run=h.run.run_id, error=str(exc)[:300])

    # -- blocked reads outside a run ----------------------------------------------------------

    def _first_time(self, agent: str, conflict_id: str) -> bool:
        """Whether (agent, conflict) has not been reported yet (then it is, from now on)."""
        key = (agent, conflict_id)
        with self._lock:
            if key in self._counted:
                self._counted.move_to_end(key)
                return False
            self._counted[key] = None
            while len(self._counted) > _COUNTED:
                self._counted.popitem(last=False)
            return True

    def _forget(self, agent: str, conflict_id: str) -> None:
        with self._lock:
            self._counted.pop((agent, conflict_id), None)
