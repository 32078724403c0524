"""Authority: who may write what — signatures, keys, ingress refusals, writers, admins (pure).

Besides admission (below), this module holds the administrative commands: ``publish_schema``
(the first schema names its own admins; later ones need an admin and may not put several
present edges in one exclusive slot), ``grant`` and ``revoke`` (run-time scope for writers).

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
from typing import TYPE_CHECKING, cast

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from claimgraph.core.entities import SEP, KeyState
from claimgraph.core.governance import iso_utc as _iso
from claimgraph.core.governor.base import Refusal, check_id, check_text, require_schema
from claimgraph.core.governor.revisions import CURRENT, at_least
from claimgraph.core.model import (
    LIMITS,
    Command,
    Decision,
    GrantCommand,
    PublishSchemaCommand,
    Reason,
    RefusedCommand,
    RegisterKeyCommand,
    RevokeCommand,
    RevokeKeyCommand,
    SignedCommand,
    UpgradeRulesCommand,
)
from claimgraph.core.schema import EdgeType, parse_schema
from claimgraph.core.wire import decode_command
from claimgraph.errors import DecodeError, SchemaError

if TYPE_CHECKING:
    from claimgraph.core.state import GraphState

__all__ = [
    "CONTEXT",
    "HANDLERS",
    "Refusal",
    "open_signed",
    "unsigned",
    "upgrade_rules",
]

CONTEXT = b"claimgraph-signed-v1\x00"


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


def unsigned(state: GraphState, cmd: Command) -> Refusal:
    """The refusal of an unsigned command on a graph that requires signatures."""
    ctype = cast(str, cmd.get("type", "claim"))
    cid = cast(dict[str, str], cmd).get("command_id", "")
    more = ""
    if not state.keys_active:
        more = "; no signing key is active: an admin registers one (claimgraph key register)"
    return Refusal(
        Reason.UNSIGNED,
        f"graph {state.graph!r} requires signed commands; {ctype} {cid[:80]!r} is unsigned{more}",
    )


# -- handlers for the admission commands (dispatched by the governor) ---------------------------


def _check_key_id(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise Refusal(Reason.INVALID_ID, f"{name} is empty or not a string")
    if len(value) > LIMITS["id"]:
        raise Refusal(Reason.FIELD_TOO_LARGE, f"{name} has more than {LIMITS['id']} characters")
    if not value.isprintable():
        raise Refusal(Reason.INVALID_ID, f"{name} contains control or non-printable characters")
    return value


def _require_key_admin(state: GraphState, agent: str) -> None:
    if state.schema is None:
        raise Refusal(Reason.NO_SCHEMA, "no graph schema has been published yet")
    if not state.schema.is_admin(agent):
        rev = state.schema_rev
        raise Refusal(Reason.NOT_ADMIN, f"agent {agent!r} is not an admin in schema revision {rev}")


def _register_key(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RegisterKeyCommand, cmd)
    _require_key_admin(state, c["agent"])
    key_id = _check_key_id(c["key_id"], "key_id")
    _check_key_id(c["key_agent"], "key_agent")
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
    _require_key_admin(state, c["agent"])
    key_id = _check_key_id(c["key_id"], "key_id")
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
    Reason.SYSTEM_ONLY,
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


def authorised(state: GraphState, et: EdgeType, agent: str, task: str, now: int) -> bool:
    assert state.schema is not None
    if state.schema.may_write(et, agent, task):
        return True
    for g in state.grants.values():
        r = g.record
        if g.revoked or (r["expires_at"] is not None and now >= r["expires_at"]):
            continue
        if r["edge_type"] not in (et.name, "*"):
            continue
        from claimgraph.core.schema import Pattern  # small, cached by the regex module

        if Pattern.of(r["grantee_agent"]).matches(agent) and Pattern.of(r["grantee_task"]).matches(
            task
        ):
            return True
    return False


def require_admin(state: GraphState, agent: str) -> None:
    require_schema(state)
    assert state.schema is not None
    if not state.schema.is_admin(agent):
        raise Refusal(
            Reason.NOT_ADMIN,
            f"agent {agent!r} is not an admin in schema revision {state.schema_rev}",
        )


def publish(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(PublishSchemaCommand, cmd)
    check_text(c["source"], "source", LIMITS["id"])
    if len(c["document"]) > LIMITS["document"]:
        raise Refusal(
            Reason.FIELD_TOO_LARGE,
            f"schema document is larger than {LIMITS['document']} characters",
        )
    if at_least(d, 2) and state.schema is not None:
        require_admin(state, c["agent"])  # authority first: only an admin's document is parsed
    try:
        schema = parse_schema(c["document"], c["source"] or "<schema>", rules=d["rules"])
    except SchemaError as exc:
        raise Refusal(Reason.INVALID_SCHEMA, exc.report()) from None
    if state.schema is None:
        if not schema.is_admin(c["agent"]):
            raise Refusal(
                Reason.NOT_ADMIN,
                f"the first schema of a graph must name its "
                f"publisher {c['agent']!r} among principals.admins",
            )
    else:
        require_admin(state, c["agent"])
        clashes = state.slot_violations(schema)
        if clashes:
            raise Refusal(
                Reason.INVALID_SCHEMA,
                f"the new cardinalities would put several present edges in "
                f"{len(clashes)} exclusive slot(s), e.g. {clashes[0].replace(SEP, '/')}; "
                "retract or resolve them first",
            )
    d["kind"] = "accepted"
    d["reason"] = Reason.SCHEMA_PUBLISHED.value
    rev = state.schema_rev + 1
    d["detail"] = f"schema revision {rev} ({schema.digest}) is in force from this version"
    d["schema"] = {
        "revision": rev,
        "digest": schema.digest,
        "source": c["source"],
        "document": c["document"],
    }


def grant(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(GrantCommand, cmd)
    require_admin(state, c["agent"])
    assert state.schema is not None
    check_id(c["grantee_agent"], "grantee_agent")
    check_id(c["grantee_task"], "grantee_task")
    check_id(c["edge_type"], "edge_type")
    if c["edge_type"] != "*" and c["edge_type"] not in state.schema.edge_types:
        raise Refusal(
            Reason.UNKNOWN_EDGE_TYPE,
            f"edge type {c['edge_type']!r} is not in schema revision {state.schema_rev}",
        )
    if c["expires_at"] is not None and c["expires_at"] <= d["log_time"]:
        raise Refusal(
            Reason.INVALID_FIELD,
            f"expires_at {c['expires_at']} is not after the log time {d['log_time']}",
        )
    d["kind"] = "accepted"
    d["reason"] = Reason.GRANTED.value
    d["target"] = c["command_id"]
    d["grant"] = {
        "grant_id": c["command_id"],
        "grantee_agent": c["grantee_agent"],
        "grantee_task": c["grantee_task"],
        "edge_type": c["edge_type"],
        "expires_at": c["expires_at"],
    }
    until = f" until {_iso(c['expires_at'])}" if c["expires_at"] is not None else ""
    d["detail"] = f"{c['grantee_agent']}/{c['grantee_task']} may write {c['edge_type']}{until}"


def revoke(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RevokeCommand, cmd)
    require_admin(state, c["agent"])
    check_id(c["grant_id"], "grant_id")
    g = state.grants.get(c["grant_id"])
    if g is None or g.revoked:
        what = "was already revoked" if g else "does not exist"
        raise Refusal(Reason.UNKNOWN_GRANT, f"grant {c['grant_id']!r} {what}")
    d["kind"] = "accepted"
    d["reason"] = Reason.REVOKED.value
    d["target"] = c["grant_id"]


def upgrade_rules(state: GraphState, cmd: Command, d: Decision) -> None:
    """An admin moves the graph to a newer rules revision; this decision is made under it."""
    c = cast(UpgradeRulesCommand, cmd)
    require_admin(state, c["agent"])
    to = c["to"]
    now = CURRENT if state.rules is None else state.rules  # the revision in force before it
    if not isinstance(to, int) or not now < to <= CURRENT:
        raise Refusal(
            Reason.INVALID_FIELD,
            f"to must be a rules revision after {now} and at most {CURRENT}, got {to!r}",
        )
    d["rules"] = to
    d["kind"] = "accepted"
    d["reason"] = Reason.RULES_UPGRADED.value
    d["detail"] = f"rules revision {to} decides from this version on (was {now})"
