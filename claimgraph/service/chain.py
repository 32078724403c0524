"""The embedded graph's decisions hash chain: check it, and the head digest to keep.

``claimgraph digest [--at V]`` prints the digest a third party can keep; ``claimgraph verify
--digest D`` later checks the raw logs still hash to it (see :mod:`claimgraph.core.chain`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from claimgraph.core.chain import ChainChecker
from claimgraph.core.model import Progress
from claimgraph.core.wire import decode_decision
from claimgraph.errors import IntegrityError, VersionError
from claimgraph.service.graph import Graph

if TYPE_CHECKING:
    from claimgraph.service.attached import AttachedGraph

__all__ = ["ChainReport", "check_chain"]


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The chain checked from version 0 through ``version``; ``digest`` is its head."""

    version: int
    digest: str
    chained_from: int | None  # the first decision that carries the chain (None: none yet)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_chain(
    graph: Graph | AttachedGraph,
    *,
    start: int = 0,
    upto: int | None = None,
    expect: str | None = None,
    progress: Progress | None = None,
    batch: int = 4096,
) -> ChainReport:
    """Check the chain from ``start`` through ``upto`` (default: the last decision).

    A range that starts at a chained decision takes the hash that decision names as given
    (as ``verify --from`` takes the log before it); otherwise the chain is computed from
    version 0. Raises :class:`IntegrityError` naming the first break, or when ``expect`` (a
    digest kept earlier) is not the digest at ``upto``.
    """
    logs = graph.logs
    end = logs.decisions.end() - 1
    upto = end if upto is None else upto
    if expect is not None and upto > end:
        # a digest was kept at a version the log no longer has: its tail is lost
        raise IntegrityError(
            f"the digest to check was kept at version {upto}, but the decisions log ends at "
            f"version {end}: the log lost versions {end + 1}..{upto}",
            end + 1,
        )
    if not -1 <= upto <= end:
        raise VersionError(f"version {upto} is not in the decisions log (0..{end})")
    checker = ChainChecker()
    pos = 0
    if start > 0:
        first = logs.decisions.get(start)
        seed = decode_decision(first.value) if first is not None else None
        if seed is not None and seed["rules"] >= 2:
            checker.h, pos = bytes.fromhex(seed["prev_hash"]), start
    while pos <= upto:
        records = logs.decisions.read(pos, min(batch, upto - pos + 1))
        if not records:
            raise IntegrityError(f"the decisions log ends at {pos - 1}, before {upto}", pos)
        for rec in records:
            if rec.offset != pos:
                raise IntegrityError(f"the decisions log has no version {pos}", pos)
            d = decode_decision(rec.value)
            command = None
            if d["rules"] >= 2:
                c = logs.commands.get(d["input_offset"])
                command = c.value if c is not None else None
            checker.add(rec.offset, rec.value, d, command)
            pos += 1
        if progress is not None:
            progress(pos, upto + 1)
    if expect is not None and expect.lower() != checker.digest:
        raise IntegrityError(
            f"the decisions log up to version {upto} hashes to {checker.digest}, not to the "
            f"digest kept for it ({expect[:64]})",
            upto,
        )
    return ChainReport(upto, checker.digest, checker.first_chained)
