"""The drawer shows a reply growing while the model writes it (``turn.delta`` frames), then the whole reply
once it is written, against the local chat-completions stand-in streaming a word every 300 ms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.providers_app.chat_standin import ChatStandIn

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

STANDIN = ChatStandIn(drip_seconds=0.3)  # bound now, so the server's environment can name it
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
    expect(growing).to_contain_text("stand-in answer")
    partial = growing.inner_text()
    assert "stand-in answer" in partial and "morning" not in partial  # part of the reply, before the rest
    expect(growing).to_have_count(0)  # the written reply replaced it
    expect(page.locator(".tess-out").last).to_contain_text(REPLY)
    expect(page.locator(".tess-out").filter(has_text=REPLY)).to_have_count(1)
