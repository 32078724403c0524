"""The wire schema registry: every version of every record, by fingerprint (pure, no I/O).

Each record (``claim``, ``decision``, ``run_event``, ...) has its versions as
``schemas/avro/<record>/v<N>.avsc``, N = 1, 2, ... with no gap; the newest is *current*, and
writers always write it. A record is identified on the wire by the CRC-64-AVRO fingerprint
of its writer schema's Parsing Canonical Form, so the registry's table fingerprint →
(record, version) tells which schema wrote any record, and no two versions may share one.

Reading version v of a record whose current version is c: the bytes are read with writer
schema v resolved against a reader schema (Avro schema resolution, compiled by
:mod:`claimgraph.core.avro`), then carried up by the *upcasters*, a table
``(record, from_version) → pure function`` that takes a dict shaped as version
``from_version`` and returns it shaped as ``from_version + 1``. Where no upcaster is declared,
resolution goes straight to the next version that has one (or to c): versions v..k with no
upcaster between them are one resolution, writer v, reader k. An upcaster is needed only where
resolution cannot do it: a renamed enum symbol, a new symbol that some old values should map to,
a field whose meaning (not only its shape) changed, a union made required. The registry checks
when it is built that every step resolves, so an old version that cannot be read is an error at
import, never on the first old record of a log.

The registry reads the ``.avsc`` files once (:func:`load`); everything else is derived.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from claimgraph.core.avro import (
    Decoder,
    Encoder,
    UnsupportedSchema,
    compile_decoder,
    compile_encoder,
    compile_resolving_decoder,
)

__all__ = [
    "MARKER",
    "UPCASTERS",
    "Registry",
    "SchemaVersion",
    "Upcaster",
    "load",
    "schema_dir",
]

MARKER = b"\xc3\x01"
_VERSION_FILE = re.compile(r"v([1-9][0-9]*)\.avsc")

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""A pure function from a record as version N (a fresh dict it may change) to version N + 1."""

UPCASTERS: Mapping[tuple[str, int], Upcaster] = MappingProxyType({})
"""The production upcasters, keyed by (record, from_version): none yet, every record is v1."""


def schema_dir() -> Path:
    """Where the ``.avsc`` files are: inside the installed package, or the repository."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_schemas" / "avro"
    if packaged.is_dir():
        return packaged
    return package.parent / "schemas" / "avro"


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version of one record's schema, and its fingerprint."""

    record: str
    version: int
    schema: dict[str, Any] = field(repr=False)  # as parsed by fastavro
    fingerprint: bytes = field(repr=False)  # 8 bytes, as written on the wire

    @classmethod
    def of(cls, record: str, version: int, raw: dict[str, Any]) -> SchemaVersion:
        """Parse ``raw`` (the JSON of an ``.avsc``) and fingerprint its canonical form."""
        canonical = to_parsing_canonical_form(raw)
        # fastavro gives the fingerprint's bytes as written on the wire (little-endian)
        fp = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
        parsed = cast(dict[str, Any], fastavro.parse_schema(raw))
        return cls(record, version, parsed, fp)

    @property
    def header(self) -> bytes:
        """The single-object header: ``C3 01`` ‖ the fingerprint."""
        return MARKER + self.fingerprint


