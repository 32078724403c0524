"""The wire contract: Avro single-object encoding, golden vectors, and hostile bytes."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given, settings
from hypothesis import strategies as st

from claimgraph.core.avro import (
    AvroDecodeError,
    UnsupportedSchema,
    compile_decoder,
    compile_encoder,
)
from claimgraph.core.governor import decide
from claimgraph.core.state import GraphState
from claimgraph.core.wire import (
    decode_command,
    decode_decision,
    decode_run_event,
    encode_command,
    encode_decision,
    encode_run_event,
    fingerprint_table,
    fingerprints,
    registry,
    same_decision,
    schema_dir,
)
from claimgraph.errors import DecodeError
from tests.golden_records import COMMANDS, DECISION, DECISION_V1, RUN_EVENT

GOLDEN = json.loads((Path(__file__).parent / "golden" / "wire.json").read_text())


def _crc64_avro(data: bytes) -> int:
    """The Avro specification's reference CRC-64-AVRO fingerprint, written out here."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp


VERSION_FILES = sorted(schema_dir().glob("*/v*.avsc"))


@pytest.mark.parametrize("path", VERSION_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fingerprints_follow_the_avro_spec(path: Path) -> None:
    """Each version file's fingerprint is CRC-64-AVRO of its canonical form, little-endian."""
    raw = json.loads(path.read_text())
    canonical = to_parsing_canonical_form(raw).encode()
    expected = _crc64_avro(canonical).to_bytes(8, "little").hex()
    assert fingerprint_table()[expected] == (path.parent.name, int(path.stem[1:]))


def test_fingerprint_table_is_every_version_once() -> None:
    """The table holds every .avsc version file, and no two versions share a fingerprint."""
    assert VERSION_FILES, "no schema version files found"
    assert sorted(fingerprint_table().values()) == sorted(
        (p.parent.name, int(p.stem[1:])) for p in VERSION_FILES
    )
    assert len(fingerprint_table()) == len(VERSION_FILES)


def test_golden_fingerprints_are_the_current_versions() -> None:
    """What writers write today is what tests/golden/wire.json pins."""
    assert fingerprints() == GOLDEN["fingerprints"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_golden_bytes(name: str) -> None:
    """Encoding a fixed command gives the pinned bytes, and decoding gives it back."""
    data = encode_command(COMMANDS[name])  # type: ignore[arg-type]
    assert data.hex() == GOLDEN["commands"][name]
    assert data[:2] == b"\xc3\x01"
    assert data[2:10].hex() == GOLDEN["fingerprints"][name]
    assert decode_command(data) == COMMANDS[name]


def test_decision_golden_bytes() -> None:
    """A fixed decision encodes to the pinned bytes and decodes back."""
    data = encode_decision(DECISION)  # type: ignore[arg-type]
    assert data.hex() == GOLDEN["decision"]
    assert decode_decision(data) == DECISION


def test_a_decision_revision_1_wrote_reads_with_the_v2_defaults() -> None:
    """The pinned v1 decision bytes (before rules revisions) read as rules 1, unchained."""
    old = bytes.fromhex(GOLDEN["decision_v1"])
    assert old[2:10].hex() == GOLDEN["fingerprints_v1"]["decision"]
    assert decode_decision(old) == DECISION_V1
    assert same_decision(old, DECISION_V1)  # type: ignore[arg-type]
    assert not same_decision(old, DECISION)  # type: ignore[arg-type]


def test_a_decision_v2_wrote_reads_as_the_current_version() -> None:
    """The pinned v2 decision bytes (before ``place`` joined the command types) read back
    unchanged, and verify re-encodes a replayed decision with v2 to compare them."""
    old = bytes.fromhex(GOLDEN["decision_v2"])
    assert old[2:10].hex() == GOLDEN["fingerprints_v2"]["decision"]
    assert old[2:10].hex() != GOLDEN["fingerprints"]["decision"]
    assert decode_decision(old) == DECISION
    assert same_decision(old, DECISION)  # type: ignore[arg-type]


def test_a_read_blocked_revision_1_wrote_reads_with_no_pinned_version() -> None:
    """The pinned v1 read_blocked bytes read back with pinned_version -1 (not given)."""
    old = bytes.fromhex(GOLDEN["commands_v1"]["read_blocked"])
    assert old[2:10].hex() == GOLDEN["fingerprints_v1"]["read_blocked"]
    assert decode_command(old) == {**COMMANDS["read_blocked"], "pinned_version": -1}


def test_run_event_golden_bytes() -> None:
    """A fixed run-trace event encodes to the pinned bytes and decodes back."""
    data = encode_run_event(RUN_EVENT)
    assert data.hex() == GOLDEN["run_event"]
    assert decode_run_event(data) == RUN_EVENT


def test_truncated_records_never_decode() -> None:
    """Every strict prefix of a valid record raises DecodeError, never anything else."""
    for name in COMMANDS:
        data = bytes.fromhex(GOLDEN["commands"][name])
        for cut in range(len(data)):
            with pytest.raises(DecodeError):
                decode_command(data[:cut])


def test_trailing_bytes_are_malformed() -> None:
    """Bytes after a complete record make it malformed."""
    data = bytes.fromhex(GOLDEN["commands"]["tick"]) + b"\x00"
    with pytest.raises(DecodeError) as e:
        decode_command(data)
    assert e.value.reason == "malformed"


def test_unknown_fingerprint() -> None:
    """A well-formed header with a fingerprint we do not know is named as such."""
    with pytest.raises(DecodeError) as e:
        decode_command(b"\xc3\x01" + b"\x11" * 8 + b"\x00")
    assert e.value.reason == "unknown_fingerprint"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_become_recorded_rejections(data: bytes) -> None:
    """Arbitrary bytes given to the governor yield one rejected decision (or a valid one)."""
    state = GraphState("platform")
    d = decide(state, data, 0, 1)
    assert d["kind"] == "rejected"
    encode_decision(d)  # the rejection itself is a valid record


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(COMMANDS)), st.data())
def test_mutated_records_decode_or_fail_cleanly(name: str, data: st.DataObject) -> None:
    """Flipping bytes in a valid record gives a record or a DecodeError, never a crash."""
    raw = bytearray(bytes.fromhex(GOLDEN["commands"][name]))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    try:
        decoded: Any = decode_command(bytes(raw))
    except DecodeError:
        return
    assert isinstance(decoded, dict)
    d = decide(GraphState("platform"), bytes(raw), 0, 1)
    encode_decision(d)


