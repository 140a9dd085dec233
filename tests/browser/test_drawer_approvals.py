"""Terminating a session from the drawer: a pending approval, the approver's one-time page, the live ending.

The approval page keeps ``Referrer-Policy: no-referrer``, so Chromium posts its form with ``Origin: null``;
this drives that real browser behaviour end to end.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_approved_termination_ends_the_session_in_the_operators_drawer(cast, demo_session, open_browser):
    approver = open_browser()
    # Listening from the moment the socket opens: its hello may arrive before log_in returns.
    heard: list[object] = []

    def listen(ws):
        if ws.url.endswith("/ws/me/"):
            ws.on("framereceived", lambda payload: heard.append(payload))

    approver.on("websocket", listen)
    log_in(approver, cast.approver)
    # hello: the approver's drawer hears what concerns them
    wait_for(lambda: heard or approver.wait_for_timeout(50), "the approver's hello", timeout=30)

    operator = open_browser()
    log_in(operator, cast.owner)
    operator.get_by_role("button", name="Tess", exact=True).click()
    expect(operator.locator("#tess-connection")).to_have_text("Live")
    box = operator.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    box.fill("terminate this session")
    box.press("Enter")
    approval = operator.locator(".tess-card-approval")
    expect(approval).to_have_attribute("data-status", "pending")
    expect(approval.locator(".tess-card-title")).to_have_text("Terminate the session “demo”")
    expect(approval.locator(".tess-card-status")).to_contain_text("Waiting for an approver until")
    expect(operator.locator(".tess-out").last).to_contain_text("needs an approver's decision")

    approver.get_by_role("button", name="Tess", exact=True).click()
    approver.get_by_role("link", name="Open the approval page").click()
    expect(approver.locator("[data-field=action]")).to_have_text("session.terminate")
    expect(approver.locator("[data-field=requester]")).to_have_text(cast.owner.username)
    approver.get_by_role("button", name="Approve").click()

    expect(approval).to_have_attribute("data-status", "executed")
    expect(approval.locator(".tess-card-status")).to_have_text("Approved and done.")
    expect(operator.locator("#tess-session-state .tess-status-badge")).to_have_text("Ended (terminated)")
    expect(box).to_be_disabled()
    expect(operator.get_by_label("Session", exact=True).locator("option:checked")).to_have_text("demo — terminated")
    # The ending is said once, however many sources report it (the stream, the refresh after the approval).
    ended = operator.locator("#tess-conversation").get_by_text("The session has ended (terminated).")
    expect(ended).to_have_count(1)
    # After a reload the state comes from the server: ended at once, the approval decided (not "pending").
    operator.reload()
    expect(operator.locator("#tess-session-state .tess-status-badge")).to_have_text("Ended (terminated)")
    decided = operator.locator("#tess-card-history-list .tess-card-approval")
    expect(decided).to_have_attribute("data-status", "executed")
    expect(decided.locator(".tess-card-title")).to_have_text("Terminate the session “demo”")
    expect(operator.locator("#tess-cards .tess-card-approval")).to_have_count(0)
