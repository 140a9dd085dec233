"""The drawer shows the server's current state and reads like a conversation, not a dump of internals.

Each test drives the real drawer in Chromium against daphne: cards and approvals read from the API on every
load and session switch, the stream opened at its tail, refusals said once, words instead of ids and
timestamps, and model replies as safe Markdown.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from sessions_app import journal, services, stream
from tests.browser.conftest import log_in, off_the_browser_loop, terminal_lines, wait_for_terminal_text
from tests.conftest import scope_of

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BOX_LABEL = "Message Tess (Enter sends, Shift+Enter adds a line)"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def open_drawer(page, *, session_id: str | None = None):
    if session_id:
        page.evaluate("id => localStorage.setItem('tess.drawer.session', id)", session_id)
        page.reload()
    page.get_by_role("button", name="Tess", exact=True).click()
    drawer = page.get_by_role("complementary", name="Tess")
    expect(drawer).to_be_visible()
    return drawer


def say(page, text: str, *, refused: bool = False) -> None:
    box = page.get_by_label(BOX_LABEL)
    expect(box).to_be_enabled()
    box.fill(text)
    box.press("Enter")
    # A sent turn empties the box; a refused one keeps the text to edit and send again.
    expect(box).to_have_value(text if refused else "")


def test_cards_come_from_the_server_after_navigation_erasure_and_session_switches(cast, demo_session, open_browser):
    from memory_app.services import memory_forget

    other = off_the_browser_loop(
        lambda: services.session_start(scope=scope_of(cast.owner, cast.acme), instance="demo", title="other")
    )
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page, session_id=str(demo_session.pk))
    expect(page.locator("#tess-connection")).to_have_text("Live")
    pending = drawer.locator("#tess-cards")
    decided = drawer.locator("#tess-card-history-list")

    say(page, "remember that I lead with sev0")
    confirmed = pending.locator(".tess-card-memory")
    expect(confirmed.locator(".tess-card-title")).to_have_text("Remember a preference: “I lead with sev0”")
    confirmed.get_by_role("button", name="Confirm").click()
    expect(decided.locator(".tess-card-memory .tess-card-status")).to_have_text("Remembered.")

    say(page, "terminate this session")
    approval = pending.locator(".tess-card-approval")
    expect(approval.locator(".tess-card-title")).to_have_text("Terminate the session “demo”")

    say(page, "remember that I prefer short replies")
    expect(pending.locator(".tess-card-memory")).to_have_count(1)
    # Erased on the memory page (or anywhere else): the waiting card is dismissed with the notes.
    off_the_browser_loop(
        lambda: memory_forget(scope_of(cast.owner, cast.acme), category=None, slot=None, forget_all=True)
    )

    page.goto("/admin/password_change/")
    expect(drawer).to_be_visible()
    expect(decided.locator(".tess-card-approval")).to_have_count(0)
    expect(pending.locator(".tess-card-approval .tess-card-title")).to_have_text("Terminate the session “demo”")
    expect(pending.locator(".tess-card-approval")).to_have_attribute("data-status", "pending")
    # Nothing decided or erased is actionable again: both memory cards sit in the history with their outcome.
    expect(decided.locator(".tess-card-memory")).to_have_count(2)
    expect(pending.locator(".tess-card-memory")).to_have_count(0)
    expect(drawer.get_by_role("button", name="Confirm")).to_have_count(0)
    drawer.locator("#tess-card-history > summary").click()
    expect(decided.locator(".tess-card-memory .tess-card-status")).to_have_text(
        ["Dismissed: nothing was changed.", "Remembered."]
    )

    picker = page.get_by_label("Session", exact=True)
    picker.select_option(str(other.pk))
    expect(page.locator("#tess-session-state .tess-status-badge")).to_have_text("running")
    expect(drawer.locator(".tess-card")).to_have_count(0)  # none of the previous session's cards
    expect(drawer.locator("#tess-cards-empty")).to_be_visible()
    picker.select_option(str(demo_session.pk))
    expect(pending.locator(".tess-card-approval .tess-card-title")).to_have_text("Terminate the session “demo”")


def test_the_stream_opens_at_its_tail_pages_back_and_an_ended_session_reads_ended_at_once(
    cast, demo_session, open_browser
):
    def write_history():
        session = services.session_start(scope=scope_of(cast.owner, cast.acme), instance="demo", title="history")
        services.session_mark_exited(session_id=session.pk)
        items = [
            (stream.EventKind.OUTPUT, stream.output_body(data=f"line {n}\r\n", source="", cursor="", next_cursor=""))
            for n in range(1, 601)
        ]
        journal.events_append(session_id=session.pk, items=items)
        session.refresh_from_db()
        return session

    history = off_the_browser_loop(write_history)

    page = open_browser()
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url) if "/ws/sessions/" in ws.url else None)
    log_in(page, cast.owner)
    open_drawer(page, session_id=str(history.pk))
    expect(page.locator("#tess-session-state .tess-status-badge")).to_have_text("Ended (exited)")
    expect(page.locator("#tess-session-state")).to_contain_text("Agent: ended")
    expect(page.get_by_label("Session", exact=True).locator("option:checked")).to_have_text("history — exited")
    wait_for_terminal_text(page, "line 600", timeout=30_000)  # the terminal's buffer: what xterm.js draws
    assert "line 1" not in terminal_lines(page, scrollback=True)  # the tail, not the whole history
    expect(page.get_by_role("button", name="New output ↓")).to_be_hidden()
    # At the end of what it holds (xterm.js scrolls once it has drawn the writes it was given).
    page.wait_for_function("() => { const b = window.Tess.terminal.buffer.active; return b.viewportY === b.baseY; }")
    wait = [url for url in sockets if str(history.pk) in url]
    assert wait and wait[-1].endswith(f"cursor={history.last_seq}"), sockets  # resumes after the tail

    earlier = page.get_by_role("button", name="Load earlier")
    expect(earlier).to_be_visible()
    while earlier.is_visible():
        earlier.click()
        page.wait_for_function("() => !document.getElementById('tess-load-earlier').disabled")
    text = "\n".join(terminal_lines(page, scrollback=True))
    lines = [int(n) for n in re.findall(r"line (\d+)", text)]
    assert lines == list(range(1, 601)), "every line once, in order, after paging back"


def test_a_refusal_is_said_once_failed_text_stays_and_a_repeated_remember_points_at_its_card(
    cast, demo_session, open_browser
):
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    box = page.get_by_label(BOX_LABEL)

    say(page, "deploy to production", refused=True)
    reply = drawer.locator(".tess-out").last
    expect(reply).to_contain_text("Nothing was done")
    refusal = reply.locator(".tess-text").inner_text().split("Nothing was done: ", 1)[1].strip()
    expect(drawer.locator(".tess-line").filter(has_text=refusal)).to_have_count(1)

    note = "The on-call rota " + "is kept in the team wiki and reviewed every Monday; " * 5
    page.route(
        "**/api/v1/sessions/*/turns/",
        lambda route: route.fulfill(
            status=503,
            content_type="application/json",
            body='{"error": {"code": "unavailable", "message": "Tess is busy; try again.", "details": {}}}',
        ),
    )
    box.fill(note)
    box.press("Enter")
    expect(drawer.locator(".tess-system").last).to_contain_text("Not sent: Tess is busy; try again.")
    expect(box).to_have_value(note)  # nothing to retype
    page.unroute("**/api/v1/sessions/*/turns/")

    say(page, "remember that I lead with sev2")
    say(page, "remember that I lead with sev2")
    expect(drawer.locator(".tess-out").last).to_contain_text("already waiting")
    expect(drawer.locator("#tess-cards .tess-card-memory")).to_have_count(1)


def test_the_conversation_shows_words_short_ids_and_local_times(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    expect(drawer.get_by_role("link", name="Manage memory")).to_have_attribute("href", "/memory/")
    expect(drawer.locator("#tess-session-state .tess-agent-state")).to_have_text(
        re.compile(r"^Agent: (working|waiting for input|idle|error|ended|unknown)$")
    )

    say(page, "what's the status?")
    status_reply = drawer.locator(".tess-out").last
    expect(status_reply).to_contain_text("running")
    assert "stream at event" not in status_reply.inner_text()

    say(page, "terminate this session")
    reply = drawer.locator(".tess-out").last
    expect(reply).to_contain_text("needs an approver's decision")
    text = reply.locator(".tess-text").inner_text()
    assert not UUID.search(text) and not ISO.search(text), text
    short = reply.locator("button.tess-id")
    expect(short).to_have_text(re.compile(r"^[0-9a-f]{8}$"))
    assert UUID.fullmatch(short.get_attribute("data-id") or "")
    expires = reply.locator(".tess-text time")
    expect(expires).to_have_text(re.compile(r"^\d{2}:\d{2}$"))
    assert expires.get_attribute("title")

    said = drawer.locator(".tess-in").last
    expect(said.locator(".tess-who")).to_have_text("You")
    expect(reply.locator(".tess-who")).to_have_text("Tess")
    expect(said.locator(".tess-meta time")).to_have_text(re.compile(r"^\d{2}:\d{2}$"))
    say(page, "remember that I lead with sev3")
    title = drawer.locator(".tess-card-memory .tess-card-title")
    expect(title).to_have_text("Remember a preference: “I lead with sev3”")  # no slot id


def test_a_model_reply_is_safe_markdown(cast, demo_session, open_browser):
    reply = (
        "**Bold** and `code` and *soft*\n\n- one\n- two\n\n"
        "[docs](https://example.com/docs) and [bad](javascript:alert(1))\n\n"
        '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    )
    body = stream.turn_out_body(turn_id="t-md", text=reply, recalled_count=0)
    off_the_browser_loop(
        lambda: journal.event_append(session_id=demo_session.pk, kind=stream.EventKind.TURN_OUT, body=body)
    )
    page = open_browser()
    log_in(page, cast.owner)
    drawer = open_drawer(page)
    out = drawer.locator(".tess-out").filter(has_text="Bold")
    expect(out.locator("strong")).to_have_text("Bold")
    expect(out.locator("code")).to_have_text("code")
    expect(out.locator("em")).to_have_text("soft")
    expect(out.locator("ul li")).to_have_text(["one", "two"])
    expect(out.locator("a")).to_have_count(1)
    expect(out.locator("a")).to_have_attribute("href", "https://example.com/docs")
    expect(out).to_contain_text("[bad](javascript:alert(1))")
    expect(out).to_contain_text('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>')
    expect(out.locator("img")).to_have_count(0)
    expect(out.locator("script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
