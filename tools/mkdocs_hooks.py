"""mkdocs hooks (``hooks:`` in mkdocs.yml): the pages the site takes from outside docs/.

The reference pages are generated from the code by :mod:`docs_reference` as the site is built,
and CHANGELOG.md and BENCHMARKS.md come from the repository's root, where a reader of the
repository looks for them. Pages link to those files by their paths in the repository (so the
links work when the markdown is read in place); :func:`on_page_markdown` points such links at
the site's pages. Nothing is fetched: the build runs offline.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "tools"))

import docs_reference  # noqa: E402 - tools/ is not a package

# site page → the file at the repository's root it is
FROM_ROOT = {"changelog.md": "CHANGELOG.md", "benchmarks.md": "BENCHMARKS.md"}
_LINK = re.compile(r"\]\(([^)\s#]+\.md)(#[^)\s]*)?\)")


def on_files(files: Files, config: Any) -> Files:
    """Add the generated reference pages and the root's pages to the site."""
    for rel, page in docs_reference.PAGES.items():
        if files.get_file_from_path(rel) is not None:
            raise PluginError(f"docs/{rel} is generated from the code: delete the file")
        files.append(File.generated(config, rel, content=page()))
    for rel, src in FROM_ROOT.items():
        files.append(File.generated(config, rel, abs_src_path=str(ROOT / src)))
    return files


def site_page(target: Path) -> str | None:
    """The site page (relative to docs/) a repository file is, if it is one."""
    for rel, src in FROM_ROOT.items():
        if target == ROOT / src:
            return rel
    if target.is_relative_to(DOCS):
        return target.relative_to(DOCS).as_posix()
    return None


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Links to CHANGELOG.md and BENCHMARKS.md by their repository paths (and, from those two,
    to docs/...) become links to the site's pages."""
    src = page.file.src_uri
    here = ROOT / FROM_ROOT[src] if src in FROM_ROOT else DOCS / src

    def fix(m: re.Match[str]) -> str:
        if "://" in m.group(1) or m.group(1).startswith("/"):
            return m.group(0)
        target = os.path.normpath(here.parent / m.group(1))
        rel = site_page(Path(target))
        if rel is None:
            return m.group(0)
        link = os.path.relpath(DOCS / rel, (DOCS / src).parent)
        return f"]({Path(link).as_posix()}{m.group(2) or ''})"

    return _LINK.sub(fix, markdown)