@settings(max_examples=100, deadline=None)
@given(
    st.text(min_size=1, max_size=40),
    st.floats(0, 1),
    st.lists(st.text(max_size=20), max_size=5),
    st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=10), max_size=4),
)
def test_encode_decode_identity(
    cid: str, conf: float, evidence: list[str], props: dict[str, str]
) -> None:
    """decode(encode(command)) == command for arbitrary field values."""
    cmd = dict(
        COMMANDS["claim"], command_id=cid, confidence=conf, evidence=evidence, properties=props
    )
    assert decode_command(encode_command(cmd)) == cmd  # type: ignore[arg-type]


# -- the compiled codec (claimgraph.core.avro) against fastavro ------------------------------

SCHEMA_NAMES = sorted(GOLDEN["fingerprints"])  # every command schema, and the decision
PARSED = {n: registry().current(n).schema for n in SCHEMA_NAMES}
HEADERS = {n: b"\xc3\x01" + bytes.fromhex(fp) for n, fp in GOLDEN["fingerprints"].items()}
ENCODERS = {n: compile_encoder(s) for n, s in PARSED.items()}
DECODERS = {n: compile_decoder(s) for n, s in PARSED.items()}
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def _avro_write(schema: Any, value: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, value)
    return buf.getvalue()


def _avro_read(schema: Any, data: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(data), schema, None)


