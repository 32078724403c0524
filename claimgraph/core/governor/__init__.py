"""The governor's decision function: ``decide(state, command, input_offset, log_time)`` (pure).

No clock, no randomness, no I/O: the only inputs are the folded :class:`GraphState`, the
command's bytes, its position in the commands log and its log append time (the governor's
"now"). Replaying the commands log through ``decide`` + ``GraphState.evolve`` therefore
reproduces the decisions log byte for byte.

Every command gets exactly one decision. Anything invalid — undecodable bytes, a malformed
field, an unknown type, a writer the schema does not admit — becomes a ``rejected`` decision
with a machine-readable reason code (:class:`claimgraph.core.model.Reason`) and a detail line.
Under rules revision 3 every field is first checked against its declared domain
(:func:`claimgraph.core.commands.violation`).

``decide`` is **total**: an unexpected exception inside a rule (a bug, never a verdict) becomes
a ``rejected``/``internal_error`` decision naming the rule and the exception's class (not its
message, which may vary between runs), with no effect on the graph. It changes nothing but
the command id and the hash chain, so the next command — any writer's — is decided as if it
had not come. ``verify`` reproduces it as long as the revision's code is unchanged; a fix to
code that raised may apply to every revision (a raise never produced a decision before
revision 3's ``internal_error`` existed, and since then the fix is what the new revision is).

The rules live in one module each, and this module only dispatches:

========================  ==================================================================
``authority``             signatures and keys, refusals from the ingress, who may write an
                          edge type (writers and grants), ``publish_schema``, ``grant``,
                          ``revoke``, ``upgrade_rules``
``claims``                ``assert`` / ``deny``: cardinality, polarity, staleness, policies
``conflicts``             the calibrated merge, ``resolve``, releasing claims
``lifecycle``             ``retract`` and ``erase``
``exits``                 ``tick``, ``read_blocked``, ``escalate``: leaving quarantine
``placement``             ``place`` (Kafka), and the last checks of every decision: a graph
                          placed on the record's partition, a decision that fits its bound
``base``                  the empty decision, :class:`Refusal`, field checks
``revisions``             which rules revision decides: every decision records its own
========================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from claimgraph.core.chain import command_digest
from claimgraph.core.commands import COMMANDS, LIMITS, violation
from claimgraph.core.governor.authority import HANDLERS as _AUTHORITY
from claimgraph.core.governor.authority import (
    grant,
    open_signed,
    publish,
    revoke,
    unsigned,
    upgrade_rules,
)
from claimgraph.core.governor.base import (
    Refusal,
    RuleFailed,
    check_id,
    conflict_id_for,
    new_decision,
)
from claimgraph.core.governor.claims import claim, signals_of
from claimgraph.core.governor.conflicts import resolve
from claimgraph.core.governor.exits import escalate, read_blocked, tick
from claimgraph.core.governor.lifecycle import erase, retract
from claimgraph.core.governor.placement import fitting, place, placed_here
from claimgraph.core.governor.revisions import CURRENT, at_least
from claimgraph.core.model import (
    Command,
    Decision,
    InvalidInputCommand,
    Reason,
    SignedCommand,
)
from claimgraph.core.state import GraphState
from claimgraph.core.wire import decode_command
from claimgraph.errors import DecodeError

__all__ = ["conflict_id_for", "decide", "decide_command"]


def decide(
    state: GraphState,
    data: bytes,
    input_offset: int,
    log_time: int,
    *,
    rules: int | None = None,
    partition: int | None = None,
    operator: str | None = None,
) -> Decision:
    """Decide one command given as bytes from the commands log.

    The rules revision is the graph's (that of its last decision; :data:`CURRENT` for an
    empty graph) unless ``rules`` names one: ``verify`` re-decides every command under the
    revision its logged decision was made under. ``partition`` is the Kafka commands
    partition the record is in (None: the embedded log), a fact of the log like the offset;
    ``operator`` the agent the Kafka governor is configured to accept a ``place`` from
    (revision 6), a fact of the deployment.
    """
    if rules is None:
        rules = CURRENT if state.rules is None else state.rules
    stage = ["decode"]  # the step running, for an internal error's detail
    try:
        d = _decide(state, data, input_offset, log_time, rules, stage)
        stage[0] = "placement"
        d = placed_here(state, d, partition, operator)  # Kafka: placed on this partition
        if at_least(d, 2):  # the decisions log is a hash chain (core.chain)
            stage[0] = "chain"
            d["command_sha256"] = command_digest(data)
            d["prev_hash"] = state.chain.hex()
            d = fitting(d, len(data))  # a decision that cannot be written is a rejection
        return d
    # Total by construction (the module's docstring): no input may stop the governor, so an
    # exception a rule did not mean is caught here, broadly, and recorded as a decision.
    except RuleFailed as exc:
        return _internal_error(state, data, input_offset, log_time, rules, exc)
    except Exception as exc:
        return _internal_error(
            state, data, input_offset, log_time, rules, RuleFailed(stage[0], exc)
        )


def _internal_error(
    state: GraphState,
    data: bytes,
    input_offset: int,
    log_time: int,
    rules: int,
    failed: RuleFailed,
) -> Decision:
    """The one decision of a command a rule failed on: rejected, with no effect."""
    try:
        cmd: Any = decode_command(data)
    except Exception:  # whatever failed, the decision must still be made
        cmd = {}
    c: dict[str, Any] = cmd if isinstance(cmd, dict) else {}
    ctype = c.get("type", "claim") if c.get("type") in COMMANDS else "invalid_input"
    fields = {
        k: v
        if isinstance(v, str) and _usable(v) and not (k == "command_id" and state.seen(v))
        else ""
        for k in ("command_id", "agent", "task")
        for v in (c.get(k),)
    }
    d = new_decision(state, cast(Command, fields), ctype, input_offset, log_time, rules)
    d["reason"] = Reason.INTERNAL_ERROR.value
    d["detail"] = (
        f"the governor failed in rule {failed.rule!r} ({failed.cls}); the command was "
        "rejected and changed nothing (report this: it is a bug, not a verdict)"
    )
    if at_least(d, 2):
        d["command_sha256"] = command_digest(data)
        d["prev_hash"] = state.chain.hex()
    return d


def _usable(v: object) -> bool:
    """Whether ``v`` can stand in a decision's envelope as given (an id of the domain)."""
    return isinstance(v, str) and len(v) <= LIMITS["id"] and v.isprintable()