class Registry:
    """The versions of every record, the fingerprint table, and readers of old versions."""

    def __init__(
        self,
        versions: Iterable[SchemaVersion],
        upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
    ) -> None:
        by_record: dict[str, dict[int, SchemaVersion]] = {}
        self._by_header: dict[bytes, SchemaVersion] = {}
        for sv in versions:
            if sv.version in by_record.setdefault(sv.record, {}):
                raise UnsupportedSchema(f"{sv.record} v{sv.version} is given twice")
            by_record[sv.record][sv.version] = sv
            other = self._by_header.setdefault(sv.header, sv)
            if other is not sv:
                raise UnsupportedSchema(
                    f"{sv.record} v{sv.version} has the fingerprint of {other.record} "
                    f"v{other.version} ({sv.fingerprint.hex()}): a version must change the "
                    "schema's canonical form"
                )
        self._versions: dict[str, tuple[SchemaVersion, ...]] = {}
        for record, found in sorted(by_record.items()):
            if sorted(found) != list(range(1, len(found) + 1)):
                raise UnsupportedSchema(f"{record} has versions {sorted(found)}, not 1..N")
            self._versions[record] = tuple(found[v] for v in sorted(found))
        for record, v in upcasters:
            if not 1 <= v < len(self._versions.get(record, ())):
                raise UnsupportedSchema(f"an upcaster from {record} v{v}, which has no v{v + 1}")
        self.upcasters: Mapping[tuple[str, int], Upcaster] = MappingProxyType(dict(upcasters))
        self._readers: dict[bytes, Decoder] = {}
        self._encoders: dict[bytes, Encoder] = {}
        for sv in self._by_header.values():  # every old version must be readable: check now
            if sv is not self.current(sv.record):
                self._readers[sv.header] = self._upgrading_reader(sv)

    def records(self) -> tuple[str, ...]:
        """Every record's name, sorted."""
        return tuple(self._versions)

    def versions(self, record: str) -> tuple[SchemaVersion, ...]:
        """``record``'s versions, oldest first (``KeyError`` if there is no such record)."""
        return self._versions[record]

    def current(self, record: str) -> SchemaVersion:
        """The version writers write."""
        return self._versions[record][-1]

    def by_header(self, header: bytes) -> SchemaVersion | None:
        """The version whose single-object header (marker and fingerprint) is ``header``."""
        return self._by_header.get(header)

    def all(self) -> tuple[SchemaVersion, ...]:
        """Every version of every record."""
        return tuple(sv for record in self._versions.values() for sv in record)

    def reader(self, sv: SchemaVersion) -> Decoder:
        """``decode(data, pos)``: a body written with ``sv``, as a current-version dict."""
        found = self._readers.get(sv.header)
        if found is None:
            found = self._readers[sv.header] = compile_decoder(sv.schema)
        return found

    def encoder(self, sv: SchemaVersion) -> Encoder:
        """``encode(record)``: header and body in version ``sv`` (an old one, for replays)."""
        found = self._encoders.get(sv.header)
        if found is None:
            found = self._encoders[sv.header] = compile_encoder(sv.schema, prefix=sv.header)
        return found

    def with_version(self, record: str, raw: dict[str, Any]) -> Registry:
        """A registry where ``raw`` is ``record``'s next version (new records start at v1)."""
        version = len(self._versions.get(record, ())) + 1
        return Registry([*self.all(), SchemaVersion.of(record, version, raw)], self.upcasters)

    def with_upcaster(self, record: str, from_version: int, upcaster: Upcaster) -> Registry:
        """A registry that also carries ``record`` from ``from_version`` up by ``upcaster``."""
        return Registry(self.all(), {**self.upcasters, (record, from_version): upcaster})

    def _upgrading_reader(self, sv: SchemaVersion) -> Decoder:
        """Resolution up to the next upcaster, each upcaster, resolution again, ... to current."""
        versions = self._versions[sv.record]
        last = len(versions)

        def stop(after: int) -> int:  # the next version from which an upcaster goes, or last
            ups = (k for k in range(after, last) if (sv.record, k) in self.upcasters)
            return next(ups, last)

        def resolver(writer: int, reader: int) -> Decoder:
            try:
                if writer == reader:
                    return compile_decoder(versions[writer - 1].schema)
                return compile_resolving_decoder(
                    versions[writer - 1].schema, versions[reader - 1].schema
                )
            except UnsupportedSchema as exc:
                raise UnsupportedSchema(
                    f"{sv.record} v{writer} cannot be read as v{reader}: {exc}"
                ) from None

        at = stop(sv.version)
        first = resolver(sv.version, at)
        steps: list[Callable[[dict[str, Any]], dict[str, Any]]] = []
        while at < last:
            upcast = self.upcasters[(sv.record, at)]
            nxt = stop(at + 1)
            if nxt == at + 1:
                steps.append(upcast)
            else:  # shaped as at + 1: through its bytes, resolved up to the next stop
                encode = compile_encoder(versions[at].schema)
                resolve = resolver(at + 1, nxt)
                steps.append(lambda r, u=upcast, e=encode, d=resolve: d(e(u(r))))  # type: ignore[misc]
            at = nxt
        if not steps:
            return first

        def read(data: bytes, pos: int = 0) -> Any:
            value = first(data, pos)
            for step in steps:
                value = step(value)
            return value

        return read


def load(
    directory: Path | None = None,
    upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
) -> Registry:
    """Read every ``<record>/v<N>.avsc`` under ``directory`` (default: :func:`schema_dir`)."""
    root = schema_dir() if directory is None else directory
    versions = []
    for path in sorted(root.glob("*/v*.avsc")):
        match = _VERSION_FILE.fullmatch(path.name)
        if match is None:
            raise UnsupportedSchema(f"{path}: a version file is named v<N>.avsc")
        raw = json.loads(path.read_text(encoding="utf-8"))
        versions.append(SchemaVersion.of(path.parent.name, int(match[1]), raw))
    return Registry(versions, upcasters)
