"""Admission of commands: signing keys, signed commands and refusals from the ingress (pure).

Identity is never taken from a self-declared field. Two ingresses vouch for it:

* the **HTTP API** maps a bearer token to a principal and writes commands as that principal;
  a request it refuses (bad token, spoofed agent, task or role not allowed) is still written,
  as a ``refused`` command, so that the refusal is in the log — the governor rejects it with
  the ingress's reason and nothing else changes;
* a **direct log producer** (a Kafka client) signs each command: a ``signed`` record wraps the
  command's own encoding (``body``) with an Ed25519 signature over ``CONTEXT ‖ body`` by a key
  an admin registered through a ``register_key`` command. A key speaks for the agents matching
  its ``key_agent`` pattern (``*``: a trusted ingress, such as ``claimgraph serve`` on a signed
  graph).

A graph **requires signatures** while it has at least one active key: from then on an unsigned
command, a signature that does not verify, an unknown or revoked key, or a key that may not
speak for the command's agent is rejected (``unsigned``, ``bad_signature``, ``unknown_key``,
``key_not_for_agent``). Such a rejection names no command id, so nobody can burn a genuine
command's id by sending a forged copy first. A replayed signed command is its own command id
again: ``duplicate_command``. The first key is registered unsigned (the graph has none yet).

Verification is a pure function of the folded keys and the record's bytes, so replay decides
exactly as the first run did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from claimgraph.core.model import (
    LIMITS,
    Command,
    Decision,
    Reason,
    RefusedCommand,
    RegisterKeyCommand,
    RevokeKeyCommand,
    SignedCommand,
)
from claimgraph.core.schema import Pattern
from claimgraph.core.wire import decode_command
from claimgraph.errors import DecodeError

if TYPE_CHECKING:
    from claimgraph.core.state import GraphState

__all__ = [
    "CONTEXT",
    "HANDLERS",
    "KeyState",
    "Refusal",
    "admit",
    "fold_key",
    "open_signed",
    "requires_signatures",
]

CONTEXT = b"claimgraph-signed-v1\x00"


class Refusal(Exception):
    """A command is rejected with a reason code and a detail line (raised inside ``decide``)."""

    def __init__(self, reason: Reason, detail: str) -> None:
        self.reason = reason
        self.detail = detail


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


def open_signed(keys: dict[str, KeyState], cmd: SignedCommand) -> tuple[Command, str]:
    """Verify a signed record; return the command inside and the key that signed it."""
    key_id = cmd["key_id"]
    key = keys.get(key_id)
    if key is None or key.revoked:
        what = "was revoked" if key else "is not registered in this graph"
        raise Refusal(Reason.UNKNOWN_KEY, f"signing key {key_id[:80]!r} {what}")
    try:
        key.public.verify(cmd["signature"], CONTEXT + cmd["body"])
    except InvalidSignature:
        raise Refusal(
            Reason.BAD_SIGNATURE, f"the signature does not verify with key {key_id!r}"
        ) from None
    try:
        inner = decode_command(cmd["body"])
    except DecodeError as exc:
        raise Refusal(Reason.MALFORMED, f"signed body: {exc.detail}") from None
    if inner.get("type") in ("signed", "refused"):
        raise Refusal(Reason.MALFORMED, f"a signed body may not be a {inner.get('type')} record")
    agent = cast(dict[str, str], inner)["agent"]
    if not key.key_agent.matches(agent):
        raise Refusal(
            Reason.KEY_NOT_FOR_AGENT,
            f"key {key_id!r} speaks for {key.key_agent.text!r}, not for agent {agent[:80]!r}",
        )
    return inner, key_id


Decide = Callable[["GraphState", Command, int, int], Decision]
Base = Callable[["GraphState", Command | None, str, int, int], Decision]


def admit(
    state: GraphState,
    cmd: Command,
    input_offset: int,
    log_time: int,
    decide_command: Decide,
    base: Base,
) -> Decision:
    """Decide a signed command, or an unsigned one on a graph that requires signatures."""
    if cast(dict[str, object], cmd).get("type") == "signed":
        signed = cast(SignedCommand, cast(object, cmd))
        try:
            inner, key_id = open_signed(state.keys, signed)
        except Refusal as r:
            return _refused(base(state, None, "signed", input_offset, log_time), r)
        d = decide_command(state, inner, input_offset, log_time)
        d["signed_by"] = key_id
        return d
    ctype = cast(str, cmd.get("type", "claim"))
    d = base(state, cmd, ctype, input_offset, log_time)
    cid = cast(dict[str, str], cmd).get("command_id", "")
    d["command_id"] = ""  # not remembered: a forged copy must not burn the genuine id
    return _refused(
        d,
        Refusal(
            Reason.UNSIGNED,
            f"graph {state.graph!r} requires signed commands; {ctype} {cid[:80]!r} is unsigned",
        ),
    )


def _refused(d: Decision, r: Refusal) -> Decision:
    d["kind"] = "rejected"
    d["reason"] = r.reason.value
    d["detail"] = r.detail[: LIMITS["detail"]]
    return d


# -- handlers for the admission commands (dispatched by the governor) ---------------------------


def _check_id(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise Refusal(Reason.INVALID_ID, f"{name} is empty or not a string")
    if len(value) > LIMITS["id"]:
        raise Refusal(Reason.FIELD_TOO_LARGE, f"{name} has more than {LIMITS['id']} characters")
    if not value.isprintable():
        raise Refusal(Reason.INVALID_ID, f"{name} contains control or non-printable characters")
    return value


def _require_admin(state: GraphState, agent: str) -> None:
    if state.schema is None:
        raise Refusal(Reason.NO_SCHEMA, "no graph schema has been published yet")
    if not state.schema.is_admin(agent):
        rev = state.schema_rev
        raise Refusal(Reason.NOT_ADMIN, f"agent {agent!r} is not an admin in schema revision {rev}")


def _register_key(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RegisterKeyCommand, cmd)
    _require_admin(state, c["agent"])
    key_id = _check_id(c["key_id"], "key_id")
    _check_id(c["key_agent"], "key_agent")
    if key_id in state.keys:
        raise Refusal(Reason.INVALID_ID, f"key id {key_id!r} is already taken; choose another")
    try:
        Ed25519PublicKey.from_public_bytes(c["public_key"])
    except ValueError:
        raise Refusal(
            Reason.INVALID_FIELD, "public_key must be a raw 32-byte Ed25519 public key"
        ) from None
    d["kind"] = "accepted"
    d["reason"] = Reason.KEY_REGISTERED.value
    d["target"] = key_id
    d["key"] = {"key_id": key_id, "key_agent": c["key_agent"], "public_key": c["public_key"]}
    d["detail"] = f"key {key_id} may sign for {c['key_agent']}; the graph requires signatures"


def _revoke_key(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RevokeKeyCommand, cmd)
    _require_admin(state, c["agent"])
    key_id = _check_id(c["key_id"], "key_id")
    k = state.keys.get(key_id)
    if k is None or k.revoked:
        what = "was already revoked" if k else "does not exist"
        raise Refusal(Reason.UNKNOWN_KEY, f"key {key_id!r} {what}")
    d["kind"] = "accepted"
    d["reason"] = Reason.KEY_REVOKED.value
    d["target"] = key_id


_INGRESS_REASONS = {
    Reason.UNAUTHENTICATED,
    Reason.AGENT_MISMATCH,
    Reason.TASK_NOT_ALLOWED,
    Reason.NOT_ADMIN,
    Reason.NOT_RESOLVER,
}


def _refused_by_ingress(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RefusedCommand, cmd)
    reason = next((r for r in _INGRESS_REASONS if r.value == c["reason"]), Reason.MALFORMED)
    declared = c["declared_agent"][:80]
    raise Refusal(
        reason,
        f"refused by the ingress ({c['refused_type'][:40]} declared as {declared!r}): "
        f"{c['detail']}",
    )


HANDLERS: dict[str, Callable[[GraphState, Command, Decision], None]] = {
    "register_key": _register_key,
    "revoke_key": _revoke_key,
    "refused": _refused_by_ingress,
}
