"""BENCHMARKS.md sections: a bench tool run alone rewrites its own section and nothing else.

Each ``tools/bench_*.py`` owns the text from its marker to the next marker; ``tools/bench.py``
owns the head. All of them write through ``tools/sections.py``.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

TOOLS = ROOT / "tools"


@pytest.fixture(scope="module")
def sections() -> Iterator[Any]:
    sys.path.insert(0, str(TOOLS))
    try:
        import sections as mod

        yield mod
    finally:
        sys.path.remove(str(TOOLS))


def _markers() -> dict[str, str]:
    """bench tool file name → the MARKER it declares (module level)."""
    out = {}
    for path in sorted(TOOLS.glob("bench_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["MARKER"]
                and isinstance(node.value, ast.Constant)
            ):
                out[path.name] = node.value.value
    return out


def _report(markers: list[str]) -> str:
    """A report with a head and one section per marker, each with text a naive writer trips
    on: an HTML comment of its own, and no blank line at its end."""
    parts = ["# Benchmarks\n\nhead text\n\n"]
    for i, m in enumerate(markers):
        parts.append(f"{m}\n## section {i}\n<!-- a comment inside section {i} -->\nrow {i}\n\n")
    return "".join(parts).rstrip("\n") + "\n"


def _split(text: str, marker_line: re.Pattern[str]) -> dict[str, str]:
    """marker (or '' for the head) → the text of its part, marker included."""
    cuts = [m.start() for m in marker_line.finditer(text)]
    bounds = [0, *cuts, len(text)]
    out = {}
    for a, b in itertools.pairwise(bounds):
        part = text[a:b]
        m = marker_line.match(part)
        out[m.group() if m else ""] = part
    return out


def test_every_bench_tool_declares_its_own_marker() -> None:
    """Every section-writing bench tool has a module-level MARKER, each one distinct."""
    markers = _markers()
    tools = {p.name for p in TOOLS.glob("bench_*.py")}
    assert set(markers) == tools, tools - set(markers)
    assert len(set(markers.values())) == len(markers)


def test_each_writer_keeps_every_other_section_byte_for_byte(sections: Any) -> None:
    """Writing any tool's section into a report holding all of them replaces that section
    only; the head and every other section, before and after it, are unchanged."""
    mod = sections
    line: re.Pattern[str] = mod.MARKER_LINE
    markers = list(_markers().values())
    old = _report(markers)
    before = _split(old, line)
    assert set(before) == {"", *markers}
    for m in markers:
        new = mod.replace_section(old, m, "fresh figures\n")
        after = _split(new, line)
        assert after[m].startswith(f"{m}\nfresh figures\n")
        assert {k: v for k, v in after.items() if k != m} == {
            k: v for k, v in before.items() if k != m
        }
        # writing the same section twice is idempotent
        assert mod.replace_section(new, m, "fresh figures\n") == new


def test_a_missing_section_is_appended_and_the_head_is_replaced_alone(
    sections: Any, tmp_path: Path
) -> None:
    """A tool whose marker is absent appends its section at the end; bench.py's head writer
    replaces the text before the first marker and keeps every section."""
    mod = sections
    markers = list(_markers().values())
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(_report(markers[1:]), encoding="utf-8")
    mod.write_section(path, markers[0], "appended\n")
    text = path.read_text(encoding="utf-8")
    assert text == _report(markers[1:]) + f"\n{markers[0]}\nappended\n"
    mod.write_head(path, "# New head\n")
    new = path.read_text(encoding="utf-8")
    assert new.startswith("# New head\n\n" + markers[1] + "\n")
    assert new.split(markers[1], 1)[1] == text.split(markers[1], 1)[1]
    fresh = tmp_path / "new.md"
    mod.write_section(fresh, markers[0], "only\n")
    assert fresh.read_text(encoding="utf-8") == f"{markers[0]}\nonly\n"
    with pytest.raises(ValueError, match="not a section marker"):
        mod.replace_section("", "<!-- kafka -->", "x")


def test_bench_tools_write_their_section_only_through_the_helper() -> None:
    """In every bench tool, MARKER is used only as write_section's marker (no tool splits
    the report itself), and bench.py writes its head with write_head."""
    for path in sorted(TOOLS.glob("bench_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ok: set[int] = set()
        calls = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "write_section":
                calls += 1
                ok |= {id(a) for a in node.args if getattr(a, "id", None) == "MARKER"}
        uses = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and n.id == "MARKER" and isinstance(n.ctx, ast.Load)
        ]
        assert calls >= 1, f"{path.name} does not write through sections.write_section"
        assert uses and all(id(n) in ok for n in uses), f"{path.name} uses MARKER itself"
    bench = (TOOLS / "bench.py").read_text(encoding="utf-8")
    assert "write_head(" in bench and "<!-- " not in bench
