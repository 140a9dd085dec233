"""The drawer as a page element: open state across navigation, keyboard, focus, narrow screens, dark mode."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BOX_LABEL = "Message Tess (Enter sends, Shift+Enter adds a line)"


def test_the_drawer_stays_open_across_pages_and_esc_closes_it_returning_focus(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    toggle = page.get_by_role("button", name="Tess", exact=True)
    drawer = page.get_by_role("complementary", name="Tess")
    expect(drawer).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#tess-connection")).to_have_text("Live")  # the session is chosen, the box usable
    toggle.click()
    expect(drawer).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_label(BOX_LABEL)).to_be_focused()

    page.goto("/admin/password_change/")
    expect(drawer).to_be_visible()  # still open on the next page
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(toggle).to_be_focused()
    page.goto("/admin/")
    expect(drawer).to_be_hidden()  # and still closed


def test_enter_sends_and_shift_enter_adds_a_line(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    box = page.get_by_label(BOX_LABEL)
    expect(box).to_be_enabled()
    box.type("hello")
    box.press("Shift+Enter")
    box.type("there")
    expect(box).to_have_value("hello\nthere")
    box.press("Enter")
    expect(page.locator(".tess-in .tess-text").last).to_have_text("hello\nthere")
    expect(page.locator(".tess-out").last).not_to_be_empty()
    expect(box).to_have_value("")


def test_the_session_picker_says_each_session_in_words(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    picker = page.get_by_label("Session", exact=True)
    # A healthy runtime goes unsaid: the title and the status, nothing of the provider's internals.
    expect(picker.locator("option:checked")).to_have_text(re.compile(r"^demo — running(, [a-z ]+)?$"))


def test_a_member_without_a_session_sees_the_drawer_say_so(cast, open_browser):
    page = open_browser()
    log_in(page, cast.teammate)
    page.get_by_role("button", name="Tess", exact=True).click()
    expect(page.get_by_label("Session", exact=True)).to_contain_text("No sessions")
    expect(page.locator("#tess-memory-chip")).to_have_text("Memory: Operator profile")
    expect(page.get_by_label(BOX_LABEL)).to_be_disabled()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_drawer_is_usable_at_390_px(cast, demo_session, open_browser, scheme):
    page = open_browser(width=390, height=844, color_scheme=scheme)
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    drawer = page.get_by_role("complementary", name="Tess")
    box = drawer.bounding_box()
    assert box is not None and box["x"] == 0 and box["width"] == 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing forces sideways scrolling
    expect(page.locator("#tess-connection")).to_have_text("Live")
    message = page.get_by_label(BOX_LABEL)
    message.fill("what's the status?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".tess-out").last).to_contain_text("running")
    background = drawer.evaluate("node => getComputedStyle(node).backgroundColor")
    dark = sum(int(c) for c in background[background.index("(") + 1 : -1].split(",")[:3]) < 3 * 128
    assert dark is (scheme == "dark"), background
    page.get_by_role("button", name="Close Tess").click()
    expect(drawer).to_be_hidden()
    page.get_by_role("button", name="Tess", exact=True).click()  # open again for the screenshot
    expect(drawer).to_be_visible()


def test_coding_work_becomes_a_handoff_card_with_its_status(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    box = page.get_by_label(BOX_LABEL)
    expect(box).to_be_enabled()
    box.fill("implement the login page")
    box.press("Enter")
    handoff = page.locator(".tess-card-handoff")
    expect(handoff.locator(".tess-card-title")).to_have_text(re.compile(r"^Hand-off to Mos"))
    expect(handoff.locator(".tess-card-status")).to_have_text(re.compile(r"^(Queued for Mos|Sent to Mos)\.$"))