def _same(a: Any, b: Any) -> bool:
    """Equal, with floats compared bit for bit (NaN, -0.0) and dict keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _values(schema: Any) -> st.SearchStrategy[Any]:
    """Every valid value of a (fastavro-parsed) schema of the subset our schemas use."""
    if isinstance(schema, list):
        (other,) = [s for s in schema if s != "null"]
        return st.none() | _values(other)
    kind = schema["type"] if isinstance(schema, dict) else schema
    simple: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=12),
        "long": st.integers(LONG_MIN, LONG_MAX),
        "int": st.integers(INT_MIN, INT_MAX),
        "double": st.floats(),
        "boolean": st.booleans(),
    }
    if kind in simple:
        return simple[kind]
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(_values(schema["items"]), max_size=4)
    if kind == "map":
        return st.dictionaries(st.text(max_size=6), _values(schema["values"]), max_size=4)
    assert kind == "record", schema
    required = {f["name"]: _values(f["type"]) for f in schema["fields"] if "default" not in f}
    optional = {f["name"]: _values(f["type"]) for f in schema["fields"] if "default" in f}
    return st.fixed_dictionaries(required, optional=optional)  # a default fills a missing key


@pytest.mark.parametrize("name", SCHEMA_NAMES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_compiled_codec_matches_fastavro(name: str, data: st.DataObject) -> None:
    """Same bytes as fastavro's writer, same values as its reader, through wire.py as well."""
    schema = PARSED[name]
    record = data.draw(_values(schema), label="record")
    expected = _avro_write(schema, record)
    assert ENCODERS[name](record) == expected
    # field order comes from the schema, never from the dict
    assert ENCODERS[name](dict(reversed(record.items()))) == expected
    decoded = _avro_read(schema, expected)
    assert _same(DECODERS[name](expected), decoded)
    if name == "decision":
        on_wire = encode_decision(record)  # type: ignore[arg-type]
        assert on_wire == HEADERS[name] + expected
        assert _same(decode_decision(on_wire), decoded)
    elif name == "run_event":
        on_wire = encode_run_event(record)
        assert on_wire == HEADERS[name] + expected
        assert _same(decode_run_event(on_wire), decoded)
        with pytest.raises(DecodeError):
            decode_command(on_wire)  # a trace event is never taken for a command
    else:
        on_wire = encode_command({**record, "type": name})  # type: ignore[typeddict-item]
        assert on_wire == HEADERS[name] + expected
        assert _same(decode_command(on_wire), {**decoded, "type": name})


_BOUNDARIES = sorted(
    {v for k in range(64) for b in (2**k, -(2**k)) for v in (b - 1, b, b + 1)}
    | {LONG_MIN, LONG_MAX}
)


@pytest.mark.parametrize("kind", ["long", "int"])
def test_integer_boundaries_are_exact(kind: str) -> None:
    """Every power-of-two boundary of the signed range encodes as fastavro does, and back."""
    low, high = (LONG_MIN, LONG_MAX) if kind == "long" else (INT_MIN, INT_MAX)
    enc, dec = compile_encoder(kind), compile_decoder(kind)
    for value in (v for v in _BOUNDARIES if low <= v <= high):
        data = enc(value)  # type: ignore[arg-type]
        assert data == _avro_write(kind, value), value
        assert dec(data) == value == _avro_read(kind, data)
    for bad in (low - 1, high + 1, 2**64, -(2**70)):
        with pytest.raises(ValueError, match="out of the signed"):
            enc(bad)  # type: ignore[arg-type]
    for wrong in (1.0, "1", None):
        with pytest.raises(TypeError):
            enc(wrong)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.integers(LONG_MIN, LONG_MAX))
def test_longs_round_trip(value: int) -> None:
    """Any signed 64-bit long: fastavro's bytes, and the same value back from both readers."""
    data = compile_encoder("long")(value)  # type: ignore[arg-type]
    assert data == _avro_write("long", value)
    assert compile_decoder("long")(data) == value == _avro_read("long", data)


def _zz(n: int) -> bytes:
    """Reference varint of the zigzag of ``n``, written out here (no range check)."""
    z = n << 1 if n >= 0 else (-n << 1) - 1
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return _zz(len(raw)) + raw


