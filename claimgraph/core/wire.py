"""The wire contract: Avro single-object encoding of commands and decisions (pure, no I/O).

Every record on a log is ``C3 01`` ‖ the 8-byte little-endian CRC-64-AVRO fingerprint of its
writer schema's Parsing Canonical Form ‖ the Avro binary body. The fingerprint tells which
schema wrote the body, and so which kind of command it is and which version of its schema.
Schemas live as ``schemas/avro/<record>/v<N>.avsc`` (shipped inside the wheel as
``claimgraph/_schemas``), every released version kept; :mod:`claimgraph.core.registry` loads
them and holds the table fingerprint → (record, version).

Events that can evolve. Writers always write a record's current (newest) version. A reader
looks the header's fingerprint up: the current version is read by the codec compiled for it
(the hot path, unchanged); an older one is read with Avro schema resolution (writer schema:
its version, reader schema: the current one; added fields take their defaults, removed fields
are skipped, ``int`` → ``long`` → ``double`` promotions) and carried up by the upcasters
declared for it, so every caller sees current-version dicts whatever the log's age. To change
a record:

1. add ``schemas/avro/<record>/v<N+1>.avsc`` and never edit ``v<N>``;
2. if old values cannot be resolved into the new shape (a renamed or split enum symbol, a
   changed meaning, a union made required), declare an upcaster in
   :data:`claimgraph.core.registry.UPCASTERS` under ``(record, N)``: a pure function from a
   dict shaped as v<N> to one shaped as v<N+1> (the registry refuses, at import, a step that
   resolution cannot do and no upcaster covers);
3. add the new fingerprint to the golden vectors (``tests/golden/wire.json``).

``verify`` of a log written before a change still compares bytes: :func:`same_decision`
encodes the replayed decision with the version the logged one was written with.

fastavro parses the schemas and computes their canonical forms and fingerprints; the bodies
are written and read by codecs compiled from each schema by :mod:`claimgraph.core.avro`, which
give the same bytes as fastavro's ``schemaless_writer`` at a fraction of the cost.

``decode_command`` never lets foreign bytes escape as an arbitrary exception: anything that
is not a whole, well-formed record of a known schema raises :class:`DecodeError` with a
reason code (``malformed`` or ``unknown_fingerprint``), which the governor turns into a
recorded rejection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from claimgraph.core.avro import AvroDecodeError, Decoder, Encoder
from claimgraph.core.model import COMMAND_TYPES, Command, Decision
from claimgraph.core.registry import MARKER, Registry, SchemaVersion, load, schema_dir
from claimgraph.errors import DecodeError

__all__ = [
    "MARKER",
    "decode_command",
    "decode_decision",
    "decode_run_event",
    "encode_command",
    "encode_decision",
    "encode_run_event",
    "fingerprint_table",
    "fingerprints",
    "registry",
    "same_decision",
    "schema_dir",
    "use_registry",
]

_HEADER = 10
_COMMAND_SCHEMAS = COMMAND_TYPES
_NOT_COMMANDS = ("decision", "run_event")

_active: list[Registry] = []  # the registry in use; empty until first loaded


def registry() -> Registry:
    """The schema registry in use: the packaged ``.avsc`` files, loaded on first use."""
    if not _active:
        _active.append(load())
    return _active[-1]


@contextmanager
def use_registry(replacement: Registry) -> Iterator[Registry]:
    """Read and write with ``replacement`` inside the block (tests: a record's next version).

    Not thread-safe, and not for production: production schemas are the packaged files.
    """
    registry()
    _active.append(replacement)
    _clear()
    try:
        yield replacement
    finally:
        _active.remove(replacement)
        _clear()


def _clear() -> None:
    _codecs.cache_clear()
    _by_header.cache_clear()
    _old_readers.cache_clear()


class _Codec:
    __slots__ = ("decode", "encode", "header", "name", "version")

    def __init__(self, sv: SchemaVersion) -> None:
        self.name = sv.record
        self.header = sv.header
        self.version = sv

    # encode (header + body) and decode are compiled on first use, then are plain attributes
    encode: Encoder
    decode: Decoder

    def __getattr__(self, name: str) -> Any:
        if name == "encode":
            self.encode = registry().encoder(self.version)
            return self.encode
        if name == "decode":
            self.decode = registry().reader(self.version)
            return self.decode
        raise AttributeError(name)


@cache
def _codecs() -> dict[str, _Codec]:
    """Record name → the codec of its current version."""
    reg = registry()
    return {n: _Codec(reg.current(n)) for n in (*_COMMAND_SCHEMAS, *_NOT_COMMANDS)}


@cache
def _by_header() -> dict[bytes, _Codec]:
    """Header → codec, for every version of every command (old versions read as current)."""
    reg, current = registry(), _codecs()
    out: dict[bytes, _Codec] = {}
    for name in _COMMAND_SCHEMAS:
        for sv in reg.versions(name):
            out[sv.header] = current[name] if sv.header == current[name].header else _Codec(sv)
    return out


@cache
def _old_readers(record: str) -> dict[bytes, _Codec]:
    """Header → codec, for the versions of ``record`` older than its current one."""
    reg = registry()
    return {sv.header: _Codec(sv) for sv in reg.versions(record) if sv != reg.current(record)}


def fingerprints() -> dict[str, str]:
    """Schema name → the fingerprint of its current version (hex, as on the wire)."""
    return {n: c.header[2:].hex() for n, c in _codecs().items()}


def fingerprint_table() -> dict[str, tuple[str, int]]:
    """Every version's fingerprint (hex, as on the wire) → (record, version)."""
    return {sv.fingerprint.hex(): (sv.record, sv.version) for sv in registry().all()}


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


def _old(record: str, data: bytes, what: str) -> Any:
    """Decode a record of an older version of ``record``'s schema (as the current version)."""
    codec = _old_readers(record).get(data[:_HEADER])
    if codec is None:
        raise DecodeError("unknown_fingerprint", f"not a {what} record")
    try:
        return codec.decode(data, _HEADER)
    except AvroDecodeError as exc:
        raise _malformed(codec, exc) from None


def encode_decision(decision: Decision) -> bytes:
    """Encode a decision record."""
    return _codecs()["decision"].encode(decision)


def decode_decision(data: bytes) -> Decision:
    """Decode a decision record (raise :class:`DecodeError` if it is not one)."""
    if type(data) is not bytes:
        data = bytes(data)
    codec = _codecs()["decision"]
    if not data.startswith(codec.header):
        old: Decision = _old("decision", data, "decision")
        return old
    try:
        decision: Decision = codec.decode(data, _HEADER)
    except AvroDecodeError as exc:
        raise _malformed(codec, exc) from None
    return decision


def same_decision(logged: bytes, decision: Decision) -> bool:
    """Whether ``logged`` is ``decision`` as written by the version ``logged`` was written with.

    A decision of the current version must be the same bytes. One of an older version must be
    the same bytes when ``decision`` is encoded with that version, and must read back (through
    resolution and upcasters) as ``decision`` reads: the fields the old version lacks hold
    what upgrading gives them, so a replay never hides a difference in a newer field.
    """
    current = _codecs()["decision"]
    if logged[:_HEADER] == current.header:
        return logged == current.encode(decision)
    reg = registry()
    sv = reg.by_header(bytes(logged[:_HEADER]))
    if sv is None or sv.record != "decision":
        return False
    try:
        if reg.encoder(sv)(decision) != logged:
            return False
        return current.encode(decode_decision(logged)) == current.encode(decision)
    except (DecodeError, TypeError, ValueError):  # a replay the old version cannot hold
        return False


def encode_run_event(event: dict[str, Any]) -> bytes:
    """Encode one run-trace event (the runs log's record)."""
    return _codecs()["run_event"].encode(event)


def decode_run_event(data: bytes) -> dict[str, Any]:
    """Decode one run-trace event (raise :class:`DecodeError` if it is not one)."""
    if type(data) is not bytes:
        data = bytes(data)
    codec = _codecs()["run_event"]
    if not data.startswith(codec.header):
        old: dict[str, Any] = _old("run_event", data, "run event")
        return old
    try:
        event: dict[str, Any] = codec.decode(data, _HEADER)
    except AvroDecodeError as exc:
        raise _malformed(codec, exc) from None
    return event
