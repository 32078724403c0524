"""The docs as the tests read them: README.md, CHANGELOG.md and the pages of docs/, in reading
order (the README first, then mkdocs.yml's nav), and the reference pages generated from the code.

BENCHMARKS.md is not among them: it is a report ``make bench`` writes, not documentation to run.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


@functools.cache
def nav() -> list[str]:
    """The pages mkdocs.yml's nav names, in order (paths relative to docs/)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return list(_nav_pages(config["nav"]))


def doc_files() -> list[Path]:
    """README.md, then every markdown page on disk in nav order, then any page the nav lacks,
    and CHANGELOG.md."""
    on_disk = sorted(DOCS.rglob("*.md"))
    ordered = [DOCS / p for p in nav() if (DOCS / p) in on_disk]
    rest = [p for p in on_disk if p not in ordered]
    return [ROOT / "README.md", *ordered, *rest, ROOT / "CHANGELOG.md"]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_blocks() -> list[Block]:
    """Every fenced block of the docs, in reading order."""
    out = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        out += [
            Block(path, text[: m.start()].count("\n") + 1, m.group(1), m.group(2))
            for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
        ]
    return out


def blocks(lang: str) -> list[str]:
    """The text of every block of ``lang``, in reading order."""
    return [b.text for b in doc_blocks() if b.lang == lang]


def block(lang: str, marker: str) -> str:
    """The text of the one block of ``lang`` that has ``marker`` on a line."""
    (found,) = [b.text for b in doc_blocks() if b.lang == lang and marker in b.text]
    return found


def docs_reference() -> Any:
    """``tools/docs_reference.py``, the generator of the reference pages."""
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    import docs_reference as module

    return module


@functools.cache
def reference_page(rel: str) -> str:
    """A generated reference page (``reference/limits.md``), as the site shows it."""
    text: str = docs_reference().PAGES[rel]()
    return text
