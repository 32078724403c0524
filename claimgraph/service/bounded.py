"""JSON text from outside, parsed within bounds: size, nesting, numbers, text that encodes.

:func:`loads` is the one way hostile JSON is parsed (JSON Lines, trace payloads, arbiter
answers): more than ``max_line`` bytes, nesting deeper than ``max_depth`` (measured by
:func:`too_deep` *before* a recursive parser runs), text that is not UTF-8, ``NaN`` and
``Infinity``, and numbers that overflow are each an :class:`~claimgraph.errors.InputError`
with a clear message. :func:`text` makes any string safe to put in a record.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from claimgraph.core.model import LIMITS
from claimgraph.errors import InputError

__all__ = ["INPUT_LIMITS", "InputLimits", "loads", "text", "too_deep"]


@dataclass(frozen=True, slots=True)
class InputLimits:
    """Bounds on one JSON text (a JSON Lines line, a trace payload, an arbiter's answer):
    its size in bytes and how deep it nests."""

    max_line: int = 1024 * 1024
    max_depth: int = 32


INPUT_LIMITS = InputLimits()


_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_DELTA = tuple({91: 1, 123: 1, 93: -1, 125: -1}.get(b, 0) for b in range(256))  # [ { ] }


def too_deep(data: bytes, limit: int) -> bool:
    """Whether a JSON text nests arrays and objects more than ``limit`` deep (brackets inside
    strings do not count).

    Recursion-free, linear and in C but for one step per 64 KiB, so it runs *before* a parser
    that recurses: a text with at most ``limit`` opening brackets answers at once; otherwise
    strings are dropped, the brackets kept, and the running depth checked chunk by chunk
    (a deep text is caught in its first chunk). Unbalanced brackets are left to the parser.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    # drop escapes (escaped backslashes first, as a parser pairs them), then whole strings
    # (the text between quotes, and an unterminated one to the end), then all but brackets
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(plain.split(b'"')[::2])
    brackets = outside.translate(None, _NOT_BRACKET)
    depth = 0
    for i in range(0, len(brackets), 65536):
        part = brackets[i : i + 65536]
        if max(accumulate(map(_DELTA.__getitem__, part), initial=depth)) > limit:
            return True
        depth += part.count(b"[") + part.count(b"{") - part.count(b"]") - part.count(b"}")
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    f = float(text)
    if not math.isfinite(f):
        raise ValueError(f"{text[:40]} overflows a 64-bit float")
    return f


# one decoder for every call: json.loads with hooks would build a new one per text
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def loads(data: bytes, limits: InputLimits = INPUT_LIMITS) -> Any:
    """Parse one JSON text strictly and within ``limits``; every failure is an InputError.

    Refused: more than ``max_line`` bytes, nesting deeper than ``max_depth`` (checked before
    parsing), text that is not UTF-8, ``NaN``/``Infinity`` and numbers that overflow to them,
    integers of more digits than Python converts.
    """
    if len(data) > limits.max_line:
        raise InputError(f"{len(data)} bytes; at most {limits.max_line} per line")
    if too_deep(data, limits.max_depth):
        raise InputError(f"nested more than {limits.max_depth} deep")
    try:
        doc = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc}") from None
    try:
        return _DECODER.decode(doc)
    except ValueError as exc:  # JSONDecodeError, int digits, overflow
        raise InputError(f"not JSON: {text(str(exc), 300)}") from None
    except RecursionError:  # unreachable below max_depth; kept as a named failure anyway
        raise InputError(f"nested too deep; at most {limits.max_depth}") from None


def text(value: str, limit: int = LIMITS["detail"]) -> str:
    """``value`` as text a record can carry: valid UTF-8 (lone surrogates escaped), bounded."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")[:limit]
