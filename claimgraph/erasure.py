"""Erasure for privacy: an admin ``erase`` command removes one claim's payload from every read.

Erasure is **not** retirement and **not** a correction: the claim keeps its place in the
graph (its edge, status, owner, confidence and times), so every read of the graph's *state*
at every version is unchanged. What goes is its payload — ``evidence``, ``reasoning`` and
``properties`` — the free-form parts where personal data ends up. To correct wrong data,
retract the claim or resolve its conflict; erasure is for a privacy request.

How it stays deterministic:

* The governor decides ``erase`` like any command (:func:`decide_erase`, pure): an admin, a
  known claim → ``accepted``/``erased`` with the claim id as ``target``; otherwise a recorded
  rejection. The decision itself is the **tombstone**; it carries no payload.
* The projector, on folding that decision at version E (:func:`stage_erase`), rewrites every
  row of the claim, at every version, with the payload replaced by empty values and
  ``"erased": E``, and writes an erasure row (family ``X``) at E. A re-projection of the log
  does exactly the same at E, so audit and replay stay byte-identical; rows the claim gets
  later are built from the scrubbed record. Checkpoints are scrubbed too (:func:`scrub_dir`).
* Reads of the decisions log through the API (``decisions()``, ``claimgraph log``) pass
  through :func:`scrub_decision`, so no read path returns the payload.

The commands and decisions logs themselves are never rewritten (replay and verify need their
bytes): on the embedded runtime the raw log records keep the payload until the data directory
is deleted, on Kafka until topic retention removes them. Deployments that must remove those
bytes too should give the topics a retention period (or encrypt payloads per subject).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rocksdict import Rdict, WriteBatch

from .fold import GraphState
from .model import Command, Decision, EraseCommand, Reason
from .projections.rows import CLAIM, dumps, entity_key, inv, loads

if TYPE_CHECKING:
    from .projections.projector import Projector

__all__ = [
    "ERASED",
    "PAYLOAD",
    "decide_erase",
    "erased_at",
    "purge",
    "scrub_claim",
    "scrub_decision",
    "scrub_dir",
    "scrub_row",
    "stage_erase",
]

ERASED = b"X"  # erasure rows: X ‖ claim id ‖ 0x00 ‖ inv(version of the erase)
PAYLOAD: dict[str, Any] = {"evidence": [], "reasoning": "", "properties": {}}


# -- the decision (pure) ----------------------------------------------------------------------


def decide_erase(state: GraphState, cmd: Command, d: Decision) -> tuple[Reason, str] | None:
    """Fill ``d`` for an erase command; return (reason, detail) to reject it instead."""
    c = cast(EraseCommand, cmd)
    if state.schema is None:
        return Reason.NO_SCHEMA, "no schema has been published: there are no admins yet"
    if not state.schema.is_admin(c["agent"]):
        return (
            Reason.NOT_ADMIN,
            f"agent {c['agent']!r} is not an admin in schema revision {state.schema_rev}",
        )
    claim_id = c["claim_id"]
    if not claim_id or len(claim_id) > 256 or not claim_id.isprintable():
        return Reason.INVALID_ID, "claim_id must be 1-256 printable characters"
    if claim_id not in state.claims:
        return Reason.UNKNOWN_CLAIM, f"no claim {claim_id!r} in this graph"
    d["kind"] = "accepted"
    d["reason"] = Reason.ERASED.value
    d["target"] = claim_id
    d["detail"] = f"payload of claim {claim_id} erased at every version: {c['reason'][:200]}"
    return None


# -- projections ------------------------------------------------------------------------------


def scrub_row(row: dict[str, Any], version: int) -> dict[str, Any]:
    """A claim row with its payload replaced by the tombstone (key order kept)."""
    out = {k: PAYLOAD.get(k, v) for k, v in row.items()}
    out["erased"] = version
    return out


def scrub_claim(db: Rdict, wb: WriteBatch, claim_id: str, version: int) -> int:
    """Stage the scrubbed rows of ``claim_id`` and its erasure row into ``wb``."""
    prefix = CLAIM + claim_id.encode("utf-8") + b"\x00"
    it = db.iter()
    it.seek(prefix)
    n = 0
    while it.valid():
        k: bytes = it.key()
        if not k.startswith(prefix) or len(k) != len(prefix) + 8:
            break
        row = loads(it.value())
        if row.get("erased") is None:
            wb.put(k, dumps(scrub_row(row, version)))
            n += 1
        it.next()
    wb.put(entity_key(ERASED, claim_id, version), dumps(version))
    return n


def stage_erase(projector: Projector, claim_id: str, version: int) -> None:
    """Projector hook for an accepted erase at ``version`` (rows land in its next batch)."""
    projector.flush()  # rows of this claim staged earlier in the batch must be in the DB
    scrub_claim(projector.store.db, projector._wb, claim_id, version)
    record = projector._claim_records.get(claim_id)
    if record is not None:  # later rows of the claim are built from the scrubbed record
        projector._claim_records[claim_id] = scrub_row(record, version)
        projector._claim_records[claim_id].pop("erased")
    projector.erased.append((claim_id, version))


def purge(db: Rdict, erased: list[tuple[str, int]]) -> None:
    """Drop the overwritten payload bytes from the files: flush, then compact the claims' keys."""
    db.flush()
    for claim_id, _ in erased:
        prefix = CLAIM + claim_id.encode("utf-8")
        db.compact_range(prefix + b"\x00", prefix + b"\x01")


def erased_at(db: Rdict, claim_id: str) -> int | None:
    """The version at which a claim's payload was erased (None: it was not)."""
    prefix = ERASED + claim_id.encode("utf-8") + b"\x00"
    it = db.iter()
    it.seek(prefix)
    if it.valid() and it.key().startswith(prefix) and len(it.key()) == len(prefix) + 8:
        return int(loads(it.value()))
    return None


def scrub_decision(d: Decision, erased: Callable[[str], int | None]) -> Decision:
    """A decision as every read must show it: the payload of an erased claim removed."""
    claim = d["claim"]
    if claim is None or erased(claim["claim_id"]) is None:
        return d
    out = dict(d)
    out["claim"] = cast(Any, {**claim, **PAYLOAD})
    return cast(Decision, out)


def scrub_dir(root: Path, erased: list[tuple[str, int]]) -> int:
    """Scrub erased claims from every checkpoint's projection under ``root``; rows rewritten."""
    from .logs.embedded import open_rdict

    if not erased or not root.is_dir():
        return 0
    n = 0
    for cp in sorted(root.iterdir()):
        if not (cp / "checkpoint.json").is_file():
            continue
        db = open_rdict(cp / "projection", create=False)
        try:
            wb = WriteBatch(raw_mode=True)
            for claim_id, version in erased:
                n += scrub_claim(db, wb, claim_id, version)
            db.write(wb)
            purge(db, erased)
        finally:
            db.close()
    return n


assert inv(0)  # erasure rows share the versioned key layout of projections.rows
