"""Erasure in the projection: scrub an erased claim's payload at every version (see erasure.py).

The decision is pure (:mod:`claimgraph.core.erasure`); this module does the I/O: on an accepted
erase at version E the projector rewrites the claim's record (family ``R``, the one row that
holds its payload; its later status rows ``K`` hold none) with the payload replaced by the
tombstone and ``"erased": E``, writes an erasure row (family ``X``) at E, compacts the
record's keys so the overwritten bytes leave the files, and scrubs checkpoints. Every read of
the claim, at every version, then shows the tombstone and ``erased``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from rocksdict import Rdict, WriteBatch, WriteOptions

from claimgraph.core.erasure import scrub_row
from claimgraph.logs.rocks import get, named, valid, write
from claimgraph.projections.damage import projection_place
from claimgraph.projections.iterators import release_iterators
from claimgraph.projections.rows import (
    LAYOUT,
    LAYOUT_KEY,
    RECORD,
    decode_record,
    dumps,
    encode_record,
    entity_key,
    loads,
    pack_version,
)

if TYPE_CHECKING:
    from claimgraph.projections.projector import Projector

__all__ = ["ERASED", "erased_at", "purge", "scrub_claim", "scrub_dir", "stage_erase"]

ERASED = b"X"  # erasure rows: X ‖ claim id ‖ 0x00 ‖ inv(version of the erase)


def scrub_claim(db: Rdict, wb: WriteBatch, claim_id: str, version: int) -> int:
    """Stage the scrubbed record rows of ``claim_id`` and its erasure row into ``wb``."""
    prefix = RECORD + claim_id.encode("utf-8") + b"\x00"
    it = db.iter()
    it.seek(prefix)
    n = 0
    while valid(it, projection_place(db), f"scrubbing claim {claim_id!r}", version):
        k: bytes = it.key()
        if not k.startswith(prefix) or len(k) != len(prefix) + 8:
            break
        row, status = decode_record(claim_id, it.value())
        if row.get("erased") is None:
            wb.put(k, encode_record(scrub_row(row, version), status))
            n += 1
        it.next()
    wb.put(entity_key(ERASED, claim_id, version), dumps(version))
    return n


def stage_erase(projector: Projector, claim_id: str, version: int) -> None:
    """Projector hook for an accepted erase at ``version``: the scrubbed rows go into the
    projector's current batch, with the decision's applied offset (never ahead of the log)."""
    wb = projector._wb
    scrub_claim(projector.store.db, wb, claim_id, version)  # a record already written
    staged = projector._staged_records.get(claim_id)  # a record earlier in this batch
    if staged is not None and staged[1].get("erased") is None:
        key, record, status = staged
        scrubbed = scrub_row(record, version)
        wb.put(key, encode_record(scrubbed, status))
        projector._staged_records[claim_id] = (key, scrubbed, status)
    projector.erased.append((claim_id, version))


def purge(db: Rdict, erased: list[tuple[str, int]]) -> None:
    """Drop the overwritten payload bytes from the files: flush, then compact the records' keys."""
    release_iterators(db)  # a cached iterator would keep the old files (and the payload)
    with named(projection_place(db), "compacting erased claims"):
        db.flush()
        for claim_id, _ in erased:
            prefix = RECORD + claim_id.encode("utf-8")
            db.compact_range(prefix + b"\x00", prefix + b"\x01")
    release_iterators(db)  # ... also one a read made while the compaction ran


def erased_at(db: Rdict, claim_id: str) -> int | None:
    """The version at which a claim's payload was erased (None: it was not)."""
    prefix = ERASED + claim_id.encode("utf-8") + b"\x00"
    it = db.iter()
    it.seek(prefix)
    if (
        valid(it, projection_place(db), f"reading the erasure of {claim_id!r}")
        and it.key().startswith(prefix)
        and len(it.key()) == len(prefix) + 8
    ):
        return int(loads(it.value()))
    return None


def scrub_dir(root: Path, erased: list[tuple[str, int]]) -> int:
    """Scrub erased claims from every checkpoint's projection under ``root``; rows rewritten.
    A checkpoint whose projection is of an older row layout is removed instead."""
    from claimgraph.logs.rocks import open_rdict

    if not erased or not root.is_dir():
        return 0
    n = 0
    for cp in sorted(root.iterdir()):
        if not (cp / "checkpoint.json").is_file():
            continue
        db = open_rdict(cp / "projection", create=False)
        if get(db, LAYOUT_KEY, projection_place(db), "reading the row layout") != pack_version(
            LAYOUT
        ):  # rows of an older layout, which hold payloads elsewhere: drop the checkpoint
            db.close()
            shutil.rmtree(cp)
            continue
        try:
            wb = WriteBatch(raw_mode=True)
            for claim_id, version in erased:
                n += scrub_claim(db, wb, claim_id, version)
            write(db, wb, WriteOptions(), projection_place(db), "scrubbing a checkpoint")
            purge(db, erased)
        finally:
            db.close()
    return n
