"""Events that can evolve: logs written with v1 schemas stay readable, verifiable and auditable
by code whose records have newer versions (Avro schema resolution, then upcasters)."""

from __future__ import annotations

import copy
import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import claimgraph
from claimgraph.core.avro import (
    AvroDecodeError,
    UnsupportedSchema,
    compile_decoder,
    compile_encoder,
    compile_resolving_decoder,
)
from claimgraph.core.registry import Registry, SchemaVersion, load
from claimgraph.core.wire import (
    decode_command,
    decode_decision,
    decode_run_event,
    encode_command,
    encode_decision,
    encode_run_event,
    fingerprint_table,
    registry,
    same_decision,
    use_registry,
)
from claimgraph.errors import DecodeError, IntegrityError
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA
from tests.golden_records import COMMANDS, DECISION, RUN_EVENT

NOTE = "absent-in-v1"  # the default of the field decision v2 adds


def _v1(record: str) -> dict[str, Any]:
    """The raw JSON of ``record``'s v1 schema (a fresh copy to edit into a v2)."""
    return copy.deepcopy(registry().versions(record)[0].schema)


def _with_fields(raw: dict[str, Any], *fields: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["fields"] = [*out["fields"], *fields]
    return out


# decision is at v3 in production (rules revisions, place): the test adds a v4 on top of it
DECISION_V2 = _with_fields(
    copy.deepcopy(registry().current("decision").schema),
    {"name": "added_in_v2", "type": "string", "default": NOTE},
)
CLAIM_V2 = _with_fields(
    _v1("claim"),
    {"name": "labels", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "weight", "type": ["null", "double"], "default": None},
)


def _rename_tool(raw: dict[str, Any]) -> dict[str, Any]:
    """run_event with the enum symbol ``tool`` renamed ``tool_call``: resolution cannot."""
    out = copy.deepcopy(raw)
    kind = next(f for f in out["fields"] if f["name"] == "kind")
    kind["type"]["symbols"] = ["tool_call" if s == "tool" else s for s in kind["type"]["symbols"]]
    return out


def _upcast_run_event_v1(event: dict[str, Any]) -> dict[str, Any]:
    if event["kind"] == "tool":
        event["kind"] = "tool_call"
    return event


RUN_EVENT_V2 = _rename_tool(_v1("run_event"))
RUN_EVENT_V3 = _with_fields(RUN_EVENT_V2, {"name": "host", "type": "string", "default": "?"})


@pytest.fixture
def evolved() -> Iterator[Registry]:
    """The production registry plus a v2 of decision and claim (test-only, added fields)."""
    reg = registry().with_version("decision", DECISION_V2).with_version("claim", CLAIM_V2)
    with use_registry(reg):
        yield reg


# -- the registry ----------------------------------------------------------------------------


def test_production_records_are_the_catalogue_at_v1() -> None:
    """Every record the wire knows has its packaged versions: v1; decision v2 (rules
    revisions) and v3 (the ``place`` command type); read_blocked v2 (pinned_version)."""
    reg = load()
    assert set(reg.records()) == {*COMMANDS, "decision", "run_event"}
    assert {(sv.record, sv.version) for sv in reg.all() if sv.version != 1} == {
        ("decision", 2),
        ("decision", 3),
        ("read_blocked", 2),
    }
    assert len(fingerprint_table()) == len(reg.all())


def test_a_version_that_does_not_change_the_canonical_form_is_refused() -> None:
    """A v2 with only a new doc string has v1's fingerprint: the registry refuses it."""
    same = dict(_v1("tick"), doc="only the documentation changed")
    with pytest.raises(UnsupportedSchema, match="has the fingerprint of tick v1"):
        registry().with_version("tick", same)


def test_version_files_must_be_numbered_from_one(tmp_path: Path) -> None:
    """Versions are v1..vN with no gap, read from <record>/v<N>.avsc."""
    (tmp_path / "tick").mkdir()
    (tmp_path / "tick" / "v2.avsc").write_text(json.dumps(_v1("tick")))
    with pytest.raises(UnsupportedSchema, match=r"tick has versions \[2\], not 1..N"):
        load(tmp_path)
    (tmp_path / "tick" / "v2.avsc").rename(tmp_path / "tick" / "v1.avsc")
    assert load(tmp_path).current("tick").version == 1


def test_a_step_resolution_cannot_do_needs_an_upcaster() -> None:
    """Renaming an enum symbol without an upcaster is refused when the registry is built."""
    with pytest.raises(UnsupportedSchema, match=r"run_event v1 cannot be read as v2.*'tool'"):
        registry().with_version("run_event", RUN_EVENT_V2)
    with pytest.raises(UnsupportedSchema, match="no v2"):
        registry().with_upcaster("run_event", 1, _upcast_run_event_v1)
    no_default = _with_fields(_v1("tick"), {"name": "zone", "type": "string"})
    with pytest.raises(UnsupportedSchema, match=r"'zone' is not in the writer's.*no default"):
        registry().with_version("tick", no_default)


# -- reading old versions --------------------------------------------------------------------


def test_old_records_read_as_the_current_version(evolved: Registry) -> None:
    """v1 bytes (the golden vectors) decode with v2's added fields at their defaults."""
    golden = json.loads((Path(__file__).parent / "golden" / "wire.json").read_text())
    old_claim = bytes.fromhex(golden["commands"]["claim"])
    assert evolved.by_header(old_claim[:10]) == evolved.versions("claim")[0]
    claim: Any = decode_command(old_claim)
    assert claim == {**COMMANDS["claim"], "labels": [], "weight": None}
    claim["labels"].append("x")  # a default list is a fresh one each time
    assert decode_command(old_claim)["labels"] == []  # type: ignore[typeddict-item]
    old_decision = bytes.fromhex(golden["decision"])
    assert decode_decision(old_decision) == {**DECISION, "added_in_v2": NOTE}
    with pytest.raises(DecodeError, match="malformed"):
        decode_decision(old_decision[:-1])  # an old version is read as strictly
    with pytest.raises(DecodeError) as e:
        decode_command(old_decision)  # a decision, of any version, is never a command
    assert e.value.reason == "unknown_fingerprint"


def test_new_fields_round_trip_on_new_records(evolved: Registry) -> None:
    """Writers write v2; its new fields are kept, and its header is v2's fingerprint."""
    cmd = {**COMMANDS["claim"], "labels": ["canary", "eu"], "weight": 0.25}
    data = encode_command(cmd)  # type: ignore[arg-type]
    assert data[:10] == evolved.current("claim").header != evolved.versions("claim")[0].header
    assert decode_command(data) == cmd
    decision = {**DECISION, "added_in_v2": "set by v2"}
    data = encode_decision(decision)  # type: ignore[arg-type]
    assert data[:10] == evolved.current("decision").header
    assert decode_decision(data) == decision
    assert fingerprint_table()[evolved.current("decision").fingerprint.hex()] == ("decision", 4)


def test_upcasters_carry_old_records_over_what_resolution_cannot() -> None:
    """run_event v1 → v2 renames a symbol (an upcaster), v2 → v3 adds a field (resolution)."""
    with_v2 = Registry(
        [*registry().all(), SchemaVersion.of("run_event", 2, RUN_EVENT_V2)],
        {("run_event", 1): _upcast_run_event_v1},
    )
    reg = with_v2.with_version("run_event", RUN_EVENT_V3)
    v1, v2, v3 = reg.versions("run_event")
    tool_v1 = {**RUN_EVENT, "kind": "tool"}
    tool_v2 = {**RUN_EVENT, "kind": "tool_call"}
    with use_registry(reg):
        old = reg.encoder(v1)(tool_v1)
        assert decode_run_event(old) == {**tool_v2, "host": "?"}  # upcast, then resolved
        assert decode_run_event(reg.encoder(v1)(RUN_EVENT)) == {**RUN_EVENT, "host": "?"}
        assert decode_run_event(reg.encoder(v2)(tool_v2)) == {**tool_v2, "host": "?"}
        new = encode_run_event({**tool_v2, "host": "h1"})
        assert new[:10] == v3.header
        assert decode_run_event(new) == {**tool_v2, "host": "h1"}
        with pytest.raises(ValueError, match="'tool' is not a symbol"):
            encode_run_event(tool_v1)  # v3 has no symbol "tool" any more
    assert decode_run_event(encode_run_event(RUN_EVENT)) == RUN_EVENT  # production again


def test_same_decision_compares_in_the_logged_version(evolved: Registry) -> None:
    """A v1 decision matches its replay in v1 bytes, unless the replay differs anywhere."""
    logged = evolved.encoder(evolved.versions("decision")[0])(DECISION)
    replay: Any = decode_decision(logged)
    assert same_decision(logged, replay)
    assert not same_decision(logged, {**replay, "added_in_v2": "other"})  # a newer field
    assert not same_decision(logged, {**replay, "detail": "other"})
    assert not same_decision(logged[:-1], replay)
    assert not same_decision(encode_command(COMMANDS["tick"]), replay)  # type: ignore[arg-type]
    current = encode_decision(replay)
    assert same_decision(current, replay)
    assert not same_decision(current, {**replay, "added_in_v2": "other"})


# -- a whole v1 log, read by v2 code ---------------------------------------------------------


def _write_v1_log(path: Path) -> dict[str, Any]:
    """A graph written by today's code: schema, claims, a quarantine, a resolve, a run."""
    g = claimgraph.open(path, create=True, graph="test")
    try:
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        a = g.assert_("owns", "service:checkout", "database:orders", agent="inventory")
        b = g.assert_("owns", "service:payments", "database:orders", agent="dba", task="audit-1")
        assert b.kind == "quarantined"
        cid = b.decision["conflict_id"]
        g.assert_(
            "runs_in", "service:checkout", "environment:prod", agent="release-1", task="promote"
        )
        g.assert_("depends_on", "service:checkout", "service:payments", agent="inventory")
        g.deny("depends_on", "service:checkout", "service:payments", agent="tracer")
        with g.run(agent="inventory", task="reconcile") as run:
            run.edge("owns", "service:checkout", "database:orders")
            run.quarantine()
            run.tool("lookup", {"q": 1}, {"a": 2})
        assert g.resolve(cid, agent="reviewer", winner=a.decision["command_id"]).kind == "resolved"
        g.tick()
        return {
            "head": g.head(),
            "run_id": run.run_id,
            "edges": _reads(g),
            "decisions": g.decisions(0, 1000),
        }
    finally:
        g.close()


def _reads(g: Graph) -> list[Any]:
    return [
        g.edge("owns", "service:checkout", "database:orders").state,
        g.edge("owns", "service:payments", "database:orders").state,
        g.edge("depends_on", "service:checkout", "service:payments").state,
        g.edge("runs_in", "service:checkout", "environment:prod").state,
        [c["conflict_id"] for c in g.quarantine()],
    ]


def test_a_v1_log_is_read_verified_and_audited_by_v2_code(tmp_path: Path) -> None:
    """A log written wholly with v1 schemas, opened by code where decision and claim have a
    v2: reads are the same, verify reproduces every decision byte for byte, audit passes, the
    run replays; new commands are written as v2 and the mixed log verifies too."""
    before = _write_v1_log(tmp_path / "g")
    reg = registry().with_version("decision", DECISION_V2).with_version("claim", CLAIM_V2)
    v1_headers = {sv.header for sv in registry().all()}
    with use_registry(reg):
        g = claimgraph.open(tmp_path / "g", graph="test")
        try:
            head = before["head"]
            assert g.head() == head
            logged = g.logs.decisions.read(0, head + 1)
            assert {r.value[:10] for r in logged} <= v1_headers  # a log of v1 records only
            assert verify(g).decisions == head + 1
            assert audit(g).head == head
            assert _reads(g) == before["edges"]
            assert g.replay_run(before["run_id"]).identical
            decisions = g.decisions(0, 1000)
            assert [v for v, _ in decisions] == [v for v, _ in before["decisions"]]
            for (_, old), (_, new) in zip(before["decisions"], decisions, strict=True):
                assert new == {**old, "added_in_v2": NOTE}
            claims = [decode_command(r.value) for r in g.logs.commands.read(0, head + 1)]
            assert all(c.get("labels") == [] for c in claims if c["type"] == "claim")

            r = g.submit(
                [
                    {
                        **COMMANDS["claim"],
                        "command_id": "v2-claim",
                        "graph": "test",
                        "agent": "inventory",
                        "task": "",
                        "edge_type": "depends_on",
                        "subject_type": "service",
                        "subject_id": "search",
                        "object_type": "service",
                        "object_id": "payments",
                        "based_on_version": None,
                        "run_id": None,
                        "properties": {},
                        "labels": ["canary"],
                    }
                ]
            )[0]
            assert r.kind == "accepted", r.decision
            new_record = g.logs.decisions.get(r.version)
            assert new_record is not None
            assert new_record.value[:10] == reg.current("decision").header
            command = g.logs.commands.read(head + 1, 1)[0].value
            assert command[:10] == reg.current("claim").header
            assert decode_command(command)["labels"] == ["canary"]  # type: ignore[typeddict-item]
            assert verify(g).decisions == head + 2  # v1 and v2 decisions, one log
            assert audit(g).head == head + 1
        finally:
            g.close()


def test_verify_of_an_old_log_still_finds_a_changed_decision(tmp_path: Path) -> None:
    """Reading v1 through v2 does not blunt verify: a tampered v1 decision is named."""
    from rocksdict import WriteBatch

    _write_v1_log(tmp_path / "g")
    reg = registry().with_version("decision", DECISION_V2)
    with use_registry(reg):
        g = claimgraph.open(tmp_path / "g", graph="test")
        try:
            t = 1
            rec = g.logs.decisions.get(t)
            assert rec is not None
            tampered = rec.value.replace(b"inventory", b"inventorx", 1)
            assert tampered != rec.value
            wb = WriteBatch(raw_mode=True)  # overwrite the record in place (embedded layout)
            wb.put(b"D" + t.to_bytes(8, "big"), rec.timestamp.to_bytes(8, "big") + tampered)
            g.logs.write(wb)
            with pytest.raises(IntegrityError, match=f"version {t}"):
                verify(g)
        finally:
            g.close()


# -- compiled resolution against fastavro ----------------------------------------------------

WRITER = {
    "type": "record",
    "name": "R",
    "namespace": "n.v1",
    "fields": [
        {"name": "a", "type": "int"},
        {"name": "b", "type": "long"},
        {"name": "gone", "type": {"type": "map", "values": "string"}},
        {"name": "c", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["x", "y"]}},
        {"name": "o", "type": ["null", "int"]},
        {"name": "arr", "type": {"type": "array", "items": "int"}},
        {"name": "old_name", "type": "bytes"},
        {"name": "plain", "type": "long"},
    ],
}
READER = {
    "type": "record",
    "name": "R",
    "namespace": "n.v2",
    "fields": [
        {"name": "new_list", "type": {"type": "array", "items": "long"}, "default": [1, 2]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["z", "y", "x"]}},
        {"name": "c", "type": "bytes"},
        {"name": "b", "type": "double"},
        {"name": "a", "type": "long"},
        {"name": "o", "type": ["null", "long"]},
        {"name": "arr", "type": {"type": "array", "items": "double"}},
        {"name": "new_name", "type": "string", "aliases": ["old_name"]},
        {"name": "plain", "type": ["null", "long"]},
        {"name": "rec", "type": {
            "type": "record", "name": "Inner",
            "fields": [{"name": "k", "type": "string", "default": "kk"}],
        }, "default": {"k": "given"}},
    ],
}  # fmt: skip


