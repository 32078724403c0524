"""The reference pages are generated from the code (tools/docs_reference.py, run by the site's
build): each names everything its source declares, the nav names every page, and the site's
hook points repository links at site pages."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from claimgraph import errors
from claimgraph.core.commands import COMMANDS
from claimgraph.core.model import LIMITS, Reason
from tests.conftest import ROOT
from tests.docs_text import DOCS, docs_reference, nav, reference_page


@pytest.mark.parametrize("rel", sorted(docs_reference().PAGES))
def test_each_page_generates_with_a_title_and_no_code_block(rel: str) -> None:
    """A generated page starts with its title and has no fenced block (every block of the
    docs is run by tests/test_readme.py; these pages have none to run)."""
    text = reference_page(rel)
    assert text.startswith("# ")
    assert "```" not in text
    assert not (DOCS / rel).exists(), f"docs/{rel} is generated: it must not be on disk"


def test_the_cli_page_has_every_command() -> None:
    """Every command and group of the click app has its heading."""
    text = reference_page("reference/cli.md")
    for path, _ in docs_reference().walk_cli():
        assert re.search(rf"^#+ claimgraph {re.escape(' '.join(path))}$", text, flags=re.M), path


def test_the_http_page_has_every_route() -> None:
    """Every operation of the OpenAPI document has its heading."""
    text = reference_page("reference/http.md")
    for method, path, _ in docs_reference().operations():
        assert f"### {method} {path}\n" in text, (method, path)


def test_the_mcp_page_has_every_tool_and_resource() -> None:
    """Every MCP tool and resource is on the page."""
    from claimgraph.mcp.toolspec import mcp_tools

    text = reference_page("reference/mcp.md")
    for tool in mcp_tools():
        assert f"### {tool['name']}\n" in text
    for r in docs_reference().mcp_resources():
        assert r["uri"] in text


def test_the_catalogue_page_has_every_command_type_and_its_route() -> None:
    """Every command type has its section; a client command names its HTTP route."""
    text = reference_page("reference/commands.md")
    for spec in COMMANDS.values():
        assert f"## {spec.type}\n" in text
        if spec.client:
            assert f"`POST /v1/commands/{spec.type}`" in text, spec.type


def test_the_decisions_page_has_every_reason_code() -> None:
    text = reference_page("reference/decisions.md")
    for r in Reason:
        assert f"| `{r.value}` |" in text, r


def test_the_exit_codes_page_names_every_error() -> None:
    text = reference_page("reference/exit-codes.md")
    for name in errors.__all__:
        assert f"`{name}`" in text, name


def test_the_metrics_page_has_every_metric_of_every_process() -> None:
    """Every metric of serve, the governor and the projector is on the page."""
    text = reference_page("reference/metrics.md")
    names = [n for _, _, fams in docs_reference().metric_sets() for n, *_ in fams]
    assert "claimgraph_graph_up" in names and "claimgraph_consumer_lag" in names
    for n in names:
        assert f"`{n}`" in text, n


def test_every_environment_variable_the_package_reads_is_documented() -> None:
    """Each CLAIMGRAPH_* name in the package's source is on the configuration page (an
    option's variable or the generator's ENVIRONMENT table)."""
    text = reference_page("reference/configuration.md")
    used = set()
    for path in (ROOT / "claimgraph").rglob("*.py"):
        used |= set(re.findall(r"CLAIMGRAPH_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    used = {u for u in used if not u.startswith("CLAIMGRAPH_KAFKA")} | {"CLAIMGRAPH_KAFKA_*"}
    for name in sorted(used):
        assert f"`{name}`" in text, f"{name} is read by the package but not documented"


def test_the_limits_page_has_every_fixed_bound() -> None:
    text = reference_page("reference/limits.md")
    for key in LIMITS:
        assert f"`{key}`" in text


def test_the_nav_names_every_page_and_only_pages_that_exist() -> None:
    """mkdocs.yml's nav lists every page on disk, every generated page and the two pages
    from the repository's root, and nothing else."""
    gen = docs_reference()
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mkdocs_hooks
    finally:
        sys.path.remove(str(ROOT / "tools"))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    expected = on_disk | set(gen.PAGES) | set(mkdocs_hooks.FROM_ROOT)
    assert sorted(nav()) == sorted(expected)


def test_the_hook_points_repository_links_at_site_pages() -> None:
    """A page's link to BENCHMARKS.md by its repository path becomes the site's page, and so
    does CHANGELOG.md's link to a docs/ page; other links are left alone."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mkdocs_hooks
    finally:
        sys.path.remove(str(ROOT / "tools"))

    def page(src: str) -> SimpleNamespace:
        return SimpleNamespace(file=SimpleNamespace(src_uri=src))

    md = "[b](../../BENCHMARKS.md) [c](../../CHANGELOG.md#x) [s](schema.md) [e](https://x/a.md)"
    out = mkdocs_hooks.on_page_markdown(md, page("how-to/rules.md"), None, None)  # type: ignore[arg-type]
    assert out == "[b](../benchmarks.md) [c](../changelog.md#x) [s](schema.md) [e](https://x/a.md)"
    root = mkdocs_hooks.on_page_markdown(
        "[s](docs/storage.md) [r](README.md)",
        page("changelog.md"),
        None,
        None,  # type: ignore[arg-type]
    )
    assert root == "[s](storage.md) [r](README.md)"


def test_the_generator_writes_the_pages_it_builds(tmp_path: Path) -> None:
    """``python tools/docs_reference.py --out DIR`` writes every page, as the site has it."""
    import subprocess

    r = subprocess.run(
        [sys.executable, str(ROOT / "tools/docs_reference.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    for rel in docs_reference().PAGES:
        assert (tmp_path / rel).read_text(encoding="utf-8") == reference_page(rel), rel
