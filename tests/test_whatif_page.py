"""The review page's what-if of a proposed schema, in a real headless Chromium over real HTTP.

An admin starts from the schema in force, removes a writer, asks "What if?" and reads the
report beside the proposal: the decisions that would change, the resolve no longer needed,
the conflict that vanishes. A principal who is not an admin is told the publish would be
refused. Nothing is recorded either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS
from tests.test_review_page import ARTIFACTS, CHROMIUM_FLAGS, CSP_WATCH, _chromium, _uvicorn
from tests.test_whatif import NO_DBA


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Graph]]:
    """dba's claim opened a conflict a reviewer resolved, and dba owns d2; served by uvicorn."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="whatif")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    g.assert_("owns", "service:a", "database:d1", agent="inventory", command_id="c1")
    g.assert_("owns", "service:b", "database:d1", agent="dba", task="audit-x", command_id="c2")
    g.assert_("owns", "service:c", "database:d2", agent="dba", task="audit-x", command_id="c3")
    g.resolve("cf:c2", winner="c1", agent="reviewer", command_id="r1")
    with _uvicorn(g) as url:
        yield url, g
    g.close()


def test_what_if_beside_a_proposed_schema(served: tuple[str, Graph]) -> None:
    """Start from the schema in force, drop dba, What if?: three decisions differ, listed."""
    from playwright.sync_api import expect, sync_playwright

    url, g = served
    head = g.head()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            errors: list[Any] = []
            page.on("pageerror", lambda e: errors.append(e))
            page.add_init_script(CSP_WATCH)
            page.goto(f"{url}/review")
            page.fill("#token", TOKENS["admin"])
            page.click("#login button")
            expect(page.get_by_test_id("whoami")).to_have_text("admin (admin)")
            page.get_by_test_id("load-schema").click()
            expect(page.get_by_test_id("proposal-text")).to_have_value(SCHEMA)
            page.get_by_test_id("proposal-text").fill(NO_DBA)
            page.get_by_test_id("what-if").click()
            summary = page.get_by_test_id("what-if-summary")
            expect(summary).to_contain_text("decided again v1–v4")
            expect(summary).to_contain_text("4 commands; 3 decisions differ")
            expect(page.get_by_test_id("what-if-rejected")).to_have_text("newly rejected: 3")
            rejected = page.get_by_test_id("what-if-list-rejected")
            expect(rejected).to_contain_text(
                "v2 claim c2 by dba/audit-x owns(service:b -> database:d1): "
                "quarantined slot_conflict cf:c2 → rejected unauthorized"
            )
            expect(page.get_by_test_id("what-if-not-needed")).to_have_text(
                "resolves and escalations no longer needed: 1"
            )
            expect(page.get_by_test_id("what-if-list-not-needed")).to_contain_text("v4 resolve r1")
            expect(page.get_by_test_id("what-if-vanish")).to_have_text("conflicts that vanish: 1")
            expect(page.get_by_test_id("what-if-list-edges")).to_contain_text(
                "owns(service:c -> database:d2): present → absent"
            )
            page.screenshot(path=str(ARTIFACTS / "review-what-if.png"), full_page=True)

            page.fill("#token", TOKENS["inventory"])  # not an admin: the publish is refused
            page.click("#login button")
            expect(page.get_by_test_id("whoami")).to_have_text("inventory (no roles)")
            page.get_by_test_id("what-if").click()
            expect(summary).to_contain_text("not_admin")
            assert not errors, errors
            assert page.evaluate("window.__csp") == []
        finally:
            browser.close()
    assert g.head() == head  # a dry run records nothing