def _writer_values() -> st.SearchStrategy[dict[str, Any]]:
    ints = st.integers(-(2**31), 2**31 - 1)
    return st.fixed_dictionaries(
        {
            "a": ints,
            "b": st.integers(-(2**63), 2**63 - 1),
            "gone": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
            "c": st.text(max_size=10),
            "e": st.sampled_from(["x", "y"]),
            "o": st.none() | ints,
            "arr": st.lists(ints, max_size=4),
            "old_name": st.text(max_size=6).map(str.encode),
            "plain": st.integers(-(2**63), 2**63 - 1),
        }
    )


def _same(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit; key order not compared (fastavro puts defaults last)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=200, deadline=None)
@given(_writer_values())
def test_compiled_resolution_matches_fastavro(record: dict[str, Any]) -> None:
    """Added, dropped, aliased, promoted, reordered fields: the values fastavro's reader gives."""
    writer, reader = fastavro.parse_schema(WRITER), fastavro.parse_schema(READER)
    data = compile_encoder(writer)(record)
    ours = compile_resolving_decoder(WRITER, READER)(data)
    theirs = fastavro.schemaless_reader(io.BytesIO(data), writer, reader)
    assert _same(ours, theirs)
    assert list(ours) == [f["name"] for f in READER["fields"]]  # the reader's field order
    assert ours["b"] == float(record["b"]) and ours["new_name"] == record["old_name"].decode()


