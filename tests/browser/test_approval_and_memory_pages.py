"""The approval page and the Memory page in Chromium: their words, their buttons, light and dark, and a
390 px phone screen without sideways scrolling. Full-page screenshots land in ``var/test-artifacts/pages/``."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from approvals_app.cards import card_confirm
from approvals_app.models import Approval
from memory_app.services import memory_propose
from sessions_app.models import SessionEvent
from sessions_app.terminate import terminate_request
from tests.approvals_app.approval_fixtures import token_of
from tests.browser.conftest import ROOT, log_in, off_the_browser_loop
from tests.conftest import scope_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PAGES = ROOT / "var" / "test-artifacts" / "pages"
LOOKS = [(1280, 900, "light"), (1280, 900, "dark"), (390, 844, "light"), (390, 844, "dark")]


def shoot(page: Any, name: str) -> None:
    PAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(PAGES / f"{name}.png"), full_page=True)


def no_sideways_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth"))


def contrast(page: Any, selector: str) -> float:
    """The WCAG contrast ratio of ``selector``'s text against the first opaque background behind it."""
    return float(
        page.evaluate(
            """(selector) => {
              const node = document.querySelector(selector);
              const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
              let bg = null;
              for (let el = node; el; el = el.parentElement) {
                const c = rgb(getComputedStyle(el).backgroundColor);
                if (c.length < 4 || c[3] > 0.5) { bg = c; break; }
              }
              bg = bg || [255, 255, 255];
              const lum = (c) => {
                const [r, g, b] = c.slice(0, 3).map((v) => {
                  v /= 255;
                  return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
                });
                return 0.2126 * r + 0.7152 * g + 0.0722 * b;
              };
              const a = lum(rgb(getComputedStyle(node).color)), b = lum(bg);
              return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
            }""",
            selector,
        )
    )


@pytest.fixture
def approval_link(cast, demo_session) -> str:
    for user in (cast.owner, cast.approver):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    wait_for(
        lambda: SessionEvent.objects.filter(session=demo_session, kind="output").count() >= 3,
        "the demo session's first ticks",
        timeout=60,
    )
    off_the_browser_loop(
        lambda: terminate_request(
            scope=scope_of(cast.owner, cast.acme), session=demo_session, reason="It is looping; I will restart it."
        )
    )
    return f"/approvals/{token_of(cast.approver)}/"


@pytest.mark.parametrize(("width", "height", "scheme"), LOOKS, ids=lambda v: str(v))
def test_the_approval_page_reads_as_a_decision(cast, approval_link, open_browser, width, height, scheme):
    page = open_browser(width=width, height=height, color_scheme=scheme)
    log_in(page, cast.approver, path=approval_link)
    what = page.locator("[data-field=sentence]")
    expect(what).to_contain_text("Terminate the session \u201cdemo\u201d (tmux instance demo), started by owner")
    expect(page.locator(".tess-approval-reason blockquote")).to_have_text("It is looping; I will restart it.")
    output = page.locator("pre[data-field=output]")
    expect(output).to_contain_text("tick")
    assert "\x1b" not in output.inner_text()
    expect(page.locator("#tess-approval-countdown")).to_have_text(__import__("re").compile(r"^1?\d min \d+ s left$"))
    approve = page.get_by_role("button", name="Approve")
    deny = page.get_by_role("button", name="Deny")
    expect(approve).to_be_visible() and expect(deny).to_be_visible()
    expect(page.locator("#site-name")).to_have_text("Tess")
    assert page.locator("link[rel=icon]").get_attribute("href") == "/static/tess/favicon.svg"
    assert page.request.get("/static/tess/favicon.svg").ok
    assert no_sideways_scroll(page), "the page scrolls sideways"
    for selector in ("[data-field=sentence]", ".tess-approval-reason blockquote", "pre[data-field=output]"):
        assert contrast(page, selector) >= 4.5, (selector, scheme)
    # Approve is the admin's primary button; Deny is the admin's delete colour.
    primary = page.evaluate("getComputedStyle(document.querySelector('input.default')).backgroundColor")
    danger = page.evaluate("getComputedStyle(document.querySelector('input.tess-danger')).backgroundColor")
    assert primary != danger
    shoot(page, f"approval-{width}-{scheme}")


def test_denying_needs_a_reason_then_the_second_click_does_nothing(cast, approval_link, open_browser):
    page = open_browser()
    log_in(page, cast.approver, path=approval_link)
    page.get_by_role("button", name="Deny").click()  # the reason is required: the browser keeps the form
    assert Approval.objects.get().status == "pending"
    page.get_by_label("To deny, say why (the requester reads it)").fill("Not during the release.")
    page.get_by_role("button", name="Deny").click()
    expect(page.locator("h2[data-status]")).to_have_text("You denied this request")
    page.goto(approval_link)
    expect(page.locator("#content")).to_contain_text("Nothing was done")
    assert Approval.objects.get().status == "denied"


def remember(cast, value: str, **data: str) -> None:
    scope = scope_of(cast.owner, cast.acme)

    def write() -> None:
        card = memory_propose(scope, data={"op": "remember", "value": value, **data})
        card_confirm(scope=scope, card_id=card.pk)

    off_the_browser_loop(write)


@pytest.mark.parametrize(("width", "height", "scheme"), LOOKS, ids=lambda v: str(v))
def test_the_memory_page_in_plain_words(cast, open_browser, width, height, scheme):
    remember(cast, "Lead with the severity, then the customer impact.", category="preferences", slot="lead")
    remember(cast, "Ship the billing migration before Friday.", category="standing_initiative")
    page = open_browser(width=width, height=height, color_scheme=scheme)
    log_in(page, cast.owner)
    page.locator("#user-tools").get_by_role("link", name="Your memory").click()
    page.wait_for_url("**/memory/")
    content = page.locator("#content")
    for text in ("Preferences", "Current focus", "Pinned items", "Up to 12 notes, kept until you delete them."):
        expect(content).to_contain_text(text)
    expect(content).to_contain_text("Lead with the severity, then the customer impact.")
    shown = content.inner_text()  # what is rendered: the collapsed details line is not
    assert "salience" not in shown and "/api/v1/" not in shown and "standing_initiative" not in shown
    # Dates are shown in the reader's own format, not as an ISO timestamp.
    confirmed = page.locator(".tess-memory-facts time").first
    expect(confirmed).not_to_contain_text("UTC")
    assert confirmed.get_attribute("datetime")
    for name in ("Change…", "Renew…", "Delete…", "Delete all my notes…", "Remember…"):
        expect(page.get_by_role("button", name=name).first).to_be_visible()
    assert no_sideways_scroll(page), "the page scrolls sideways"
    for selector in (".tess-memory-value", ".tess-memory-purpose", "#tess-cat-preferences"):
        assert contrast(page, selector) >= 4.5, (selector, scheme)
    shoot(page, f"memory-{width}-{scheme}")


def test_deleting_a_note_from_the_memory_page_asks_first(cast, open_browser):
    remember(cast, "Lead with the severity.", category="preferences", slot="lead")
    page = open_browser()
    log_in(page, cast.owner, path="/memory/")
    page.get_by_role("button", name="Delete…").click()
    expect(page.locator(".tess-card-sentence")).to_have_text(
        "Delete your note in preferences, with every superseded revision of it."
    )
    shoot(page, "memory-confirm")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".tess-card-outcome")).to_have_text("Deleted 1 note.")
    page.get_by_role("link", name="Back to your memory").click()
    expect(page.locator("[data-category=preferences]")).to_contain_text("Nothing here yet.")
