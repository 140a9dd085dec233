"""The drawer shows "Tess is thinking" until the model's first word, then the reply growing while the model
writes it (``turn.delta`` frames), then the whole reply once it is written; its Stop button ends a reply
mid-stream, which then reads stopped, after a reload too. Against the local chat-completions stand-in, silent
for a moment and then streaming a word every 200 ms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from sessions_app.models import SessionEvent
from tests.browser.conftest import log_in
from tests.providers_app.chat_standin import ChatStandIn

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

STANDIN = ChatStandIn(drip_seconds=0.2, think_seconds=2.0)  # bound now, so the server's environment can name it
SERVER_ENV = {
    "TESS_MODEL_ADAPTER": "openai_compatible",
    "TESS_MODEL": "drip",
    "TESS_MODEL_BASE_URL": STANDIN.base_url,
    "TESS_MODEL_API_KEY": "not-a-real-key",
    "TESS_MODEL_TIMEOUT_SECONDS": "20",
}
TEXT = "how is the fleet doing this morning"
REPLY = f"stand-in answer to: {TEXT}"


@pytest.fixture(scope="module", autouse=True)
def standin() -> Iterator[ChatStandIn]:
    STANDIN.start()
    try:
        yield STANDIN
    finally:
        STANDIN.stop()


def test_the_reply_grows_in_the_drawer_then_stands_whole(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    box = page.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    expect(box).to_be_enabled()
    box.fill(TEXT)
    box.press("Enter")
    growing = page.locator(".tess-growing")
    expect(growing).to_contain_text("stand-in answer", timeout=15_000)
    partial = growing.inner_text()
    assert "stand-in answer" in partial and "morning" not in partial  # part of the reply, before the rest
    expect(growing).to_have_count(0)  # the written reply replaced it
    expect(page.locator(".tess-out").last).to_contain_text(REPLY)
    expect(page.locator(".tess-out").filter(has_text=REPLY)).to_have_count(1)


LONG = (
    "tell me everything about the fleet, each session and each agent, one after the other, what they did"
    " since yesterday and what they wait for now, slowly"
)


def test_thinking_then_the_text_growing_then_stop_mid_stream(cast, demo_session, open_browser):
    STANDIN.closed_event.clear()
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    box = page.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    expect(box).to_be_enabled()
    stop = page.get_by_role("button", name="Stop", exact=True)
    expect(stop).to_be_hidden()
    box.fill(LONG)
    box.press("Enter")
    growing = page.locator(".tess-growing")
    # Before the model's first word: Tess is thinking, and the reply can already be stopped.
    expect(growing.locator(".tess-thinking")).to_have_text("Tess is thinking…")
    expect(growing).not_to_contain_text("stand-in answer")
    expect(stop).to_be_visible()
    expect(box).to_be_disabled()
    # Then the text grows, and the thinking line gives way to it.
    expect(growing).to_contain_text("stand-in answer to: tell", timeout=15_000)
    expect(growing.locator(".tess-thinking")).to_have_count(0)
    expect(growing).to_contain_text("fleet,", timeout=15_000)
    shown = growing.inner_text()
    assert "slowly" not in shown  # mid-stream
    stop.click()
    stopped = page.locator(".tess-out.tess-stopped")
    expect(stopped).to_have_count(1, timeout=15_000)
    expect(stopped).to_contain_text("Stopped: the reply ends here.")
    expect(growing).to_have_count(0)
    expect(stop).to_be_hidden()
    expect(box).to_be_enabled()  # the input is free again
    assert STANDIN.closed_event.wait(10)  # the model's connection was closed
    out = SessionEvent.objects.get(session=demo_session, kind="turn.out", body__stopped=True).body
    assert out["text"].startswith("stand-in answer to: tell") and "slowly" not in out["text"]
    assert out["text"].strip() in stopped.inner_text()
    # After a reload the turn still reads stopped, with the text that was shown.
    page.reload()
    page.get_by_role("button", name="Tess", exact=True).click()
    again = page.locator(".tess-out.tess-stopped")
    expect(again).to_have_count(1)
    expect(again).to_contain_text(out["text"].strip())
    expect(again).to_contain_text("Stopped: the reply ends here.")
