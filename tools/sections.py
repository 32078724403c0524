"""BENCHMARKS.md's sections: each bench tool owns the text from its marker to the next one.

``tools/bench.py`` writes the head (everything before the first marker); every other
``tools/bench_*.py`` writes one section, ``<!-- NAME-benchmarks -->`` and what follows up to
the next marker line (or the end). Writing one part keeps every other part byte for byte, so a
tool run alone never drops the sections of the tools that ran after it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["MARKER_LINE", "replace_head", "replace_section", "write_head", "write_section"]

MARKER_LINE = re.compile(r"^<!-- [a-z0-9-]+-benchmarks -->$", re.MULTILINE)


def replace_section(old: str, marker: str, text: str) -> str:
    """``old`` with the section after ``marker`` replaced by ``text`` (appended at the end
    when ``old`` has no such marker); every other part unchanged."""
    if not MARKER_LINE.fullmatch(marker):
        raise ValueError(f"{marker!r} is not a section marker like <!-- name-benchmarks -->")
    body = marker + "\n" + text.rstrip("\n") + "\n"
    found = list(MARKER_LINE.finditer(old))
    mine = next((m for m in found if m.group() == marker), None)
    if mine is None:
        head = old.rstrip("\n")
        return (head + "\n\n" if head else "") + body
    after = next((m for m in found if m.start() > mine.start()), None)
    rest = "" if after is None else "\n" + old[after.start() :]
    return old[: mine.start()] + body + rest


def replace_head(old: str, text: str) -> str:
    """``old`` with everything before its first marker replaced by ``text``."""
    first = MARKER_LINE.search(old)
    body = text.rstrip("\n") + "\n"
    return body if first is None else body + "\n" + old[first.start() :]


def write_section(path: Path, marker: str, text: str) -> None:
    """Replace (or append) the section after ``marker`` in the report at ``path``."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(replace_section(old, marker, text), encoding="utf-8")


def write_head(path: Path, text: str) -> None:
    """Replace the report's head (before the first section marker) at ``path``."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(replace_head(old, text), encoding="utf-8")
