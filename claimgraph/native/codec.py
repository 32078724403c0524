"""The wire codec on the native core, with :mod:`claimgraph.core.wire` as its specification.

Same functions, same results: a record the native codec cannot read or write (an old version
behind an upcaster, foreign bytes, a value of an unusual Python type) is handed to the Python
codec, which then gives the value, the bytes, or the exact error. Without the native module
these are the Python functions themselves.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from claimgraph.core import wire
from claimgraph.core.model import COMMAND_TYPES, Command, Decision
from claimgraph.core.registry import Registry, SchemaVersion
from claimgraph.native import module
from claimgraph.native.plans import Plan, plan, resolving_plan

__all__ = [
    "decode_command",
    "decode_decision",
    "decode_run_event",
    "encode_command",
    "encode_decision",
    "encode_run_event",
    "native_codecs",
]

_HEADER = 10


def _reading_plan(reg: Registry, sv: SchemaVersion) -> Plan | None:
    """How to read ``sv``'s bytes as the current version, or None (an upcaster: Python)."""
    current = reg.current(sv.record)
    if sv == current:
        return plan(sv.schema)
    if any(record == sv.record and v >= sv.version for record, v in reg.upcasters):
        return None
    return resolving_plan(sv.schema, current.schema)


class NativeCodecs:
    """The native codecs of one registry: readers by header, writers by record."""

    def __init__(self, reg: Registry) -> None:
        assert module is not None
        codec = module.Codec
        self.registry = reg
        self.readers: dict[bytes, tuple[str, Any]] = {}
        self.writers: dict[str, Any] = {}
        self.old_writers: dict[bytes, Any] = {}
        for sv in reg.all():
            p = _reading_plan(reg, sv)
            if p is not None:
                self.readers[sv.header] = (sv.record, codec(p, b"", copy.deepcopy))
            writer = codec(plan(sv.schema), sv.header, copy.deepcopy)
            if sv == reg.current(sv.record):
                self.writers[sv.record] = writer
            else:
                self.old_writers[sv.header] = writer


@cache
def _for(reg: Registry) -> NativeCodecs:
    return NativeCodecs(reg)


def native_codecs() -> NativeCodecs | None:
    """The native codecs of the registry in use, or None when the native core is off."""
    return None if module is None else _for(wire.registry())


def decode_command(data: bytes) -> Command:
    """:func:`claimgraph.core.wire.decode_command`, natively where it can."""
    nc = native_codecs()
    if nc is not None and type(data) is bytes:
        found = nc.readers.get(data[:_HEADER])
        if found is not None and found[0] in COMMAND_TYPES:
            value = found[1].decode(data, _HEADER)
            if value is not None:
                value["type"] = found[0]
                command: Command = value
                return command
    return wire.decode_command(data)


def _decode(record: str, data: bytes) -> Any:
    nc = native_codecs()
    if nc is not None and type(data) is bytes:
        found = nc.readers.get(data[:_HEADER])
        if found is not None and found[0] == record:
            return found[1].decode(data, _HEADER)
    return None


def decode_decision(data: bytes) -> Decision:
    """:func:`claimgraph.core.wire.decode_decision`, natively where it can."""
    value: Decision | None = _decode("decision", data)
    return wire.decode_decision(data) if value is None else value


def decode_run_event(data: bytes) -> dict[str, Any]:
    """:func:`claimgraph.core.wire.decode_run_event`, natively where it can."""
    value: dict[str, Any] | None = _decode("run_event", data)
    return wire.decode_run_event(data) if value is None else value


def _encode(record: str, value: Any) -> bytes | None:
    nc = native_codecs()
    if nc is None:
        return None
    out: bytes | None = nc.writers[record].encode(value)
    return out


def encode_command(command: Command) -> bytes:
    """:func:`claimgraph.core.wire.encode_command`, natively where it can."""
    kind = command.get("type", "claim")
    if kind in COMMAND_TYPES:
        out = _encode(kind, command)
        if out is not None:
            return out
    return wire.encode_command(command)


def encode_decision(decision: Decision) -> bytes:
    """:func:`claimgraph.core.wire.encode_decision`, natively where it can."""
    out = _encode("decision", decision)
    return wire.encode_decision(decision) if out is None else out


def encode_run_event(event: dict[str, Any]) -> bytes:
    """:func:`claimgraph.core.wire.encode_run_event`, natively where it can."""
    out = _encode("run_event", event)
    return wire.encode_run_event(event) if out is None else out


def encode_old(header: bytes, value: Any) -> bytes | None:
    """``value`` written in the older version whose header is ``header`` (None: not native)."""
    nc = native_codecs()
    if nc is None:
        return None
    writer = nc.old_writers.get(header)
    out: bytes | None = None if writer is None else writer.encode(value)
    return out


if module is None:  # the pure core: the Python functions themselves, with no wrapper
    decode_command = wire.decode_command
    decode_decision = wire.decode_decision
    decode_run_event = wire.decode_run_event
    encode_command = wire.encode_command
    encode_decision = wire.encode_decision
    encode_run_event = wire.encode_run_event