def test_resolution_fails_only_with_avro_decode_error() -> None:
    """Truncated or trailing bytes of the writer's schema are AvroDecodeError, as without it."""
    record = {
        "a": 1, "b": 2, "gone": {"k": "v"}, "c": "c", "e": "y", "o": None, "arr": [3],
        "old_name": b"\xff", "plain": 4,
    }  # fmt: skip
    data = compile_encoder(WRITER)(record)
    decode = compile_resolving_decoder(WRITER, READER)
    with pytest.raises(AvroDecodeError, match="invalid UTF-8"):
        decode(data)  # bytes read as a string must be UTF-8
    ok = compile_encoder(WRITER)({**record, "old_name": b"ok"})
    assert decode(ok)["new_name"] == "ok"
    for bad in (ok[:-1], ok + b"\x00", ok[:3]):
        with pytest.raises(AvroDecodeError):
            decode(bad)
    assert compile_decoder(WRITER)(ok) == {**record, "old_name": b"ok"}


@pytest.mark.parametrize(
    ("writer", "reader", "match"),
    [
        ("long", "int", "cannot resolve the writer's long as the reader's int"),
        ("string", "long", "cannot resolve"),
        (["null", "long"], "long", "cannot resolve the writer's union"),
        (
            {"type": "enum", "name": "E", "symbols": ["a", "b"]},
            {"type": "enum", "name": "E", "symbols": ["a"]},
            "symbol 'b'",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["a"]},
            {"type": "enum", "name": "F", "symbols": ["a"]},
            "cannot resolve",
        ),
        (
            {"type": "record", "name": "R", "fields": []},
            {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]},
            "'x' is not in the writer's R and has no default",
        ),
        (
            {"type": "record", "name": "R", "fields": []},
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "x", "type": "long", "default": "seven"}],
            },
            "x: 'seven' is not a long",
        ),
    ],
)
def test_unresolvable_schemas_are_refused_at_compile_time(
    writer: Any, reader: Any, match: str
) -> None:
    """What resolution could fail on at read time is refused when compiled."""
    with pytest.raises(UnsupportedSchema, match=match):
        compile_resolving_decoder(writer, reader)


def test_enum_default_takes_unknown_symbols() -> None:
    """A writer's symbol the reader lacks becomes the reader enum's default."""
    writer = {"type": "enum", "name": "E", "symbols": ["a", "b"]}
    reader = {"type": "enum", "name": "E", "symbols": ["a", "other"], "default": "other"}
    decode = compile_resolving_decoder(writer, reader)
    enc = compile_encoder(writer)
    assert [decode(enc(s)) for s in ("a", "b")] == ["a", "other"]
    for s in ("a", "b"):
        expected = fastavro.schemaless_reader(
            io.BytesIO(enc(s)), fastavro.parse_schema(writer), fastavro.parse_schema(reader)
        )
        assert decode(enc(s)) == expected
