"""A small schema-compiled Avro binary codec, byte-for-byte compatible with fastavro.

fastavro's ``schemaless_writer``/``schemaless_reader`` interpret the schema for every record;
here each schema is compiled once into two specialised Python functions (source generated per
schema and ``exec``'d, as ``dataclasses`` and ``attrs`` do), which is several times cheaper.

Supported: records, ``string``, ``bytes``, ``long``, ``int``, ``double``, ``boolean``, enums,
arrays, maps, and two-branch unions of ``null`` and one of these (including a nested record),
with named-type references. Anything else raises :class:`UnsupportedSchema` at compile time.

Encoding gives exactly the bytes of ``fastavro.schemaless_writer``: record fields in schema
order (a missing field takes its default), arrays and maps as one block (or just ``0`` when
empty), map entries in iteration order, a union picks ``null`` for ``None`` and its other branch
otherwise. Bad values raise :class:`TypeError` or :class:`ValueError` naming the field; unlike
fastavro, a ``float`` given for a ``long`` is refused rather than truncated, and ``int`` values
must fit in 32 bits.

Decoding gives the dictionaries of ``fastavro.schemaless_reader`` (enums as strings, ``bytes``
as bytes, ``null`` as ``None``) and is strict: truncated input, varints longer than 10 bytes or
beyond 64 bits, ``int`` values beyond 32 bits, negative or oversized lengths and counts, block
byte sizes that disagree with their items, invalid UTF-8, booleans other than 0 or 1, enum or
union indexes out of range, and trailing bytes all raise :class:`AvroDecodeError`, and nothing
else escapes. Lengths are checked against the remaining bytes before anything is sliced, and
every loop is bounded by the input's size.

The modules, each importing only those before it: :mod:`.varints` (primitive encodings),
:mod:`.nodes` (schemas as trees), :mod:`.codegen` (generated functions), :mod:`.encoder`,
:mod:`.decoder`, :mod:`.resolution` (reading one schema's bytes as another's values).
"""

from __future__ import annotations

from claimgraph.core.avro.decoder import Decoder, compile_decoder
from claimgraph.core.avro.encoder import Encoder, compile_encoder
from claimgraph.core.avro.nodes import UnsupportedSchema
from claimgraph.core.avro.resolution import compile_resolving_decoder
from claimgraph.core.avro.varints import AvroDecodeError

__all__ = [
    "AvroDecodeError",
    "Decoder",
    "Encoder",
    "UnsupportedSchema",
    "compile_decoder",
    "compile_encoder",
    "compile_resolving_decoder",
]
