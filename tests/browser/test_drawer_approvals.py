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
    expect(approval.locator(".tess-card-status")).to_have_text("Status: pending")
    expect(operator.locator(".tess-out").last).to_contain_text("needs an approver's decision")

    approver.get_by_role("button", name="Tess", exact=True).click()
    approver.get_by_role("link", name="Open the approval page").click()
    expect(approver.locator("[data-field=action]")).to_have_text("session.terminate")
    expect(approver.locator("[data-field=requester]")).to_have_text(cast.owner.username)
    approver.get_by_role("button", name="Approve").click()

    expect(approval.locator(".tess-card-status")).to_have_text("Status: executed")
    expect(operator.locator("#tess-session-state")).to_have_text("Session ended (terminated)")
    expect(box).to_be_disabled()
    expect(operator.get_by_label("Session", exact=True).locator("option:checked")).to_contain_text("— terminated (")
    # The ending is said once, however many sources report it (the stream, the refresh after the approval).
    expect(operator.locator("#tess-conversation").get_by_text("Session ended (terminated).")).to_have_count(1)
    # Opening the drawer again replays the history: still one line, and the box stays disabled.
    operator.reload()
    expect(operator.locator("#tess-session-state")).to_have_text("Session ended (terminated)")
    expect(operator.locator("#tess-conversation").get_by_text("Session ended (terminated).")).to_have_count(1)