def test_varint_limits() -> None:
    """At most 10 bytes and 64 bits for a long, 32 bits for an int; non-minimal is fine."""
    dec_long, dec_int = compile_decoder("long"), compile_decoder("int")
    assert dec_long(b"\xff" * 9 + b"\x01") == LONG_MIN == _avro_read("long", b"\xff" * 9 + b"\x01")
    assert dec_long(b"\xfe" + b"\xff" * 8 + b"\x01") == LONG_MAX
    assert dec_long(b"\x80\x00") == 0 == _avro_read("long", b"\x80\x00")
    assert dec_long(b"\x82\x80\x80\x80\x80\x80\x80\x80\x80\x00") == 1
    for bad in (
        b"\x80" * 10 + b"\x00",  # 11 bytes
        b"\x80" * 20 + b"\x01",
        b"\xff" * 9 + b"\x02",  # 10 bytes, but beyond 64 bits
        b"\xff" * 9 + b"\x7f",
        b"\x80",  # truncated
        b"",
        b"\x02\x00",  # trailing
    ):
        with pytest.raises(AvroDecodeError):
            dec_long(bad)
    assert dec_int(_zz(INT_MIN)) == INT_MIN and dec_int(_zz(INT_MAX)) == INT_MAX
    for bad_int in (_zz(INT_MIN - 1), _zz(INT_MAX + 1), _zz(LONG_MAX)):
        with pytest.raises(AvroDecodeError, match="32-bit"):
            dec_int(bad_int)


def _tick(*fields: bytes) -> bytes:
    return HEADERS["tick"] + b"".join(fields)


def _claim_body(upto: str = "", **changes: bytes) -> bytes:
    """A claim body whose named fields are replaced by the given raw bytes (cut after upto)."""
    parts = {
        "command_id": _s("cmd-1"),
        "graph": _s("platform"),
        "agent": _s("a"),
        "task": _s("t"),
        "run_id": b"\x02" + _s("run-7"),
        "edge_type": _s("e"),
        "subject_type": _s("s"),
        "subject_id": _s("s1"),
        "object_type": _s("o"),
        "object_id": _s("o1"),
        "polarity": b"\x02",
        "confidence": struct.pack("<d", 0.5),
        "evidence": _zz(2) + _s("x") + _s("y") + b"\x00",
        "reasoning": _s("why"),
        "asserted_at": _zz(1795950000000),
        "based_on_version": b"\x02" + _zz(41),
        "properties": _zz(1) + _s("k") + _s("v") + b"\x00",
    }
    assert set(changes) <= set(parts)
    fields = list(parts)[: list(parts).index(upto) + 1] if upto else list(parts)
    return b"".join({**parts, **changes}[f] for f in fields)


def test_claim_body_helper_is_a_valid_claim() -> None:
    """The hand-built body below is a real claim, so each hostile variant differs in one field."""
    decoded = decode_command(HEADERS["claim"] + _claim_body())
    assert decoded["polarity"] == "deny" and decoded["evidence"] == ["x", "y"]  # type: ignore[typeddict-item]


