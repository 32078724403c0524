"""The graph API shared by every runtime: command builders and reads at a version.

:class:`GraphWrites` turns keyword arguments into wire commands and hands each to
``self._one``; :class:`GraphReads` serves reads from ``self.reader`` (a
:class:`ProjectionReader`) at a version, waiting for it when asked. The embedded
:class:`~claimgraph.service.graph.Graph` and the Kafka-backed graph differ only in how a command
reaches the governor and where the projection lives.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from claimgraph.core.model import Command, Decision
from claimgraph.errors import InputError
from claimgraph.service.catalogue_writes import CatalogueWrites
from claimgraph.service.inputs import require_domain
from claimgraph.service.writes import NodeLike, fields_of, node, spec_of, split_params

if TYPE_CHECKING:
    from claimgraph.service.signers import Signer

__all__ = ["GraphWrites", "NodeLike", "Receipt", "TickerWrites", "node"]


@dataclass(frozen=True, slots=True)
class Receipt:
    """A command's acknowledgement: where it sits, its decision, and the version it made."""

    command_id: str
    position: int
    version: int
    decision: Decision

    @property
    def kind(self) -> str:
        return self.decision["kind"]

    @property
    def reason(self) -> str:
        return self.decision["reason"]

    @property
    def refused(self) -> bool:
        """Whether this is the recorded refusal of a request (a ``refused`` command)."""
        return self.decision["command_type"] == "refused"

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.decision)
        d["version"] = self.version
        return d


class GraphWrites(CatalogueWrites):
    """Command builders; subclasses provide ``name`` and ``_one(command) -> Receipt``.

    Every write of the write catalogue is a typed method (generated:
    :class:`~claimgraph.service.catalogue_writes.CatalogueWrites`) over :meth:`write`.

    ``agent`` and ``task`` default to :attr:`default_agent` and :attr:`default_task`: none and
    ``""`` in process (name the agent), the token's agent and its one literal task over HTTP.
    """

    name: str
    signer: Signer | None = None  # when set, every command is sent as a signed record
    default_agent: str | None = None
    default_task: str = ""

    def _one(self, command: Command) -> Receipt:
        raise NotImplementedError

    def _one_signed(self, record: bytes) -> Receipt:
        raise NotImplementedError(f"{type(self).__name__} does not send signed records")

    def _send(
        self,
        kind: str,
        agent: str | None,
        task: str | None,
        command_id: str | None,
        fields: dict[str, Any],
    ) -> Receipt:
        """Build a command from the fields every command carries plus ``fields``; submit it.

        A field outside its declared domain raises :class:`InputError` before anything is
        sent or recorded (raw records given to ``submit`` are the governor's to judge).
        """
        agent = self.default_agent if agent is None else agent
        if agent is None:
            raise InputError(f"{kind}: name the agent (agent=...): this graph has no default")
        task = self.default_task if task is None else task
        envelope = {
            "type": kind,
            "command_id": command_id or str(uuid.uuid4()),
            "graph": self.name,
            "agent": agent,
            "task": task,
        }
        command = cast(Command, {**envelope, **fields})
        require_domain(command)  # out of bounds: InputError, nothing recorded (every surface)
        if self.signer is not None:
            return self._one_signed(self.signer.sign(command))
        return self._one(command)

    def write(self, name: str, /, **params: Any) -> Receipt:
        """Any write of the write catalogue, by name (:mod:`claimgraph.core.writes`): its
        parameters by their Python keywords plus ``agent``, ``task`` (where it takes one)
        and ``command_id``. The typed methods (``claim``, ``retract``…) call it."""
        spec = spec_of(name)
        agent, task, command_id, own = split_params(spec, params)
        if agent is None and self.default_agent is None:
            agent = spec.agent
        return self._send(spec.command, agent, task, command_id, fields_of(spec, own))


class TickerWrites(GraphWrites):
    """The writes of a graph's own runtime: a ticker writes ticks through it, never a client."""

    def tick(self, *, agent: str = "ticker") -> Receipt:
        """Write a tick: time advances for the governor only through the log."""
        return self._send("tick", agent, "", None, {})
