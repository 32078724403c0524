"""Collecting a schema document's problems, each with its path in the document (pure)."""

from __future__ import annotations

import re
import reprlib
from typing import Any

from claimgraph.core.model import LIMITS
from claimgraph.core.schema.types import Pattern

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,127}$")
_BOUNDED = reprlib.Repr()
_BOUNDED.maxlevel, _BOUNDED.maxlist, _BOUNDED.maxdict = 3, 4, 4
_BOUNDED.maxstring, _BOUNDED.maxother = 60, 40


class Checker:
    """Collects problems; ``strict`` (rules revision 2 on) bounds what messages show."""

    def __init__(self, *, strict: bool = True) -> None:
        self.problems: list[tuple[str, str]] = []
        self.strict = strict

    def show(self, value: Any) -> str:
        """A value in a message: bounded in strict mode (never expands a whole structure)."""
        return _BOUNDED.repr(value) if self.strict else repr(value)

    def fail(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def keys(
        self, node: dict[str, Any], path: str, allowed: tuple[str, ...], required: tuple[str, ...]
    ) -> None:
        for k in node:
            if k not in allowed:
                self.fail(
                    f"{path}.{k}" if path else str(k),
                    f"unknown key {k!r}; expected one of: {', '.join(allowed)}",
                )
        for k in required:
            if k not in node:
                self.fail(path or "(top level)", f"missing required key {k!r}")

    def name(self, value: Any, path: str, what: str) -> str | None:
        if not isinstance(value, str):
            self.fail(path, f"expected a {what} name (string), got {kind_of(value)}")
            return None
        if not NAME.match(value):
            self.fail(
                path,
                f"{value!r} is not a valid {what} name: expected a letter, then "
                "letters, digits, '_', '.', ':' or '-' (at most 128 characters)",
            )
            return None
        return value

    def pattern(self, value: Any, path: str) -> Pattern | None:
        if not isinstance(value, str) or not value or len(value) > LIMITS["id"]:
            self.fail(path, f"expected a non-empty pattern string, got {kind_of(value)}")
            return None
        return Pattern.of(value)

    def choice(self, value: Any, path: str, options: tuple[str, ...]) -> str | None:
        if value not in options:
            shown = self.show(value)
            self.fail(path, f"{shown} is not allowed; expected one of: {', '.join(options)}")
            return None
        return str(value)

    def patterns(self, value: Any, path: str) -> tuple[Pattern, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(path, f"expected a list of patterns, got {kind_of(value)}")
            return ()
        out = [self.pattern(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(p for p in out if p is not None)


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    return {
        dict: "a mapping",
        list: "a list",
        str: f"the string {value!r}"[:80],
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)
