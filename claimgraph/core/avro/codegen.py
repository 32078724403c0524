"""What the encoder and decoder generators share: fresh names, constants, and ``exec``.

Each schema is compiled into one specialised Python function whose source is generated as
lines of text and ``exec``'d in a namespace of its own (as ``dataclasses`` and ``attrs`` do);
the source is kept in ``linecache`` so tracebacks and ``inspect`` show the generated lines.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from itertools import count
from typing import Any, cast

__all__ = ["Gen", "indent"]

_INDENT = "    "
_SERIAL = count(1)


def indent(lines: list[str], depth: int = 1) -> list[str]:
    """``lines`` indented by ``depth`` levels."""
    return [_INDENT * depth + line for line in lines]


class Gen:
    """A namespace for one generated function, and fresh variable names for its source."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self._ids = count(1)

    def var(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def const(self, value: object, prefix: str = "_K") -> str:
        name = self.var(prefix)
        self.namespace[name] = value
        return name

    def build(self, src: str, func: str, title: str) -> Callable[..., Any]:
        filename = f"<avro_fast {title} #{next(_SERIAL)}>"
        code = compile(src, filename, "exec")
        linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
        exec(code, self.namespace)
        return cast(Callable[..., Any], self.namespace[func])