HOSTILE = {
    "negative string length": _tick(_zz(-3) + b"abc"),
    "string longer than the data": _tick(_s("c"), _zz(2**62) + b"xyz"),
    "string length beyond 64 bits": _tick(b"\xff" * 12 + b"\x01"),
    "invalid UTF-8": _tick(_s(b"\xff\xfe")),
    "UTF-8 surrogate": _tick(_s(b"\xed\xa0\x80")),
    "overlong UTF-8": _tick(_s(b"\xc0\xaf")),
    "truncated UTF-8": _tick(_s(b"\xe2\x82")),
    "trailing garbage": _tick(_s("c"), _s("g"), _s("a"), _s("t"), b"\x00"),
    "enum index 2": HEADERS["claim"] + _claim_body(polarity=_zz(2)),
    "enum index -1": HEADERS["claim"] + _claim_body(polarity=_zz(-1)),
    "enum index huge": HEADERS["claim"] + _claim_body(polarity=_zz(2**40)),
    "union index 2": HEADERS["claim"] + _claim_body(run_id=_zz(2) + _s("r")),
    "union index -1": HEADERS["claim"] + _claim_body(run_id=_zz(-1) + _s("r")),
    "double truncated": HEADERS["claim"] + _claim_body("confidence", confidence=b"\x00" * 7),
    "array count beyond the data": HEADERS["claim"] + _claim_body(evidence=_zz(2**61) + _s("x")),
    "array count -2**63": HEADERS["claim"] + _claim_body(evidence=_zz(LONG_MIN) + _zz(0)),
    "negative block size": HEADERS["claim"]
    + _claim_body(evidence=_zz(-1) + _zz(-2) + _s("x") + b"\x00"),
    "block size too small": HEADERS["claim"]
    + _claim_body(evidence=_zz(-1) + _zz(1) + _s("x") + b"\x00"),
    "block size too large": HEADERS["claim"]
    + _claim_body(evidence=_zz(-1) + _zz(3) + _s("x") + b"\x00"),
    "block size beyond the data": HEADERS["claim"]
    + _claim_body(evidence=_zz(-1) + _zz(2**40) + _s("x") + b"\x00"),
    "array without terminator": HEADERS["claim"]
    + _claim_body("evidence", evidence=_zz(1) + _s("x")),
    "map count beyond the data": HEADERS["claim"] + _claim_body(properties=_zz(3) + _s("k")),
    "map key not UTF-8": HEADERS["claim"]
    + _claim_body(properties=_zz(1) + _s(b"\x80") + _s("v") + b"\x00"),
    "overlong varint": HEADERS["claim"] + _claim_body(asserted_at=b"\x80" * 10 + b"\x00"),
    "varint beyond 64 bits": HEADERS["claim"] + _claim_body(asserted_at=b"\xff" * 9 + b"\x03"),
    "int beyond 32 bits": HEADERS["read_blocked"]
    + b"".join(_s(x) for x in ("c", "g", "a", "t"))
    + b"\x00"
    + _s("cf")
    + _zz(2**31),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_commands_are_malformed(case: str) -> None:
    """Each kind of hostile body is a DecodeError("malformed", ...), and nothing else."""
    with pytest.raises(DecodeError) as e:
        decode_command(HOSTILE[case])
    assert e.value.reason == "malformed"
    assert e.value.detail.startswith("not a valid ")


def test_hostile_decisions_are_malformed() -> None:
    """A decision whose boolean is 2, or whose nested union index is bad, does not decode."""
    plain = {**DECISION, "stale": True, "merge": None, "signals": [], "exits": []}
    plain.update(signed_by=None, rules=1, command_sha256="", prev_hash="")
    body = _avro_write(PARSED["decision"], plain)
    # stale, schema, grant, merge, signals, exits, count, run_id, key, signed_by; rules 1, "", ""
    chained = b"\x02\x00\x00"
    tail = b"\x01" + b"\x00" * 9 + chained
    assert body.endswith(tail)
    head = body[: -len(tail)]
    for bad in (
        head + b"\x02" + tail[1:],  # a boolean that is 2
        head + b"\x01\x04" + tail[2:],  # union index 2 of a two-branch union
        body[: -len(chained) - 1] + b"\x04" + chained,  # the same in signed_by
    ):
        with pytest.raises(DecodeError) as e:
            decode_decision(HEADERS["decision"] + bad)
        assert e.value.reason == "malformed"
    assert decode_decision(HEADERS["decision"] + body)["stale"] is True


def test_negative_block_counts_decode() -> None:
    """Blocks written with a negative count and a byte size (as other writers may) decode."""
    evidence = _zz(-2) + _zz(4) + _s("x") + _s("y") + _zz(1) + _s("z") + b"\x00"
    properties = _zz(-1) + _zz(4) + _s("k") + _s("v") + _zz(-1) + _zz(4) + _s("k") + _s("w")
    body = _claim_body(evidence=evidence, properties=properties + b"\x00")
    decoded = decode_command(HEADERS["claim"] + body)
    expected = _avro_read(PARSED["claim"], body)
    assert _same(decoded, {**expected, "type": "claim"})
    assert decoded["evidence"] == ["x", "y", "z"]  # type: ignore[typeddict-item]
    assert decoded["properties"] == {"k": "w"}  # type: ignore[typeddict-item]


def test_long_strings_and_big_blocks_match_fastavro() -> None:
    """Lengths and counts past the varint tables (2 bytes and more) are written as fastavro does."""
    record = dict(
        COMMANDS["claim"],
        reasoning="é" * 70_000,
        evidence=[str(i) for i in range(9000)],
        properties={f"k{i}": "v" * (i % 300) for i in range(9000)},
        asserted_at=LONG_MIN,
        based_on_version=LONG_MAX,
    )
    expected = _avro_write(PARSED["claim"], record)
    data = encode_command(record)  # type: ignore[arg-type]
    assert data == HEADERS["claim"] + expected
    assert decode_command(data) == record
    raw = dict(COMMANDS["invalid_input"], raw=bytes(range(256)) * 300)
    assert encode_command(raw) == HEADERS["invalid_input"] + _avro_write(  # type: ignore[arg-type]
        PARSED["invalid_input"], raw
    )


def test_decoders_take_any_bytes_like() -> None:
    """bytearray and memoryview decode as their bytes do."""
    data = bytes.fromhex(GOLDEN["commands"]["invalid_input"])
    decision = bytes.fromhex(GOLDEN["decision"])
    for view in (bytearray, memoryview):
        assert decode_command(view(data)) == COMMANDS["invalid_input"]  # type: ignore[arg-type]
        assert decode_decision(view(decision)) == DECISION  # type: ignore[arg-type]
        with pytest.raises(DecodeError, match="malformed"):
            decode_command(view(data[:-1]))  # type: ignore[arg-type]


def test_missing_fields_take_their_defaults() -> None:
    """A field with a default may be left out (as with fastavro); others may not."""
    retract = {k: v for k, v in COMMANDS["retract"].items() if k != "run_id"}
    assert encode_command(retract) == bytes.fromhex(GOLDEN["commands"]["retract"])  # type: ignore[arg-type]
    tick = {k: v for k, v in COMMANDS["tick"].items() if k != "agent"}
    with pytest.raises(ValueError, match="agent: no value and no default"):
        encode_command(tick)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"polarity": "maybe"}, ValueError, "polarity: 'maybe' is not a symbol"),
        ({"confidence": "high"}, TypeError, "confidence: expected a number"),
        ({"asserted_at": 1.5}, TypeError, "asserted_at: expected an integer"),
        ({"asserted_at": 2**63}, ValueError, "asserted_at: 9223372036854775808 is out of"),
        ({"based_on_version": "41"}, TypeError, "based_on_version: expected an integer"),
        ({"run_id": 7}, TypeError, "run_id: expected a string"),
        ({"agent": "\ud800"}, ValueError, "agent: the string is not encodable as UTF-8"),
        ({"evidence": [1]}, TypeError, r"evidence\[0\]: expected a string"),
        ({"evidence": None}, TypeError, "evidence: expected a list"),
        ({"properties": {"k": 1}}, TypeError, r"properties\['k'\]: expected a string"),
        ({"properties": {1: "v"}}, TypeError, "properties: map keys must be strings"),
        ({"properties": [("k", "v")]}, TypeError, "properties: expected a mapping"),
    ],
)
def test_bad_commands_fail_to_encode_with_the_field_named(
    change: dict[str, Any], error: type[Exception], match: str
) -> None:
    """Values that do not fit the schema raise TypeError or ValueError naming the field."""
    with pytest.raises(error, match=match):
        encode_command(dict(COMMANDS["claim"], **change))  # type: ignore[arg-type]


