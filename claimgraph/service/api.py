"""The graph API shared by every runtime: command builders and reads at a version.

:class:`GraphWrites` turns keyword arguments into wire commands and hands each to
``self._one``; :class:`GraphReads` serves reads from ``self.reader`` (a
:class:`ProjectionReader`) at a version, waiting for it when asked. The embedded
:class:`~claimgraph.service.graph.Graph` and the Kafka-backed graph differ only in how a command
reaches the governor and where the projection lives.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from claimgraph.core.commands import cut
from claimgraph.core.model import Command, Decision
from claimgraph.errors import InputError
from claimgraph.service.inputs import now_millis, require_domain, to_millis

if TYPE_CHECKING:
    from claimgraph.service.signers import Signer

__all__ = ["GraphWrites", "NodeLike", "Receipt", "TickerWrites", "node"]

NodeLike = tuple[str, str] | str


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


def node(n: NodeLike) -> tuple[str, str]:
    """``"type:id"`` or ``(type, id)`` → ``(type, id)``."""
    if isinstance(n, tuple):
        return n
    t, sep, i = n.partition(":")
    if not sep or not t or not i:
        raise InputError(f"{cut(n)} is not a node: expected 'type:id', e.g. service:checkout")
    return t, i  # sizes and characters are the governor's to judge (a recorded rejection)


_node = node


class GraphWrites:
    """Command builders; subclasses provide ``name`` and ``_one(command) -> Receipt``.

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

    def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        polarity: str = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert (or with ``polarity='deny'`` deny) an edge."""
        s, o = _node(subject), _node(obj)
        return self._send(
            "claim",
            agent,
            task,
            command_id,
            {
                "run_id": run_id,
                "edge_type": edge_type,
                "subject_type": s[0],
                "subject_id": s[1],
                "object_type": o[0],
                "object_id": o[1],
                "polarity": polarity,
                "confidence": float(confidence),
                "evidence": list(evidence),
                "reasoning": reasoning,
                "asserted_at": now_millis() if asserted_at is None else to_millis(asserted_at),
                "based_on_version": based_on_version,
                "properties": dict(properties or {}),
            },
        )

    def assert_(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert that an edge holds (see :meth:`claim`)."""
        return self.claim(
            edge_type,
            subject,
            obj,
            agent=agent,
            task=task,
            polarity="assert",
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            run_id=run_id,
            command_id=command_id,
        )

    def deny(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Deny that an edge holds (see :meth:`claim`)."""
        return self.claim(
            edge_type,
            subject,
            obj,
            agent=agent,
            task=task,
            polarity="deny",
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            run_id=run_id,
            command_id=command_id,
        )

    def retract(
        self,
        claim_id: str,
        *,
        agent: str | None = None,
        task: str | None = None,
        reason: str = "",
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Withdraw one's own claim (retirement: gone from head, readable before), in the
        run ``run_id`` names when given."""
        return self._send(
            "retract",
            agent,
            task,
            command_id,
            {
                "run_id": run_id,
                "claim_id": claim_id,
                "reason": reason,
            },
        )

    def resolve(
        self,
        conflict_id: str,
        *,
        agent: str | None = None,
        winner: str | None,
        resolver: str = "human",
        rationale: str = "",
        inputs: str = "",
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """A resolver's verdict: ``winner`` (a claim id) or ``None`` to reject every claim.

        ``inputs`` (JSON text) records what the resolver saw and decided on, so the verdict is
        explained in the log and never recomputed.
        """
        return self._send(
            "resolve",
            agent,
            task,
            command_id,
            {
                "conflict_id": conflict_id,
                "winner": winner,
                "resolver": resolver,
                "rationale": rationale,
                "inputs": inputs,
            },
        )

    def escalate(
        self,
        conflict_id: str,
        *,
        agent: str | None = None,
        reason: str,
        resolver: str = "human",
        command_id: str | None = None,
    ) -> Receipt:
        """Hand a conflict to a person (a resolver's move): it stays quarantined, escalated."""
        return self._send(
            "escalate",
            agent,
            None,
            command_id,
            {"conflict_id": conflict_id, "reason": reason, "resolver": resolver},
        )

    def read_blocked(
        self,
        conflict_id: str,
        count: int = 1,
        *,
        agent: str | None = None,
        run_id: str | None = None,
        pinned_version: int | None = None,
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Report reads of a run that hit a quarantined slot (exit conditions count them).

        ``pinned_version`` is the run's pinned version: from rules revision 2 on a report
        counts only from a run pinned where the conflict was open, once per (reader, run);
        from revision 5 a report without a run (reads outside an explicit run, at
        ``pinned_version``) counts once per (reader, conflict). ``task`` is the run's.
        """
        fields = {
            "conflict_id": conflict_id,
            "count": count,
            "run_id": run_id,
            "pinned_version": -1 if pinned_version is None else pinned_version,
        }
        agent = "reader" if agent is None and self.default_agent is None else agent
        return self._send("read_blocked", agent, task, command_id, fields)

    def publish_schema(
        self,
        document: str,
        *,
        agent: str | None = None,
        source: str = "<inline>",
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Publish a graph schema document (YAML) as ``agent`` (an admin)."""
        return self._send(
            "publish_schema",
            agent,
            task,
            command_id,
            {
                "document": document,
                "source": source,
            },
        )

    def grant(
        self,
        grantee_agent: str,
        edge_type: str,
        *,
        agent: str | None = None,
        grantee_task: str = "*",
        expires_at: int | str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Grant extra write scope (admin only), optionally until ``expires_at`` (log time)."""
        return self._send(
            "grant",
            agent,
            None,
            command_id,
            {
                "grantee_agent": grantee_agent,
                "grantee_task": grantee_task,
                "edge_type": edge_type,
                "expires_at": None if expires_at is None else to_millis(expires_at),
            },
        )

    def revoke(
        self, grant_id: str, *, agent: str | None = None, command_id: str | None = None
    ) -> Receipt:
        """Revoke a grant (admin only)."""
        return self._send(
            "revoke",
            agent,
            None,
            command_id,
            {
                "grant_id": grant_id,
            },
        )

    def register_key(
        self,
        key_id: str,
        key_agent: str,
        public_key: bytes,
        *,
        agent: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Register an Ed25519 public key (admin only); the graph then requires signatures."""
        return self._send(
            "register_key",
            agent,
            None,
            command_id,
            {"key_id": key_id, "key_agent": key_agent, "public_key": bytes(public_key)},
        )

    def revoke_key(
        self, key_id: str, *, agent: str | None = None, command_id: str | None = None
    ) -> Receipt:
        """Revoke a signing key (admin only)."""
        return self._send("revoke_key", agent, None, command_id, {"key_id": key_id})

    def upgrade_rules(
        self, to: int, *, agent: str | None = None, command_id: str | None = None
    ) -> Receipt:
        """Move the graph to governor rules revision ``to`` from now on (admin only).

        Decisions already made keep the revision they were made under; ``verify`` replays
        each under its own (:mod:`claimgraph.core.governor.revisions`).
        """
        return self._send("upgrade_rules", agent, None, command_id, {"to": to})

    def erase(
        self, claim_id: str, *, agent: str | None = None, reason: str, command_id: str | None = None
    ) -> Receipt:
        """Erase a claim's payload (evidence, reasoning, properties) from every read, for
        privacy (admin only). Not for correcting wrong data: retract or resolve for that."""
        return self._send(
            "erase", agent, None, command_id, {"claim_id": claim_id, "reason": reason}
        )


class TickerWrites(GraphWrites):
    """The writes of a graph's own runtime: a ticker writes ticks through it, never a client."""

    def tick(self, *, agent: str = "ticker") -> Receipt:
        """Write a tick: time advances for the governor only through the log."""
        return self._send("tick", agent, "", None, {})
