"""Avro's primitive encodings: zigzag varints (by table where short), lengths, strings, bytes.

The writers here take an already zigzagged value; the readers take ``(data, position)`` and
return ``(value, next position)``, raising :class:`AvroDecodeError` for anything that is not
a valid encoding (and nothing else, given in-range positions).
"""

from __future__ import annotations

__all__ = [
    "FAR",
    "LEN",
    "LEN_TABLE",
    "SE",
    "TABLE",
    "V14",
    "VL",
    "ZZ",
    "AvroDecodeError",
    "read_bytes",
    "read_int",
    "read_long",
    "read_string",
    "read_uvar",
    "write_uint",
    "write_ulong",
]


class AvroDecodeError(ValueError):
    """The bytes are not one whole, well-formed value of the schema."""


# -- writing ---------------------------------------------------------------------------------

TABLE = 1 << 14  # zigzag values below this come from a table (1 or 2 bytes)
LEN_TABLE = TABLE >> 1  # lengths and counts below this (their zigzag is 2n)
_U64 = 1 << 64


def _pairs(high_flag: int) -> list[bytes]:
    """For x < 2**14: bytes((x & 0x7F | 0x80, x >> 7 | high_flag)), sliced from one buffer."""
    buf = bytearray(2 * TABLE)
    buf[0::2] = bytes(range(0x80, 0x100)) * 128
    buf[1::2] = b"".join(bytes((h | high_flag,)) * 128 for h in range(128))
    raw = bytes(buf)
    return [raw[i : i + 2] for i in range(0, 2 * TABLE, 2)]


# VL[z]: the minimal varint of z < 2**14; V14[x]: the 14 bits x as two bytes, both flagged
# "more follows". A long varint is a run of V14 pieces ended by one VL piece.
VL: list[bytes] = [bytes((z,)) for z in range(0x80)] + _pairs(0)[0x80:]
V14: list[bytes] = _pairs(0x80)
LEN: list[bytes] = VL[0::2]  # LEN[n] is the varint of the zigzag of n >= 0


def write_ulong(z: int) -> bytes:
    """The varint of an already zigzagged value ``z`` (0 <= z < 2**64)."""
    if z < 0x4000:
        return VL[z]
    if z < 0x10000000:
        return V14[z & 0x3FFF] + VL[z >> 14]
    if z < 0x40000000000:
        return V14[z & 0x3FFF] + V14[(z >> 14) & 0x3FFF] + VL[z >> 28]
    if z < 0x100000000000000:
        return V14[z & 0x3FFF] + V14[(z >> 14) & 0x3FFF] + V14[(z >> 28) & 0x3FFF] + VL[z >> 42]
    if z >= _U64:
        raise ValueError("value out of the signed 64-bit range of an Avro long")
    return (
        V14[z & 0x3FFF]
        + V14[(z >> 14) & 0x3FFF]
        + V14[(z >> 28) & 0x3FFF]
        + V14[(z >> 42) & 0x3FFF]
        + VL[z >> 56]
    )


def write_uint(z: int) -> bytes:
    """Like :func:`write_ulong` for an Avro ``int`` (signed 32 bits)."""
    if z >> 32:
        raise ValueError("value out of the signed 32-bit range of an Avro int")
    return write_ulong(z)


# -- reading ---------------------------------------------------------------------------------

# The common cases inline, with tables indexed by a varint's first byte b: SE[b] is where a
# string ends relative to its length byte when b is its whole (non-negative) length, and
# otherwise a huge offset that fails the bounds check and so takes the general path; ZZ[b]
# is the long a one-byte varint b stands for, or None.
FAR = 1 << 62
SE = tuple((b >> 1) + 1 if b < 0x80 and not b & 1 else FAR for b in range(256))
ZZ = tuple((b >> 1) ^ -(b & 1) if b < 0x80 else None for b in range(256))


def read_uvar(d: bytes, p: int) -> tuple[int, int]:
    """Read the varint at ``d[p]``: (its unsigned value, the position after it).

    At most 10 bytes, and the tenth may only carry bit 63: anything longer or larger is not
    an Avro long.
    """
    b = d[p]
    if b < 0x80:
        return b, p + 1
    v = b & 0x7F
    b = d[p + 1]
    if b < 0x80:
        return v | b << 7, p + 2
    v |= (b & 0x7F) << 7
    b = d[p + 2]
    if b < 0x80:
        return v | b << 14, p + 3
    v |= (b & 0x7F) << 14
    b = d[p + 3]
    if b < 0x80:
        return v | b << 21, p + 4
    v |= (b & 0x7F) << 21
    b = d[p + 4]
    if b < 0x80:
        return v | b << 28, p + 5
    v |= (b & 0x7F) << 28
    b = d[p + 5]
    if b < 0x80:
        return v | b << 35, p + 6
    v |= (b & 0x7F) << 35
    b = d[p + 6]
    if b < 0x80:
        return v | b << 42, p + 7
    v |= (b & 0x7F) << 42
    b = d[p + 7]
    if b < 0x80:
        return v | b << 49, p + 8
    v |= (b & 0x7F) << 49
    b = d[p + 8]
    if b < 0x80:
        return v | b << 56, p + 9
    v |= (b & 0x7F) << 56
    b = d[p + 9]
    if b < 2:
        return v | b << 63, p + 10
    if b < 0x80:
        raise AvroDecodeError(f"varint beyond 64 bits at byte {p}")
    raise AvroDecodeError(f"varint longer than 10 bytes at byte {p}")


def read_long(d: bytes, p: int) -> tuple[int, int]:
    """Read the long at ``d[p]``: (its value, the position after it)."""
    u, p = read_uvar(d, p)
    return (u >> 1) ^ -(u & 1), p


def read_int(d: bytes, p: int) -> tuple[int, int]:
    """Read the int at ``d[p]``: (its value, the position after it)."""
    u, p = read_uvar(d, p)
    if u >> 32:
        raise AvroDecodeError(f"int out of the 32-bit range before byte {p}")
    return (u >> 1) ^ -(u & 1), p


def _span(d: bytes, p: int, what: str) -> tuple[int, int]:
    """Where the string or bytes at ``d[p]`` (its length first) starts and ends."""
    u, start = read_uvar(d, p)
    if u & 1:
        raise AvroDecodeError(f"negative {what} length {(u >> 1) ^ -(u & 1)} at byte {p}")
    end = start + (u >> 1)
    if end > len(d):
        raise AvroDecodeError(
            f"{what} length {u >> 1} at byte {p} with {len(d) - start} bytes left"
        )
    return start, end


def read_string(d: bytes, p: int) -> tuple[str, int]:
    """Read the string at ``d[p]``: (its value, the position after it)."""
    start, end = _span(d, p, "string")
    return d[start:end].decode(), end


def read_bytes(d: bytes, p: int) -> tuple[bytes, int]:
    """Read the bytes at ``d[p]``: (their value, the position after them)."""
    start, end = _span(d, p, "bytes")
    return d[start:end], end