def test_bad_nested_decision_fails_to_encode_with_its_path() -> None:
    """A bad value inside the decision's nested claim record is named by its path."""
    bad = dict(DECISION, claim=dict(DECISION["claim"], polarity="maybe"))
    with pytest.raises(ValueError, match=r"claim\.polarity"):
        encode_decision(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="schema_rev: 2147483648 is out of the signed 32-bit"):
        encode_decision(dict(DECISION, schema_rev=2**31))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "schema",
    [
        "float",
        "null",
        {"type": "fixed", "name": "F", "size": 4},
        ["null", "string", "long"],
        ["string", "long"],
        ["null", ["null", "string"]],
        {"type": "long", "logicalType": "timestamp-millis"},
        {"type": "record", "name": "R", "fields": [{"name": "r", "type": ["null", "R"]}]},
        {"type": "array", "items": {"type": "record", "name": "E", "fields": []}},
        {"type": "record", "name": "bad-name", "fields": []},
        {"type": "enum", "name": "E", "symbols": ["a", "a"]},
    ],
)
def test_unsupported_schemas_are_refused(schema: Any) -> None:
    """Schemas outside the compiled subset fail at compile time, not at run time."""
    with pytest.raises(UnsupportedSchema):
        compile_encoder(schema)
    with pytest.raises(UnsupportedSchema):
        compile_decoder(schema)


