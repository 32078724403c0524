"""The wire contract: Avro single-object encoding, golden vectors, and hostile bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given, settings
from hypothesis import strategies as st

from claimgraph.errors import DecodeError
from claimgraph.fold import GraphState
from claimgraph.streams.governor import decide
from claimgraph.wire import (
    decode_command,
    decode_decision,
    encode_command,
    encode_decision,
    schema_dir,
)
from tests.golden_records import COMMANDS, DECISION

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


@pytest.mark.parametrize("name", sorted(GOLDEN["fingerprints"]))
def test_fingerprints_follow_the_avro_spec(name: str) -> None:
    """Each pinned fingerprint is CRC-64-AVRO of the schema's canonical form, little-endian."""
    raw = json.loads((schema_dir() / f"{name}.avsc").read_text())
    canonical = to_parsing_canonical_form(raw).encode()
    expected = _crc64_avro(canonical).to_bytes(8, "little").hex()
    assert GOLDEN["fingerprints"][name] == expected


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
