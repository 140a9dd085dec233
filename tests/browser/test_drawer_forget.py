"""Forgetting in the drawer takes the words off the screen (seed 002: forget-all deletes "current bytes and
matching lineage"): the conversation re-renders the redacted turns live, and a reload reads them redacted."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WORDS = "I lead with sev0"


def open_drawer(page):
    page.get_by_role("button", name="Tess", exact=True).click()
    drawer = page.get_by_role("complementary", name="Tess")
    expect(drawer).to_be_visible()
    expect(page.locator("#tess-connection")).to_have_text("Live")
    return drawer


def say(page, text: str) -> None:
    box = page.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    expect(box).to_be_enabled()
    box.fill(text)
    box.press("Enter")
    expect(box).to_have_value("")


def test_forget_all_takes_the_words_off_the_drawer_live_and_after_a_reload(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    conversation = drawer.locator("#tess-conversation")

    say(page, f"remember that {WORDS}")
    card = drawer.locator(".tess-card-memory").first
    card.get_by_role("button", name="Confirm").click()
    expect(card.locator(".tess-card-status")).to_have_text("Remembered.")
    said = conversation.locator(".tess-in").filter(has_text=WORDS)
    expect(said).to_have_count(1)

    say(page, "forget all")
    forget = drawer.locator("#tess-cards .tess-card-memory")
    expect(forget).to_have_count(1)
    forget.get_by_role("button", name="Confirm").click()

    # Live: the websocket's "redacted" event re-renders the turn in place, where it was.
    expect(conversation).not_to_contain_text("sev0")
    first = conversation.locator(".tess-in").first
    expect(first.locator(".tess-text")).to_have_text("(forgotten memory request)")
    expect(conversation.locator(".tess-in").last.locator(".tess-text")).to_have_text("forget all")

    page.reload()
    drawer = page.get_by_role("complementary", name="Tess")
    expect(drawer).to_be_visible()
    expect(page.locator("#tess-connection")).to_have_text("Live")
    conversation = drawer.locator("#tess-conversation")
    expect(conversation.locator(".tess-in")).to_have_count(2)
    expect(conversation.locator(".tess-in").first.locator(".tess-text")).to_have_text("(forgotten memory request)")
    expect(conversation.locator(".tess-in").first).to_have_class(re.compile(r"\btess-redacted\b"))
    expect(conversation).not_to_contain_text("sev0")
