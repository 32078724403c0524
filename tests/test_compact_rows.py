"""Projection layout 2 (claimgraph.projections.rows): compact rows, and the upgrade of older stores.

* the binary values (claim records, history rows, claim status rows) decode to exactly what
  was encoded — key order and value types included — for any strings and numbers;
* a claim's record is written once, however often its status changes;
* a projection of layout 1 (claim rows holding the whole record, JSON history rows; written
  here by the layout-1 encoder kept below) is re-projected when its graph is opened, with
  progress, and every read — and the audit digest — is the same before and after.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json
from rocksdict import Rdict, WriteBatch

import claimgraph
from claimgraph.core.erasure import scrub_row
from claimgraph.errors import StorageError
from claimgraph.logconf import Event
from claimgraph.projections.checkpoints import checkpoint_graph
from claimgraph.projections.erasure import scrub_dir
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.rows import (
    CLAIM,
    EDGE,
    HISTORY,
    LAYOUT,
    LAYOUT_KEY,
    RECORD,
    RECORD_KEYS,
    STATIC,
    decode_history,
    decode_record,
    decode_status,
    encode_history,
    encode_record,
    encode_status,
    entity_key,
    version_of,
)
from claimgraph.service.audit import digest_at
from tests.legacy import restore

text = st.text(max_size=300) | st.sampled_from([s for s in STATIC if s is not None])
opt_text = st.none() | text
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)

records = st.fixed_dictionaries(
    {
        "claim_id": text,
        "agent": text,
        "task": text,
        "run_id": opt_text,
        "edge_type": text,
        "subject_type": text,
        "subject_id": text,
        "object_type": text,
        "object_id": text,
        "polarity": st.sampled_from(["assert", "deny"]),
        "confidence": st.floats(allow_nan=False),
        "evidence": st.lists(text, max_size=5),
        "reasoning": text,
        "asserted_at": i64,
        "based_on_version": st.none() | i64,
        "properties": st.dictionaries(text, text, max_size=5),
    }
)  # in any key order: a record in the Avro order is stored binary, any other one as JSON
in_order = records.map(lambda d: {k: d[k] for k in RECORD_KEYS})


def same(a: Any, b: Any) -> bool:
    """Equal, with the same key order and the same JSON types (1 is not 1.0)."""
    return bool(to_json(a) == to_json(b))


@settings(max_examples=300, deadline=None)
@given(in_order, st.none() | st.integers(min_value=0, max_value=2**63 - 1), records)
def test_records_decode_to_what_was_encoded(
    record: dict[str, Any], erased: int | None, shuffled: dict[str, Any]
) -> None:
    if erased is not None:
        record = scrub_row(record, erased)
    raw = encode_record(record, "withheld")
    assert raw[:1] == b"\x01"  # the binary layout, not the JSON fallback
    assert same(decode_record(record["claim_id"], raw), [record, "withheld"])
    back = decode_record(shuffled["claim_id"], encode_record(shuffled, "visible"))
    assert same(back, [shuffled, "visible"])


def test_a_record_of_another_shape_is_kept_exactly_as_json() -> None:
    odd = {"claim_id": "c", "confidence": 1, "extra": [1, 2.5, None]}
    raw = encode_record(odd, "lost")
    assert raw[:1] == b"\x00" and same(decode_record("c", raw), [odd, "lost"])
    ints = dict.fromkeys(RECORD_KEYS, "x") | {"confidence": 1}  # int, not float
    assert same(decode_record("x", encode_record(ints, "lost")), [ints, "lost"])


@settings(max_examples=300, deadline=None)
@given(
    st.tuples(
        text, text, text, text, text, i64,
        st.lists(st.tuples(text, st.sampled_from(["visible", "lost", "withheld"])), max_size=4),
        st.sampled_from(["present", "absent", "unknown"]), opt_text, st.lists(text, max_size=4),
    )
)  # fmt: skip
def test_history_rows_decode_to_the_layout_1_dict(fields: tuple[Any, ...]) -> None:
    raw = encode_history(*fields)
    kind, reason, command_id, command_type, agent, log_time, claims, state, cf, visible = fields
    want = {
        "kind": kind,
        "reason": reason,
        "command_id": command_id,
        "command_type": command_type,
        "agent": agent,
        "log_time": log_time,
        "claims": [list(c) for c in claims],
        "state": state,
        "conflict_id": cf,
        "visible": visible,
    }
    assert same(decode_history(raw), want)


def test_repeated_strings_are_stored_once() -> None:
    cid = "57ee05cd-e009-42c7-bebf-f20686734721"
    raw = encode_history("accepted", "new", cid, "claim", "a", 1, [(cid, "visible")], "present",
                         None, [cid])  # fmt: skip
    assert raw.count(cid.encode()) == 1 and len(raw) < 2 * len(cid)
    assert [decode_status(encode_status(s)) for s in ("visible", "retired")] == [
        "visible",
        "retired",
    ]


def _families(db: Rdict) -> dict[bytes, list[tuple[bytes, bytes]]]:
    out: dict[bytes, list[tuple[bytes, bytes]]] = {}
    it = db.iter()
    it.seek_to_first()
    while it.valid():
        out.setdefault(it.key()[:1], []).append((it.key(), it.value()))
        it.next()
    return out


def test_a_record_is_written_once_however_often_the_status_changes(tmp_path: Path) -> None:
    """One R row per claim, at the version it was decided, with the status it got then; a K
    row (one byte) for each later status change only."""
    with claimgraph.open(restore(tmp_path / "g", "kitchen")) as g:
        rows = _families(g.projection.db)
        changes: dict[str, list[int]] = {}
        for k, _ in rows[CLAIM]:
            changes.setdefault(k[1:-9].decode(), []).append(version_of(k))
        records = {k[1:-9].decode(): version_of(k) for k, _ in rows[RECORD]}
        assert len(records) == len(rows[RECORD])  # one record per claim
        assert set(changes) <= set(records) and max(map(len, changes.values())) > 1
        assert all(min(vs) > records[c] for c, vs in changes.items())  # later changes only
        assert all(len(v) == 1 for _, v in rows[CLAIM])
        for c, v in records.items():
            want = g.reader.claim(c, v)
            assert want is not None and want["since"] == v
        assert g.projection.layout() == LAYOUT


# -- the upgrade of a layout-1 store ------------------------------------------------------------


def to_layout_1(db: Rdict) -> int:
    """Rewrite a projection as layout 1 wrote it: every claim row the whole record + status +
    since (+ erased), history rows JSON, no record rows, no layout marker. Rows rewritten."""
    rows = _families(db)
    records = {k[1:-9].decode(): decode_record(k[1:-9].decode(), v) for k, v in rows[RECORD]}
    wb = WriteBatch(raw_mode=True)
    n = 0

    def claim_row(claim_id: str, status: str, since: int) -> None:
        record = dict(records[claim_id][0])
        erased = record.pop("erased", None)
        row = record | {"status": status, "since": since}
        if erased is not None:
            row["erased"] = erased
        wb.put(entity_key(CLAIM, claim_id, since), to_json(row))

    for k, _ in rows[RECORD]:
        claim_row(k[1:-9].decode(), records[k[1:-9].decode()][1], version_of(k))
        n += 1
    for k, v in rows[CLAIM]:
        claim_row(k[1:-9].decode(), decode_status(v), version_of(k))
        n += 1
    for k, v in rows[HISTORY]:
        wb.put(k, to_json(decode_history(v)))
        n += 1
    for k, _ in rows[RECORD]:
        wb.delete(k)
    wb.delete(LAYOUT_KEY)
    db.write(wb)
    return n


def reads(g: Any) -> dict[str, Any]:
    """Every read of the read API at every version, and the digest at each."""
    r = g.reader
    head = g.head()
    claim_ids = [ent for ent, _ in r.scan(RECORD, head)]
    edges = [ent.split("\x1f") for ent, _ in r.scan(EDGE, head)]
    out: dict[str, Any] = {}
    for v in range(head + 1):
        out[f"digest@{v}"] = digest_at(r, v)
        out[f"edges@{v}"] = [e.as_dict() for e in r.edges(v, include_absent=True)]
        out[f"claims@{v}"] = [r.claim(c, v) for c in claim_ids]
        for et, s_t, s_i, o_t, o_i in edges:
            out[f"history {et} {s_i} {o_i}@{v}"] = r.history(et, (s_t, s_i), (o_t, o_i), v)
            out[f"neighbors {s_i}@{v}"] = [
                n.as_dict() for n in r.neighbors((s_t, s_i), v, include_absent=True, halt=False)
            ]
    return out


def test_a_layout_1_store_is_reprojected_on_open_and_reads_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = restore(tmp_path / "g", "kitchen")
    with claimgraph.open(path) as g:
        before = reads(g)
        head = g.head()
        erased = [c for c in before[f"claims@{head}"] if c is not None and "erased" in c]
        assert erased  # the kitchen graph erases a claim: its payload must stay gone
        checkpoint_graph(g)
        assert to_layout_1(g.projection.db) > 0
        assert g.projection.outdated and g.projection.layout() == 1
        with pytest.raises(StorageError, match="row layout 1"):  # never misread
            ProjectionReader(g.projection.db)
    caplog.set_level(logging.INFO, logger="claimgraph.storage")
    caplog.clear()
    seen: list[tuple[int, int]] = []
    with claimgraph.open(path, progress=lambda done, total: seen.append((done, total))) as g:
        events = [r.msg.name for r in caplog.records if isinstance(r.msg, Event)]
        assert events[0] == "projection.upgrade" and events[-1] == "projection.upgraded"
        assert seen and seen[-1] == (head + 1, head + 1)
        assert g.projection.layout() == LAYOUT and not g.projection.outdated
        rows = _families(g.projection.db)
        assert all(v[:1] != b"{" for _, v in rows[CLAIM])  # no layout-1 row is left
        assert not list((path / "checkpoints").iterdir())  # checkpoints of layout 1 are gone
        after = reads(g)
        assert after.keys() == before.keys()
        for key, value in before.items():
            assert same(after[key], value), key
    caplog.clear()
    with claimgraph.open(path) as g:  # the next open does not upgrade again
        assert "projection.upgrade" not in caplog.text
        assert same(reads(g), before)


def test_the_native_row_writer_has_the_same_static_strings() -> None:
    """native/src/rows.rs writes the same tokens (its match is generated from STATIC)."""
    src = (Path(__file__).parent.parent / "native" / "src" / "rows.rs").read_text("utf-8")
    arms = {s: int(i) for s, i in re.findall(r'^\s*"([^"\\]*)" => (\d+),$', src, re.M)}
    assert arms == {s: i for i, s in enumerate(STATIC) if s is not None}
    assert re.search(r"const NSTATIC: usize = (\d+);", src)[1] == str(len(STATIC))  # type: ignore[index]
    assert len(set(STATIC)) == len(STATIC)


def test_an_erasure_removes_a_checkpoint_of_layout_1(tmp_path: Path) -> None:
    """After ``rebuild`` of a layout-1 graph its checkpoints keep layout-1 rows, whose claim
    rows hold payloads where a layout-2 scrub does not look: an erasure removes them."""
    path = restore(tmp_path / "g", "kitchen")
    with claimgraph.open(path) as g:
        info = checkpoint_graph(g)
        claim_id = next(ent for ent, _ in g.reader.scan(RECORD, g.head()))
    db = Rdict(str(info.path / "projection"))
    try:
        assert to_layout_1(db) > 0
    finally:
        db.close()
    assert scrub_dir(path / "checkpoints", [(claim_id, info.version)]) == 0
    assert not info.path.exists()
