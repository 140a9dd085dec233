"""Accessibility of the drawer (open, on a session with its terminal), the fleet board and the approval page:
axe-core (frontend/, pinned) run in Chromium on each, with no violation of impact serious or critical."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.browser.test_approval_and_memory_pages import approval_link  # noqa: F401  (the fixture)
from tests.browser.test_drawer_truth import BOX_LABEL
from tests.conftest import require_or_skip
from tests.tess_site.children import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

AXE = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")


@cache
def axe_source() -> str:
    if not AXE.exists():
        require_or_skip(f"AXE-CORE IS NOT INSTALLED at {AXE}: npm ci --prefix frontend (make test does it)")
    return AXE.read_text()


def violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now, each with the nodes it names.

    axe-core is evaluated through the browser's debugging protocol, not added as a script, so the page's
    Content-Security-Policy stays as it is."""
    page.evaluate(axe_source())
    found = page.evaluate(
        """async () => {
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map((n) => ({ target: n.target.join(" "), summary: n.failureSummary })),
          }));
        }"""
    )
    return [v for v in found if v["impact"] in SERIOUS]


def assert_accessible(page: Any) -> None:
    found = violations(page)
    lines = [
        f"{v['id']} ({v['impact']}, {v['help']}): {n['target']}: {n['summary']}" for v in found for n in v["nodes"]
    ]
    assert not found, "\n".join(lines)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_open_drawer_has_no_serious_accessibility_violations(cast, demo_session, open_browser, scheme):
    page = open_browser(color_scheme=scheme)
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    expect(page.locator("#tess-connection")).to_have_text("Live")
    expect(page.locator("#tess-output[data-ready]")).to_have_count(1)
    expect(page.get_by_role("button", name="Interactive")).to_be_visible()
    box = page.get_by_label(BOX_LABEL)
    box.fill("remember I prefer short answers")
    box.press("Enter")
    expect(page.locator(".tess-card-memory")).to_have_count(1)  # a conversation with a card to confirm
    assert_accessible(page)


def test_the_board_has_no_serious_accessibility_violations(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner, "/board/")
    expect(page.locator("#tess-board-live")).to_have_text("Live")
    expect(page.locator("tr.tess-board-row")).to_have_count(1)
    assert_accessible(page)


def test_the_approval_page_has_no_serious_accessibility_violations(cast, approval_link, open_browser):  # noqa: F811
    page = open_browser()
    log_in(page, cast.approver, approval_link)
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    assert_accessible(page)
