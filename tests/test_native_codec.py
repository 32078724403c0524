"""The native codec against its specification, the Python codec of claimgraph.core.

Both directions, byte for byte and value for value (with exact types): the golden vectors of
every schema version, the legacy logs written by an older claimgraph, hypothesis command
streams and their decisions, and hostile bytes. The raw native codec is checked on its own
(``Codec.decode`` / ``encode``): wherever Python refuses bytes, the native codec must refuse
them too (returning None, so that Python names the error); wherever it accepts, both give
the same value. Under ``CI=true`` these tests fail if the native module is not loaded.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimgraph import native
from claimgraph.core import wire
from claimgraph.core.governor import decide
from claimgraph.core.state import GraphState
from claimgraph.errors import DecodeError
from claimgraph.native import codec
from tests.golden_records import COMMANDS, DECISION, RUN_EVENT
from tests.native_support import require_native, typed
from tests.strategies import GRAPH, Stream, streams

GOLDEN = json.loads((Path(__file__).parent / "golden" / "wire.json").read_text())
LEGACY = json.loads((Path(__file__).parent / "data" / "main-1920400-logs.json").read_text())

pytestmark = pytest.mark.usefixtures("_native")


@pytest.fixture
def _native() -> None:
    require_native()


def test_the_native_core_is_loaded_on_ci() -> None:
    """CI builds the native module; it is the core in use (not the pure fallback)."""
    assert native.which() == "native"
    assert codec.native_codecs() is not None


def _python_decode(data: bytes) -> tuple[str, Any]:
    """What the Python codec makes of a record: ("ok", typed value) or ("error", reason)."""
    sv = wire.registry().by_header(data[:10])
    record = sv.record if sv is not None else ""
    try:
        if record == "decision":
            return "ok", typed(wire.decode_decision(data))
        if record == "run_event":
            return "ok", typed(wire.decode_run_event(data))
        return "ok", typed(wire.decode_command(data))
    except DecodeError as exc:
        return "error", (exc.reason, exc.detail)


def _native_decode(data: bytes) -> tuple[str, Any]:
    sv = wire.registry().by_header(data[:10])
    record = sv.record if sv is not None else ""
    try:
        if record == "decision":
            return "ok", typed(codec.decode_decision(data))
        if record == "run_event":
            return "ok", typed(codec.decode_run_event(data))
        return "ok", typed(codec.decode_command(data))
    except DecodeError as exc:
        return "error", (exc.reason, exc.detail)


def _raw_native(data: bytes) -> Any:
    """The native codec alone (no Python fallback): a value, or None where it refuses."""
    nc = codec.native_codecs()
    assert nc is not None
    found = nc.readers.get(data[:10])
    if found is None:
        return None
    value = found[1].decode(data, 10)
    if value is not None and found[0] not in ("decision", "run_event"):
        value["type"] = found[0]
    return value


def assert_same_decode(data: bytes) -> None:
    """Python and native agree on ``data``, and the raw native codec is as strict as Python."""
    expected = _python_decode(data)
    assert _native_decode(data) == expected
    raw = _raw_native(data)
    if expected[0] == "error":
        assert raw is None, f"native accepted bytes Python refuses ({expected[1]}): {data.hex()}"
    elif data[:10] in codec.native_codecs().readers:  # type: ignore[union-attr]
        assert raw is not None, f"native refused a valid record: {data.hex()}"
        assert typed(raw) == expected[1]


def assert_same_encode(record: str, value: Any) -> bytes:
    """The raw native writer gives Python's bytes (and the wrapper does too)."""
    py = {
        "decision": wire.encode_decision,
        "run_event": wire.encode_run_event,
    }.get(record, wire.encode_command)(value)
    nc = codec.native_codecs()
    assert nc is not None
    assert nc.writers[record].encode(value) == py
    wrapped = {
        "decision": codec.encode_decision,
        "run_event": codec.encode_run_event,
    }.get(record, codec.encode_command)(value)
    assert wrapped == py
    return bytes(py)


# -- golden vectors: every version --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GOLDEN["commands"]))
def test_golden_commands_both_ways(name: str) -> None:
    data = bytes.fromhex(GOLDEN["commands"][name])
    assert_same_decode(data)
    assert assert_same_encode(name, COMMANDS[name]) == data
    assert codec.decode_command(data) == COMMANDS[name]


@pytest.mark.parametrize("key", ["decision", "decision_v1", "decision_v2", "run_event"])
def test_golden_records_both_ways(key: str) -> None:
    data = bytes.fromhex(GOLDEN[key])
    assert_same_decode(data)
    assert _raw_native(data) is not None  # old versions too: read by native resolution
    if key == "decision":
        assert assert_same_encode("decision", DECISION) == data
    if key == "run_event":
        assert assert_same_encode("run_event", RUN_EVENT) == data


