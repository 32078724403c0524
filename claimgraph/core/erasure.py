"""Erasure for privacy: an admin ``erase`` command removes one claim's payload from every read.

Erasure is **not** retirement and **not** a correction: the claim keeps its place in the
graph (its edge, status, owner, confidence and times), so every read of the graph's *state*
at every version is unchanged. What goes is its payload — ``evidence``, ``reasoning`` and
``properties`` — the free-form parts where personal data ends up. To correct wrong data,
retract the claim or resolve its conflict; erasure is for a privacy request.

How it stays deterministic:

* The governor decides ``erase`` like any command (``core.governor.lifecycle.erase``): an admin, a
  known claim → ``accepted``/``erased`` with the claim id as ``target``; otherwise a recorded
  rejection. The decision itself is the **tombstone**; it carries no payload.
* The projector, on folding that decision at version E, rewrites every row of the claim, at
  every version, with the payload replaced by empty values and ``"erased": E``, and writes an
  erasure row (family ``X``) at E. A re-projection of the log does exactly the same at E, so
  audit and replay stay byte-identical; rows the claim gets later are built from the
  scrubbed record. Checkpoints are scrubbed too (:mod:`claimgraph.projections.erasure`).
* Reads of the decisions log through the API (``decisions()``, ``claimgraph log``) pass
  through :func:`scrub_decision`, so no read path returns the payload.

The commands and decisions logs themselves are never rewritten and are kept forever (replay
and verify need their bytes; on Kafka ``kafka init`` sets and checks ``retention.ms=-1``), so
their raw records keep the payload: erasure never relies on retention to remove it. Only
deleting a graph's logs (the embedded data directory, the Kafka topics) removes those bytes;
a deployment that must not keep them should not put personal data in claims unencrypted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from claimgraph.core.model import Decision

__all__ = ["PAYLOAD", "scrub_decision", "scrub_row"]

PAYLOAD: dict[str, Any] = {"evidence": [], "reasoning": "", "properties": {}}


# -- the decision (pure) ----------------------------------------------------------------------


# -- projections ------------------------------------------------------------------------------


def scrub_row(row: dict[str, Any], version: int) -> dict[str, Any]:
    """A claim row with its payload replaced by the tombstone (key order kept)."""
    out = {k: PAYLOAD.get(k, v) for k, v in row.items()}
    out["erased"] = version
    return out


def scrub_decision(d: Decision, erased: Callable[[str], int | None]) -> Decision:
    """A decision as every read must show it: the payload of an erased claim removed."""
    claim = d["claim"]
    if claim is None or erased(claim["claim_id"]) is None:
        return d
    out = dict(d)
    out["claim"] = cast(Any, {**claim, **PAYLOAD})
    return cast(Decision, out)