def _decide(
    state: GraphState,
    data: bytes,
    input_offset: int,
    log_time: int,
    rules: int,
    stage: list[str],
) -> Decision:
    try:
        cmd = decode_command(data)
    except DecodeError as exc:
        d = new_decision(state, None, "undecodable", input_offset, log_time, rules)
        d["reason"] = exc.reason
        d["detail"] = exc.detail[: LIMITS["detail"]]
        return d
    # signed commands, and every command of a graph that requires signatures (authority.py)
    if cast(dict[str, Any], cmd).get("type") == "signed":
        stage[0] = "signed"
        try:
            if rules >= 3:
                _check_domain(cmd, "signed")
            inner, key_id = open_signed(state.keys, cast(SignedCommand, cast(object, cmd)))
        except Refusal as r:
            d = new_decision(state, None, "signed", input_offset, log_time, rules)
            return _rejected(d, r)
        d = decide_command(state, inner, input_offset, log_time, rules)
        d["signed_by"] = key_id
        return d
    stage[0] = "signatures"
    if _requires_signature(state, cmd, rules) and (
        rules >= 6 or cmd.get("type") != "place"
    ):  # before revision 6 a place was exempt
        ctype = cast(str, cmd.get("type", "claim"))
        d = new_decision(state, cmd, ctype, input_offset, log_time, rules)
        d["command_id"] = ""  # not remembered: a forged copy must not burn the genuine id
        return _rejected(d, unsigned(state, cmd))
    return decide_command(state, cmd, input_offset, log_time, rules)