@pytest.mark.parametrize("name", sorted(GOLDEN["commands_v1"]))
def test_golden_old_commands_read_natively(name: str) -> None:
    data = bytes.fromhex(GOLDEN["commands_v1"][name])
    assert_same_decode(data)
    assert _raw_native(data) is not None


def test_old_versions_are_written_as_python_writes_them() -> None:
    """``same_decision`` re-encodes replays with an old version: native old writers agree."""
    reg = wire.registry()
    for key in ("decision_v1", "decision_v2"):
        data = bytes.fromhex(GOLDEN[key])
        sv = reg.by_header(data[:10])
        assert sv is not None
        value = reg.reader(sv)(data, 10)
        old = reg.encoder(sv)(value)
        assert codec.encode_old(data[:10], value) == old


def test_every_version_has_a_native_reader() -> None:
    """No upcasters yet: every version of every record is read by the native codec."""
    nc = codec.native_codecs()
    assert nc is not None
    assert set(nc.readers) == {sv.header for sv in wire.registry().all()}


# -- the legacy logs (written by main at 1920400) ------------------------------------------


@pytest.mark.parametrize("name", sorted(LEGACY["graphs"]))
def test_legacy_logs_both_ways(name: str) -> None:
    doc = LEGACY["graphs"][name]
    seen = 0
    for log in ("commands", "decisions", "runs"):
        for _offset, _time, b64 in doc[log]:
            data = base64.b64decode(b64)
            assert_same_decode(data)
            kind, _ = _python_decode(data)
            sv = wire.registry().by_header(data[:10])
            if kind == "ok" and sv is not None and sv == wire.registry().current(sv.record):
                value = _python_value(data, sv.record)
                assert assert_same_encode(sv.record, value) == data
            seen += 1
    assert seen > 20


def _python_value(data: bytes, record: str) -> Any:
    if record == "decision":
        return wire.decode_decision(data)
    if record == "run_event":
        return wire.decode_run_event(data)
    return wire.decode_command(data)


# -- hypothesis streams: commands, garbage and the decisions made of them -----------------


def _decisions(s: Stream) -> list[Any]:
    state = GraphState(GRAPH)
    out = []
    for i, (record, now) in enumerate(zip(s.records, s.times, strict=True)):
        d = decide(state, record, i, now)
        state.evolve(d, i)
        out.append(d)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_streams_both_ways(s: Stream) -> None:
    for record, cmd in zip(s.records, s.commands, strict=True):
        assert_same_decode(record)
        if cmd is not None:
            assert assert_same_encode(cmd["type"], cmd) == record
    for d in _decisions(s):
        data = assert_same_encode("decision", d)
        assert_same_decode(data)


# -- hostile bytes: the native codec is at least as strict as Python ----------------------

_HEADERS = sorted(sv.header for sv in wire.registry().all())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_HEADERS), st.binary(max_size=64))
def test_random_bodies(header: bytes, body: bytes) -> None:
    assert_same_decode(header + body)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([*sorted(GOLDEN["commands"]), "decision", "run_event", "decision_v1"]),
    st.data(),
)
def test_mutated_records(name: str, data: st.DataObject) -> None:
    """Valid records with bytes changed, cut or inserted: both agree, whatever comes out."""
    raw = bytearray(bytes.fromhex(GOLDEN["commands"].get(name) or GOLDEN[name]))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(10, len(raw)))
        op = data.draw(st.sampled_from(("set", "cut", "insert")))
        if op == "set" and at < len(raw):
            raw[at] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[at:]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    assert_same_decode(bytes(raw))


@pytest.mark.parametrize(
    "value",
    [
        {**COMMANDS["claim"], "confidence": 1},  # an int for a double
        {**COMMANDS["claim"], "evidence": ("a", "b")},  # a tuple for an array
        {**COMMANDS["claim"], "asserted_at": True},  # a bool is an int in Python
        {**COMMANDS["claim"], "run_id": None, "based_on_version": None},
        {**COMMANDS["claim"], "asserted_at": 1 << 63},  # out of range: Python names it
        {**COMMANDS["claim"], "polarity": "maybe"},  # not a symbol
        {**COMMANDS["claim"], "subject_id": "\ud800"},  # not encodable as UTF-8
        {**COMMANDS["claim"], "properties": {1: "x"}},  # a key that is not a string
        {k: v for k, v in COMMANDS["claim"].items() if k != "reasoning"},  # missing
    ],
)
def test_unusual_values_encode_or_fail_as_python(value: dict[str, Any]) -> None:
    """Values the native writer does not take are written (or refused) by Python, exactly."""
    try:
        expected: Any = wire.encode_command(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        expected = (type(exc), str(exc))
    try:
        got: Any = codec.encode_command(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        got = (type(exc), str(exc))
    assert got == expected
    raw = codec.native_codecs().writers["claim"].encode(value)  # type: ignore[union-attr]
    if isinstance(expected, tuple):
        assert raw is None
    elif raw is not None:
        assert raw == expected
