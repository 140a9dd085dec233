"""The auditor's admin pages in a real browser: they load under the Content-Security-Policy, read-only."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_auditor_browses_sessions_and_their_events_read_only(cast, demo_session, open_browser):
    page = open_browser()
    log_in(page, cast.auditor)
    page.goto("/admin/sessions_app/session/")
    expect(page.locator("#result_list")).to_contain_text("demo")
    expect(page.get_by_role("link", name="Acme")).to_be_visible()  # the tenant filter names only acme
    expect(page.get_by_role("link", name="Add session")).to_have_count(0)
    page.goto("/admin/sessions_app/sessionevent/?kind=output")
    expect(page.locator("#result_list")).to_contain_text("output")
    page.locator("#result_list tbody tr th a").first.click()
    expect(page.locator("body")).not_to_contain_text("Save")
    expect(page.locator(".field-body")).to_contain_text("tick")


def test_the_api_docs_render_under_the_policy(cast, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Tess API")


def test_the_server_rendered_memory_page_loads_under_the_policy_with_the_drawer(cast, open_browser):
    page = open_browser()
    log_in(page, cast.owner, path="/memory/")
    expect(page.locator("#content")).to_contain_text("Memory")
    expect(page.get_by_role("button", name="Tess", exact=True)).to_be_visible()
