"""The drawer's header says what the session has used: its agent's figure, or "unknown" for a runtime that
reports none (a tmux session: never 0), and Tess's own model turns in it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from sessions_app.usage import usage_record
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_header_shows_the_agent_s_usage_as_unknown_and_tess_s_own_turns(cast, demo_session, open_browser):
    step = {"model": "sol", "input": 1200, "output": 300, "cost": "0.0425", "currency": "USD"}
    usage_record(session=demo_session, steps=[{**step, "ref": "turn:t1"}], provider="openai_compatible")
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    usage = page.get_by_label("Session usage")
    expect(usage).to_be_visible()
    expect(usage.locator("[data-part=Agent]")).to_have_text("Agent: unknown")
    expect(usage.locator("[data-part=Tess]")).to_have_text("Tess: 0.04 USD · 1,500 tokens")
