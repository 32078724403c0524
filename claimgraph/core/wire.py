"""The wire contract: Avro single-object encoding of commands and decisions (pure, no I/O).

Every record on a log is ``C3 01`` ‖ the 8-byte little-endian CRC-64-AVRO fingerprint of its
writer schema's Parsing Canonical Form ‖ the Avro binary body. The fingerprint tells which
schema wrote the body, and so which kind of command it is. Schemas live as ``.avsc`` files
under ``schemas/avro`` (shipped inside the wheel as ``claimgraph/_schemas``).

fastavro parses the schemas and computes their canonical forms and fingerprints; the bodies
are written and read by codecs compiled from each schema by :mod:`claimgraph.core.avro`, which
give the same bytes as fastavro's ``schemaless_writer`` at a fraction of the cost.

``decode_command`` never lets foreign bytes escape as an arbitrary exception: anything that
is not a whole, well-formed record of a known schema raises :class:`DecodeError` with a
reason code (``malformed`` or ``unknown_fingerprint``), which the governor turns into a
recorded rejection.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from claimgraph.core.avro import AvroDecodeError, Decoder, Encoder, compile_decoder, compile_encoder
from claimgraph.core.model import COMMAND_TYPES, Command, Decision
from claimgraph.errors import DecodeError

__all__ = [
    "MARKER",
    "decode_command",
    "decode_decision",
    "decode_run_event",
    "encode_command",
    "encode_decision",
    "encode_run_event",
    "fingerprints",
    "schema_dir",
]

MARKER = b"\xc3\x01"
_HEADER = 10
_COMMAND_SCHEMAS = COMMAND_TYPES
_NOT_COMMANDS = ("decision", "run_event")


def schema_dir() -> Path:
    """Where the ``.avsc`` files are: inside the installed package, or the repository."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_schemas" / "avro"
    if packaged.is_dir():
        return packaged
    return package.parent / "schemas" / "avro"


class _Codec:
    __slots__ = ("decode", "encode", "fingerprint", "header", "name", "parsed")

    def __init__(self, name: str, raw: dict[str, Any]) -> None:
        self.name = name
        self.parsed = fastavro.parse_schema(raw)
        canonical = to_parsing_canonical_form(raw)
        # fastavro gives the fingerprint's bytes as written on the wire (little-endian)
        raw_fp = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
        self.fingerprint = int.from_bytes(raw_fp, "little")
        self.header = MARKER + raw_fp

    # encode (header + body) and decode are compiled on first use, then are plain attributes
    encode: Encoder
    decode: Decoder

    def __getattr__(self, name: str) -> Any:
        if name == "encode":
            self.encode = compile_encoder(self.parsed, prefix=self.header)
            return self.encode
        if name == "decode":
            self.decode = compile_decoder(self.parsed)
            return self.decode
        raise AttributeError(name)


@cache
def _codecs() -> dict[str, _Codec]:
    out: dict[str, _Codec] = {}
    for name in (*_COMMAND_SCHEMAS, "decision", "run_event"):
        raw = json.loads((schema_dir() / f"{name}.avsc").read_text(encoding="utf-8"))
        out[name] = _Codec(name, raw)
    return out


@cache
def _by_header() -> dict[bytes, _Codec]:
    return {c.header: c for n, c in _codecs().items() if n not in _NOT_COMMANDS}


def fingerprints() -> dict[str, str]:
    """Schema name → fingerprint (hex, as written on the wire after the marker)."""
    return {n: c.header[2:].hex() for n, c in _codecs().items()}


def encode_command(command: Command) -> bytes:
    """Encode a command; its ``type`` key (default ``claim``) picks the schema."""
    kind: str = command.get("type", "claim")
    codec = _codecs().get(kind)
    if codec is None or kind in _NOT_COMMANDS:
        raise ValueError(f"unknown command type {kind!r}")
    return codec.encode(command)


def _malformed(codec: _Codec, exc: AvroDecodeError) -> DecodeError:
    return DecodeError("malformed", f"not a valid {codec.name} record: {exc}"[:300])


def decode_command(data: bytes) -> Command:
    """Decode one command; raise :class:`DecodeError` for anything else."""
    if type(data) is not bytes:
        data = bytes(data)
    codec = _by_header().get(data[:_HEADER])
    if codec is None:
        if len(data) < _HEADER or data[:2] != MARKER:
            raise DecodeError("malformed", "not an Avro single-object record (no C3 01 marker)")
        raise DecodeError(
            "unknown_fingerprint", f"no command schema has fingerprint {data[2:_HEADER].hex()}"
        )
    try:
        record = codec.decode(data, _HEADER)  # a dict: every schema here is a record
    except AvroDecodeError as exc:  # the one error the codec raises for foreign bytes
        raise _malformed(codec, exc) from None
    record["type"] = codec.name
    command: Command = record  # (typed by assignment: typing.cast costs a call per record)
    return command


def encode_decision(decision: Decision) -> bytes:
    """Encode a decision record."""
    return _codecs()["decision"].encode(decision)


def decode_decision(data: bytes) -> Decision:
    """Decode a decision record (raise :class:`DecodeError` if it is not one)."""
    if type(data) is not bytes:
        data = bytes(data)
    codec = _codecs()["decision"]
    if not data.startswith(codec.header):
        raise DecodeError("unknown_fingerprint", "not a decision record")
    try:
        decision: Decision = codec.decode(data, _HEADER)
    except AvroDecodeError as exc:
        raise _malformed(codec, exc) from None
    return decision


def encode_run_event(event: dict[str, Any]) -> bytes:
    """Encode one run-trace event (the runs log's record)."""
    return _codecs()["run_event"].encode(event)


def decode_run_event(data: bytes) -> dict[str, Any]:
    """Decode one run-trace event (raise :class:`DecodeError` if it is not one)."""
    if type(data) is not bytes:
        data = bytes(data)
    codec = _codecs()["run_event"]
    if not data.startswith(codec.header):
        raise DecodeError("unknown_fingerprint", "not a run event record")
    try:
        event: dict[str, Any] = codec.decode(data, _HEADER)
    except AvroDecodeError as exc:
        raise _malformed(codec, exc) from None
    return event
