"""The drawer's live output in a real browser: output of the tmux session in its terminal, reconnects, the
new-output marker."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, terminal_lines, wait_for_terminal_text

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def ticks(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"tick (\d+)", text)]


def test_output_printed_in_tmux_appears_and_resumes_without_gaps_after_the_socket_dies(
    cast, demo_session, demo_tmux, open_browser
):
    page = open_browser()
    routes: list = []
    urls: list[str] = []

    def through(route) -> None:
        urls.append(route.url)
        routes.append((route, route.connect_to_server()))

    page.route_web_socket(re.compile(r"/ws/sessions/"), through)
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    connection = page.locator("#tess-connection")
    output = page.get_by_label("Live output of the selected session")
    expect(connection).to_have_text("Live")
    expect(page.locator("#tess-output[data-ready]")).to_have_count(1)
    opened = ticks("\n".join(terminal_lines(page, scrollback=True)))

    marker = f"marker-{uuid.uuid4().hex[:8]}"
    demo_tmux.tmux("send-keys", "-t", demo_session.runtime_id, marker)
    # The promise: printed output is on screen within two seconds.
    expect(output).to_contain_text(marker, timeout=2000)
    wait_for_terminal_text(page, marker, scrollback=True)

    route, server = routes[-1]
    before = int(output.get_attribute("data-last-seq") or "0")
    assert before > 0
    server.close()
    route.close(code=4000, reason="killed by the test")
    expect(connection).to_have_text(re.compile("Reconnecting…|Connecting…"))
    expect(connection).to_have_text("Live")
    assert urls[-1].endswith(f"cursor={before}") or int(urls[-1].rsplit("=", 1)[1]) >= before
    assert len(urls) == 2

    seen = ticks("\n".join(terminal_lines(page, scrollback=True)))
    wait_for_terminal_text(page, f"tick {seen[-1] + 5}")
    seen = [tick for tick in ticks("\n".join(terminal_lines(page, scrollback=True))) if tick > max(opened, default=0)]
    # After the screen it opened on, every tick the pane printed, once, in order, across the reconnect.
    assert seen == list(range(seen[0], seen[0] + len(seen))), "every tick once, in order, across the reconnect"
    assert seen[0] == max(opened, default=0) + 1


def test_scrolling_up_shows_a_new_output_marker_that_returns_to_the_end(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    expect(page.locator("#tess-connection")).to_have_text("Live")
    wait_for_terminal_text(page, "tick 30", timeout=15000, scrollback=True)  # more lines than the screen has
    page.evaluate("() => window.Tess.terminal.scrollToTop()")
    marker = page.get_by_role("button", name="New output ↓")
    expect(marker).to_be_visible()
    marker.click()
    expect(marker).to_be_hidden()
    at_end = "() => { const b = window.Tess.terminal.buffer.active; return b.viewportY === b.baseY; }"
    assert page.evaluate(at_end)
