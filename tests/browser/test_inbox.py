"""The inbox in a real browser: an approver who was away finds a terminate request and decides it from there."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def ask_to_terminate(operator) -> None:
    operator.get_by_role("button", name="Tess", exact=True).click()
    expect(operator.locator("#tess-connection")).to_have_text("Live")
    box = operator.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    box.fill("terminate this session")
    box.press("Enter")
    expect(operator.locator(".tess-card-approval")).to_have_attribute("data-status", "pending")


def test_an_approver_who_was_logged_out_finds_the_request_in_the_inbox_and_approves_it(
    cast, demo_session, open_browser
):
    operator = open_browser()
    log_in(operator, cast.owner)
    ask_to_terminate(operator)
    # The operator's own request waits in their inbox too: the Tess button counts it.
    expect(operator.locator("#tess-inbox-count")).to_have_text("1")
    expect(operator.locator("#tess-inbox [data-kind=approval_requested]")).to_contain_text("session.terminate")

    # Only now does the approver sign in: no e-mail address, no drawer was open when the links went out.
    approver = open_browser()
    log_in(approver, cast.approver)
    expect(approver.locator("#tess-inbox-count")).to_have_text("1")
    expect(approver.get_by_role("button", name="Tess", exact=True)).to_have_accessible_description(
        "1 item in your inbox"
    )
    approver.locator("#user-tools").get_by_role("link", name="Inbox", exact=True).click()
    row = approver.locator("#tess-inbox-page-items, #content").locator("tr.tess-inbox-item")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(f"Approve session.terminate on session {demo_session.pk}")
    expect(row).to_contain_text(f"requested by {cast.owner.username}")
    row.get_by_role("button", name="Open approval page").click()
    expect(approver.locator("[data-field=action]")).to_have_text("session.terminate")
    approver.get_by_role("button", name="Approve").click()

    expect(operator.locator("#tess-session-state .tess-status-badge")).to_have_text("Ended (terminated)")
    expect(operator.locator(".tess-card-approval")).to_have_attribute("data-status", "executed")
    # Decided: it left both inboxes, live.
    expect(operator.locator("#tess-inbox-count")).to_be_hidden()
    expect(operator.locator("#tess-inbox-empty")).to_be_visible()
    approver.goto("/inbox/")
    expect(approver.locator(".tess-inbox-summary")).to_have_text("Nothing is waiting on you.")


def test_the_count_follows_live_and_the_drawer_opens_a_fresh_approval_page(cast, demo_session, open_browser):
    approver = open_browser()
    log_in(approver, cast.approver)
    approver.get_by_role("button", name="Tess", exact=True).click()
    expect(approver.locator("#tess-inbox-empty")).to_be_visible()
    expect(approver.locator("#tess-inbox-count")).to_be_hidden()

    operator = open_browser()
    log_in(operator, cast.owner)
    ask_to_terminate(operator)

    expect(approver.locator("#tess-inbox-count")).to_have_text("1")  # pushed over /ws/me/, no reload
    item = approver.locator("#tess-inbox [data-kind=approval_to_decide]")
    expect(item).to_contain_text("Approve session.terminate")
    item.get_by_role("button", name="Open approval page").click()
    expect(approver.locator("[data-field=action]")).to_have_text("session.terminate")
    approver.get_by_role("button", name="Approve").click()
    expect(operator.locator("#tess-session-state .tess-status-badge")).to_have_text("Ended (terminated)")


def test_resend_reaches_the_approvers_drawer_with_a_fresh_link_and_the_old_one_is_dead(
    cast, demo_session, open_browser
):
    approver = open_browser()
    log_in(approver, cast.approver)
    approver.get_by_role("button", name="Tess", exact=True).click()
    operator = open_browser()
    log_in(operator, cast.owner)
    ask_to_terminate(operator)

    private = approver.locator(".tess-card-approval-link").get_by_role("link", name="Open the approval page")
    expect(private).to_have_attribute("href", re.compile(r"/approvals/[A-Za-z0-9_-]{20,}/$"))
    first = private.get_attribute("href")

    operator.locator("#tess-inbox [data-kind=approval_requested]").get_by_role(
        "button", name="Resend to approvers"
    ).click()
    expect(operator.locator("#tess-conversation")).to_contain_text("Sent a fresh link to 1 approver.")
    expect(private).not_to_have_attribute("href", first)  # pushed to the approver's own drawer
    expect(approver.locator("#tess-inbox-count")).to_have_text("1")

    private.click()  # the fresh link opens the page
    expect(approver.locator("[data-field=action]")).to_have_text("session.terminate")
    stale = approver.goto(first)  # the link first delivered stopped working at the resend
    assert stale is not None and stale.status == 404
