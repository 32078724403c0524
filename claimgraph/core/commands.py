"""The one command catalogue: every command type, its fields, who may send it (pure).

A command type is declared here once. Everything else is derived from this table or tested
complete against it: the Avro record a command is written as (``schemas/avro/<type>``), the
JSON Lines ``type`` names (:mod:`claimgraph.service.inputs`), the HTTP routes
``POST /v1/commands/<type>`` and their role checks (:mod:`claimgraph.http.commands`), the SDK
writers (:class:`claimgraph.service.api.GraphWrites`) and the HTTP client.

Two kinds of sender:

* **clients** — agents and people, through JSON Lines, HTTP or the SDK: ``assert``/``deny``
  (a ``claim``), ``retract``, ``resolve``, ``escalate``, ``read_blocked``,
  ``publish_schema``, ``grant``, ``revoke``, ``erase``, ``register_key``, ``revoke_key``,
  ``upgrade_rules``;
* **the system itself** — records no client may send: ``invalid_input`` and ``refused``
  (written by an ingress for input it could not accept), ``signed`` (the envelope a signing
  producer wraps a command in), ``place`` (written by ``claimgraph kafka place``: the graph
  lives on this partition of the Kafka commands topic) and ``tick`` (written by the ticker).
  A client transport refuses them with a clear reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "CLIENT_COMMANDS",
    "COMMANDS",
    "COMMAND_TYPES",
    "ENVELOPE",
    "SYSTEM_COMMANDS",
    "CommandSpec",
    "Sender",
    "client_command",
]

ENVELOPE = ("command_id", "graph", "agent", "task")


class Sender(StrEnum):
    """Who may send a command type (the governor still judges each command)."""

    WRITER = "writer"  # a writer of the edge type (schema writers or a grant)
    OWNER = "owner"  # the owner of the claim it names
    READER = "reader"  # any authenticated principal
    RESOLVER = "resolver"  # a resolver, human or admin of the schema
    ADMIN = "admin"  # an admin of the schema
    INGRESS = "ingress"  # the system: an ingress, a signing producer or the Kafka admin tool
    TICKER = "ticker"  # the system: the ticker


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One command type."""

    type: str  # ``type`` on the wire; also the Avro record it is written as
    summary: str  # one line, for help texts and tool descriptions
    fields: tuple[str, ...]  # the record's fields after the envelope, in wire order
    sender: Sender
    names: tuple[str, ...] = ()  # what clients call it, when not its type (assert, deny)

    @property
    def client(self) -> bool:
        """Whether client transports (JSON Lines, HTTP, SDK) carry it."""
        return self.sender not in (Sender.INGRESS, Sender.TICKER)

    @property
    def client_names(self) -> tuple[str, ...]:
        """The JSON Lines ``type`` values (and SDK method names) of this command."""
        return self.names or (self.type,)


_SPECS = (
    CommandSpec(
        "claim",
        "Assert that an edge holds, or deny it, with confidence, evidence and reasoning.",
        (
            "run_id",
            "edge_type",
            "subject_type",
            "subject_id",
            "object_type",
            "object_id",
            "polarity",
            "confidence",
            "evidence",
            "reasoning",
            "asserted_at",
            "based_on_version",
            "properties",
        ),
        Sender.WRITER,
        names=("assert", "deny"),
    ),
    CommandSpec(
        "retract",
        "Withdraw one's own claim: it leaves head and stays readable at older versions.",
        ("run_id", "claim_id", "reason"),
        Sender.OWNER,
    ),
    CommandSpec(
        "resolve",
        "A resolver's verdict on a conflict: a winning claim, or none (reject all).",
        ("conflict_id", "winner", "resolver", "rationale", "inputs"),
        Sender.RESOLVER,
    ),
    CommandSpec(
        "publish_schema",
        "Publish a graph schema (YAML): writers, cardinality and conflict policy.",
        ("document", "source"),
        Sender.ADMIN,
    ),
    CommandSpec(
        "grant",
        "Grant an agent extra write scope for an edge type, optionally until a time.",
        ("grantee_agent", "grantee_task", "edge_type", "expires_at"),
        Sender.ADMIN,
    ),
    CommandSpec("revoke", "Revoke a grant.", ("grant_id",), Sender.ADMIN),
    CommandSpec("tick", "Time passes for the governor (quarantine deadlines).", (), Sender.TICKER),
    CommandSpec(
        "read_blocked",
        "Report reads of a run that hit a quarantined slot (its exit conditions count them).",
        ("run_id", "conflict_id", "count", "pinned_version"),
        Sender.READER,
    ),
    CommandSpec(
        "escalate",
        "Hand a conflict to a person: it stays quarantined, now escalated.",
        ("conflict_id", "reason", "resolver"),
        Sender.RESOLVER,
    ),
    CommandSpec(
        "invalid_input",
        "Input an ingress could not read as a command (recorded as a rejection).",
        ("raw", "error"),
        Sender.INGRESS,
    ),
    CommandSpec(
        "refused",
        "A request an ingress refused (identity or role), recorded as a rejection.",
        ("reason", "detail", "declared_agent", "refused_type"),
        Sender.INGRESS,
    ),
    CommandSpec(
        "register_key",
        "Register an Ed25519 public key; the graph then requires signed commands.",
        ("key_id", "key_agent", "public_key"),
        Sender.ADMIN,
    ),
    CommandSpec("revoke_key", "Revoke a signing key.", ("key_id",), Sender.ADMIN),
    CommandSpec(
        "signed",
        "A command wrapped with its producer's Ed25519 signature.",
        ("key_id", "signature", "body"),
        Sender.INGRESS,
    ),
    CommandSpec(
        "upgrade_rules",
        "Move the graph to a newer governor rules revision from this position on.",
        ("to",),
        Sender.ADMIN,
    ),
    CommandSpec(
        "erase",
        "Erase a claim's payload (evidence, reasoning, properties) from every read.",
        ("claim_id", "reason"),
        Sender.ADMIN,
    ),
    CommandSpec(
        "place",
        "Place the graph on this partition of the Kafka commands topic (kafka place).",
        ("partition",),
        Sender.INGRESS,
    ),
)

COMMANDS: Mapping[str, CommandSpec] = {s.type: s for s in _SPECS}
COMMAND_TYPES = tuple(COMMANDS)
CLIENT_COMMANDS: tuple[CommandSpec, ...] = tuple(s for s in _SPECS if s.client)
SYSTEM_COMMANDS: tuple[CommandSpec, ...] = tuple(s for s in _SPECS if not s.client)
_BY_NAME = {n: s for s in CLIENT_COMMANDS for n in s.client_names}


def client_command(name: str) -> CommandSpec | None:
    """The client command a JSON Lines ``type`` or route names (None: not one of them)."""
    return _BY_NAME.get(name)
