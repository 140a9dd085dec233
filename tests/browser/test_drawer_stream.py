"""The drawer's live output in a real browser: output of the tmux session, reconnects, the new-output marker."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

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

    marker = f"marker-{uuid.uuid4().hex[:8]}"
    demo_tmux.tmux("send-keys", "-t", demo_session.runtime_id, marker)
    # The promise: printed output is on screen within two seconds.
    expect(output).to_contain_text(marker, timeout=2000)

    route, server = routes[-1]
    before = int(output.get_attribute("data-last-seq") or "0")
    assert before > 0
    server.close()
    route.close(code=4000, reason="killed by the test")
    expect(connection).to_have_text(re.compile("Reconnecting…|Connecting…"))
    expect(connection).to_have_text("Live")
    assert urls[-1].endswith(f"cursor={before}") or int(urls[-1].rsplit("=", 1)[1]) >= before
    assert len(urls) == 2

    seen = ticks(output.inner_text())
    expect(output).to_contain_text(f"tick {seen[-1] + 5}")
    seen = ticks(output.inner_text())
    assert seen == list(range(1, len(seen) + 1)), "every tick once, in order, across the reconnect"


def test_scrolling_up_shows_a_new_output_marker_that_returns_to_the_end(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    output = page.get_by_label("Live output of the selected session")
    expect(page.locator("#tess-connection")).to_have_text("Live")
    expect(output).to_contain_text("tick 30", timeout=15000)  # more lines than the panel shows
    output.evaluate("node => { node.scrollTop = 0; }")
    marker = page.get_by_role("button", name="New output ↓")
    expect(marker).to_be_visible()
    marker.click()
    expect(marker).to_be_hidden()
    assert output.evaluate("node => node.scrollHeight - node.scrollTop - node.clientHeight") < 40