def test_named_references_and_null_second_unions() -> None:
    """A type named once and referred to later, and [T, "null"] unions, match fastavro."""
    schema = {
        "type": "record",
        "name": "R",
        "namespace": "n.s",
        "fields": [
            {"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["x", "y"]}},
            {"name": "b", "type": ["E", "null"]},
            {"name": "c", "type": {"type": "array", "items": "n.s.E"}},
            {"name": "d", "type": {"type": "map", "values": ["null", "long"]}},
        ],
    }
    parsed = fastavro.parse_schema(schema)
    for record in (
        {"a": "y", "b": None, "c": [], "d": {}},
        {"a": "x", "b": "y", "c": ["x", "y"], "d": {"k": None, "l": -5}},
    ):
        expected = _avro_write(parsed, record)
        for s in (schema, parsed):
            assert compile_encoder(s)(record) == expected
            assert compile_decoder(s)(expected) == record == _avro_read(parsed, expected)


def _mutate(data: bytes, draw: st.DataObject) -> bytes:
    raw = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4), label="mutations")):
        how = draw.draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        i = draw.draw(st.integers(10, max(10, len(raw) - 1)))
        if how == "set" and i < len(raw):
            raw[i] = draw.draw(st.integers(0, 255))
        elif how == "insert":
            raw[i:i] = draw.draw(st.binary(min_size=1, max_size=11))
        elif how == "delete":
            del raw[i : i + draw.draw(st.integers(1, 4))]
        else:
            del raw[i:]
    return bytes(raw)


def _decodes_like_fastavro(name: str, data: bytes) -> None:
    """decode raises DecodeError only; whatever it accepts, fastavro reads the same way."""
    try:
        decoded: Any = decode_decision(data) if name == "decision" else decode_command(data)
    except DecodeError as exc:
        assert exc.reason in ("malformed", "unknown_fingerprint")
        return
    body = data[10:]
    buf = io.BytesIO(body)
    expected = fastavro.schemaless_reader(buf, PARSED[name], None)
    assert buf.tell() == len(body)
    if name != "decision":
        expected["type"] = name
    assert _same(decoded, expected)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_records_fail_only_with_decode_error(name: str, data: st.DataObject) -> None:
    """Random records with bytes set, inserted, deleted or cut: DecodeError, or a true record."""
    record = data.draw(_values(PARSED[name]), label="record")
    encoded = HEADERS[name] + _avro_write(PARSED[name], record)
    _decodes_like_fastavro(name, _mutate(encoded, data))


@pytest.mark.parametrize("name", SCHEMA_NAMES)
@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=200))
def test_random_bodies_fail_only_with_decode_error(name: str, body: bytes) -> None:
    """Random bytes after a valid header: DecodeError, or a record fastavro reads the same."""
    _decodes_like_fastavro(name, HEADERS[name] + body)
