"""When the model fails after memory was read, the drawer says so in a system line (seed 002)."""

from __future__ import annotations

import socket

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, off_the_browser_loop

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# A chat-completions endpoint where nothing listens: every model call fails to connect. The port stays bound
# (never listened on) for the whole run, so a connect is refused at once and no other test's server can take it.
_CLOSED = socket.socket()
_CLOSED.bind(("127.0.0.1", 0))
SERVER_ENV = {
    "TESS_MODEL_ADAPTER": "openai_compatible",
    "TESS_MODEL": "unreachable-model",
    "TESS_MODEL_BASE_URL": f"http://127.0.0.1:{_CLOSED.getsockname()[1]}/v1",
    "TESS_MODEL_API_KEY": "not-a-real-key",
    "TESS_MODEL_TIMEOUT_SECONDS": "2",
}


def test_a_failed_model_turn_names_the_read_notes_and_claims_no_recall(cast, demo_session, open_browser):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose
    from tests.conftest import scope_of

    def write_note() -> None:
        scope = scope_of(cast.owner, cast.acme)
        data = {"op": "remember", "category": "standing_initiative", "value": "Phase 5"}
        card_confirm(scope=scope, card_id=memory_propose(scope, data=data).pk)

    off_the_browser_loop(write_note)
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    box = page.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    expect(box).to_be_enabled()
    box.fill("tell me a joke")
    box.press("Enter")
    system = page.locator(".tess-system").filter(has_text="The model failed")
    expect(system).to_contain_text(
        "1 operator note was read for this turn and did not ground this deterministic fallback answer.",
        timeout=30_000,  # the server's first model turn imports the model client (seconds on a loaded machine)
    )
    reply = page.locator(".tess-out").last
    expect(reply).not_to_be_empty()
    expect(reply.locator(".tess-recalled")).to_have_count(0)  # nothing recalled is claimed for this reply