def _requires_signature(state: GraphState, cmd: Command, rules: int) -> bool:
    """Whether an unsigned ``cmd`` is refused.

    Revision 1: while the graph has an active key. Revision 2 on: when the schema in force
    says ``principals.signatures: required`` — revoking the last key does not turn signing
    off; while no key is active, only an admin's unsigned ``register_key`` is decided.
    """
    if rules < 2:
        return state.keys_active
    if state.schema is None or not state.schema.signatures_required:
        return False
    return state.keys_active or cmd.get("type") != "register_key"


def decide_command(
    state: GraphState, cmd: Command, input_offset: int, log_time: int, rules: int = CURRENT
) -> Decision:
    """Decide one decoded command under rules revision ``rules``."""
    ctype = cast(str, cmd.get("type", "claim"))
    d = new_decision(state, cmd, ctype, input_offset, log_time, rules)
    rule = "envelope"
    try:
        _check_envelope(state, cmd, d)
        if at_least(d, 3):
            rule = "domain"
            _check_domain(cmd, ctype)
        rule = ctype
        _HANDLERS[ctype](state, cmd, d)
        if d["claim"] is not None:
            rule = "signals"
            signals_of(state, d)
    except Refusal as r:
        _rejected(d, r)
        for k in ("conflicts_with", "supersedes", "withheld", "released", "dismissed"):
            d[k] = []
        d["claim"] = None
        d["schema"] = None
        d["grant"] = None
        d["key"] = None
        d["conflict_id"] = None
        d["target"] = None
        d["stale"] = False
        d["merge"] = None
        d["signals"] = []
        d["exits"] = []
        d["count"] = 0
        d["run_id"] = None
    except Exception as exc:  # a bug in a rule: decide() records it (see the module doc)
        raise RuleFailed(rule, exc) from exc
    return d


def _rejected(d: Decision, r: Refusal) -> Decision:
    d["kind"] = "rejected"
    d["reason"] = r.reason.value
    d["detail"] = r.detail[: LIMITS["detail"]]
    return d


# -- validation -----------------------------------------------------------------------------


def _check_envelope(state: GraphState, cmd: Command, d: Decision) -> None:
    cid = cmd["command_id"]
    if cmd.get("type") == "invalid_input" and not cid:
        return  # input too broken to carry an id: rejected below, remembered nowhere
    try:
        check_id(cid, "command_id")
    except Refusal:
        d["command_id"] = ""  # an unusable id is not remembered; the detail keeps a prefix
        raise
    if cmd["graph"] != state.graph:
        raise Refusal(
            Reason.WRONG_GRAPH,
            f"command is for graph {cmd['graph'][:80]!r}; this is {state.graph!r}",
        )
    if state.seen(cid):
        raise Refusal(
            Reason.DUPLICATE_COMMAND,
            f"command {cid!r} was already decided; use a new command_id to retry",
        )
    if cmd.get("type") != "invalid_input":
        check_id(cmd["agent"], "agent")
        check_id(cmd["task"], "task", empty_ok=True)


def _check_domain(cmd: Command, ctype: str) -> None:
    """Revision 3: every field in its declared domain (:mod:`claimgraph.core.commands`)."""
    v = violation(COMMANDS[ctype], cast(dict[str, object], cmd))
    if v is not None:
        raise Refusal(Reason(v.reason), v.detail)


def _invalid(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(InvalidInputCommand, cmd)
    raise Refusal(Reason.MALFORMED, c["error"])


_HANDLERS: dict[str, Callable[[GraphState, Command, Decision], None]] = {
    "claim": claim,
    "retract": retract,
    "resolve": resolve,
    "publish_schema": publish,
    "grant": grant,
    "revoke": revoke,
    "upgrade_rules": upgrade_rules,
    "tick": tick,
    "read_blocked": read_blocked,
    "escalate": escalate,
    "invalid_input": _invalid,
    **_AUTHORITY,  # register_key, revoke_key, refused
    "erase": erase,
    "place": place,
}
