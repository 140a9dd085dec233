"""The drawer's memory transparency in a real browser (seed 002): cards, recall, the disclosure, deletion."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_app.models import OperatorMemory, OperatorMemoryHistory
from tests.browser.conftest import log_in, off_the_browser_loop

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def open_drawer(page):
    page.get_by_role("button", name="Tess", exact=True).click()
    drawer = page.get_by_role("complementary", name="Tess")
    expect(drawer).to_be_visible()
    expect(page.locator("#tess-connection")).to_have_text("Live")
    return drawer


def say(page, text: str) -> None:
    box = page.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    box.fill(text)
    box.press("Enter")


def test_a_confirmed_note_shows_in_the_disclosure_and_is_recalled_under_the_reply(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    expect(drawer.locator("#tess-memory-chip")).to_have_text("Memory: Operator profile")

    say(page, "remember that I lead with sev0")
    card = drawer.locator(".tess-card-memory")
    expect(card.locator(".tess-card-title")).to_have_text("Remember a preference: “I lead with sev0”")
    assert not OperatorMemory.objects.exists()  # nothing is remembered before the card is confirmed
    card.get_by_role("button", name="Confirm").click()
    expect(card.locator(".tess-card-status")).to_have_text("Remembered.")

    drawer.locator("#tess-memory > summary").click()
    note = drawer.locator(".tess-note").first
    expect(note.locator("blockquote")).to_have_text("I lead with sev0")
    expect(note).to_contain_text("active")

    say(page, "what am I working on?")
    reply = drawer.locator(".tess-out").last
    recalled = reply.locator(".tess-recalled")
    expect(recalled.locator("summary")).to_have_text("Recalled: 1 operator note")
    recalled.locator("summary").click()  # the owner sees which notes grounded the reply
    expect(recalled.locator(".tess-recalled-notes")).to_have_text("Preference: I lead with sev0")


def test_dismissing_a_card_remembers_nothing(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    say(page, "remember that I lead with sev1")
    card = drawer.locator(".tess-card-memory")
    card.get_by_role("button", name="Dismiss").click()
    expect(card.locator(".tess-card-status")).to_have_text("Dismissed: nothing was changed.")
    assert not OperatorMemory.objects.exists()


def test_delete_all_names_what_it_deletes_and_reports_the_servers_count(cast, demo_session, open_browser):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose
    from tests.conftest import scope_of

    def write_notes() -> None:
        scope = scope_of(cast.owner, cast.acme)
        for data in (
            {"op": "remember", "category": "preferences", "value": "lead with sev0"},
            {"op": "remember", "category": "standing_initiative", "value": "Phase 5"},
            {"op": "correct", "category": "standing_initiative", "slot": "current", "value": "Phase 6"},
        ):
            card_confirm(scope=scope, card_id=memory_propose(scope, data=data).pk)

    off_the_browser_loop(write_notes)
    current, superseded = OperatorMemory.objects.count(), OperatorMemoryHistory.objects.count()
    assert (current, superseded) == (2, 1)

    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    disclosure = drawer.locator("#tess-memory")
    expect(disclosure).not_to_have_attribute("open", "")  # collapsed by default
    disclosure.locator("> summary").click()
    expect(disclosure.locator(".tess-history > summary")).to_have_text("Superseded revisions (1)")
    disclosure.get_by_role("button", name="Delete all my notes").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text(
        "Delete all 2 current notes and 1 superseded revision of your operator memory? This cannot be undone."
    )
    dialog.get_by_role("button", name="Delete all").click()
    expect(disclosure.locator(".tess-memory-status")).to_have_text("3 notes deleted")
    assert not OperatorMemory.objects.exists() and not OperatorMemoryHistory.objects.exists()

    # The status changes before the disclosure is read again: wait for the new one, whose button knows the counts.
    expect(disclosure.get_by_role("heading", name="Current notes (0)")).to_be_visible()
    disclosure.get_by_role("button", name="Delete all my notes").click()
    expect(dialog).to_contain_text("Delete all 0 current notes and 0 superseded revisions")
    dialog.get_by_role("button", name="Delete all").click()
    expect(disclosure.locator(".tess-memory-status")).to_have_text("0 notes deleted")


def test_correct_reauthorize_and_delete_one_each_ask_first_naming_the_note(cast, demo_session, open_browser):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose
    from tests.conftest import scope_of

    def write_note() -> None:
        scope = scope_of(cast.owner, cast.acme)
        data = {"op": "remember", "category": "preferences", "slot": "lead", "value": "lead with sev0"}
        card_confirm(scope=scope, card_id=memory_propose(scope, data=data).pk)

    off_the_browser_loop(write_note)
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    disclosure = drawer.locator("#tess-memory")
    disclosure.locator("> summary").click()
    status = disclosure.locator(".tess-memory-status")
    dialog = page.get_by_role("alertdialog")

    disclosure.get_by_label("New value for preferences / lead").fill("lead with sev1")
    disclosure.get_by_role("button", name="Correct").click()
    expect(dialog).to_contain_text('Correct preferences / lead from "lead with sev0" to "lead with sev1"?')
    dialog.get_by_role("button", name="Correct").click()
    expect(status).to_have_text("Corrected: now revision 2.")
    expect(disclosure.locator(".tess-history > summary")).to_have_text("Superseded revisions (1)")

    disclosure.get_by_role("button", name="Reauthorize").click()
    expect(dialog).to_contain_text('the value "lead with sev1" and revision 2 stay as they are')
    dialog.get_by_role("button", name="Reauthorize").click()
    expect(status).to_have_text("Reauthorized: the source is renewed; content and revision unchanged.")

    disclosure.get_by_role("button", name="Delete", exact=True).click()
    expect(dialog).to_contain_text(
        'Delete the note preferences / lead ("lead with sev1") and its 1 superseded revision? This cannot be undone.'
    )
    page.keyboard.press("Escape")  # Esc cancels the confirmation first; nothing is deleted, the drawer stays
    expect(dialog).to_be_hidden()
    expect(drawer).to_be_visible()
    assert OperatorMemory.objects.count() == 1
    disclosure.get_by_role("button", name="Delete", exact=True).click()
    dialog.get_by_role("button", name="Delete this note").click()
    expect(status).to_have_text("2 notes deleted")
    assert not OperatorMemory.objects.exists() and not OperatorMemoryHistory.objects.exists()
