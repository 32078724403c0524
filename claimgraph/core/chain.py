"""The decisions hash chain: a tamper-evident digest of the decisions log (pure).

``h(-1) = GENESIS``; after the decision at version V, ``h(V) = SHA-256(h(V-1) ‖ raw(V))``,
where ``raw(V)`` is the decision record's bytes as stored. Every decision made under rules
revision 2 or newer carries ``prev_hash = hex(h(V-1))`` and the SHA-256 of the command record
it decides, so changing, dropping or reordering any stored decision — including those made
before the chain started, which the first chained decision anchors — breaks the chain at a
named version. ``hex(h(V))`` is the head digest a third party can keep and check later.
"""

from __future__ import annotations

import hashlib

from claimgraph.core.model import Decision
from claimgraph.errors import IntegrityError

__all__ = ["GENESIS", "ChainChecker", "chain_next", "command_digest"]

GENESIS = hashlib.sha256(b"claimgraph decisions chain v1").digest()


def chain_next(h: bytes, raw: bytes) -> bytes:
    """The chain hash after a decision stored as ``raw``."""
    return hashlib.sha256(h + raw).digest()


def command_digest(raw: bytes) -> str:
    """What a decision records of the command record it decides."""
    return hashlib.sha256(raw).hexdigest()


class ChainChecker:
    """Follows a graph's decisions in log order and names the first break in the chain.

    Fed each decision's version, stored bytes, decoded record and the stored bytes of the
    command it names; raises :class:`IntegrityError` at the first decision whose
    ``prev_hash`` is not the chain so far, whose ``command_sha256`` is not its command's, or
    that falls back to unchained rules after the chain started.
    """

    def __init__(self) -> None:
        self.h = GENESIS
        self.version = -1
        self.first_chained: int | None = None

    @property
    def digest(self) -> str:
        """The head digest: hex of the chain hash after the last decision added."""
        return self.h.hex()

    def add(self, version: int, raw: bytes, d: Decision, command: bytes | None) -> None:
        if d["rules"] >= 2:
            if d["prev_hash"] != self.h.hex():
                raise IntegrityError(
                    f"the decisions hash chain breaks at version {version}: a decision at or "
                    f"before version {version - 1} was changed, dropped or reordered (version "
                    f"{version} follows {d['prev_hash'][:16] or 'nothing'}…, the log before it "
                    f"hashes to {self.h.hex()[:16]}…)",
                    version - 1,
                )
            if command is None or d["command_sha256"] != command_digest(command):
                raise IntegrityError(
                    f"the decision at version {version} names a command that is not the one "
                    f"at offset {d['input_offset']} of the commands log",
                    version,
                )
            if self.first_chained is None:
                self.first_chained = version
        elif self.first_chained is not None:
            raise IntegrityError(
                f"the decision at version {version} is unchained, after the chain started at "
                f"version {self.first_chained}",
                version,
            )
        self.h = chain_next(self.h, raw)
        self.version = version
