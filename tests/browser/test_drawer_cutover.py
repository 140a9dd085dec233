"""The drawer follows a cutover live: its browser session is bound to the session it shows, a cutover moves that
binding, and the drawer switches to the new session with a notice, without a reload."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from providers_app.registry import reset_instances
from sessions_app import cutover
from sessions_app.models import IngressBinding, Session
from tests.browser.conftest import log_in, off_the_browser_loop, provider_config
from tests.conftest import scope_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def target(cast: Any, demo_session: Session, demo_tmux: Any, settings: Any) -> Iterator[Session]:
    """A running session on a second provider instance (cutover moves bindings only between instances)."""
    settings.TESS_RUNTIME_PROVIDERS = provider_config(demo_tmux) | {"demo-b": demo_tmux.config()}
    reset_instances()
    yield Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="successor", provider_instance="demo-b", runtime_id="$999"
    )
    reset_instances()


def test_the_drawer_switches_to_the_session_a_cutover_moved_it_to(cast, demo_session, target, open_browser):
    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("button", name="Tess", exact=True).click()
    page.evaluate("id => window.Tess.selectSession(id)", str(demo_session.pk))
    expect(page.locator("#tess-connection")).to_have_text("Live")
    wait_for(
        lambda: IngressBinding.objects.filter(session=demo_session, channel="web", active=True).exists(),
        "the drawer's browser session bound to the session it shows",
    )

    migration = off_the_browser_loop(
        lambda: (
            cutover.session_cutover(
                scope=scope_of(cast.owner, cast.acme), session_id=demo_session.pk, target_id=target.pk
            ).pk
        )
    )

    picker = page.locator("#tess-session")
    expect(picker).to_have_value(str(target.pk), timeout=30_000)
    notice = page.locator("[data-moved] .tess-text")
    expect(notice).to_have_text(f"Moved here from demo by a cutover (migration {migration}).", timeout=30_000)
    expect(page.locator("#tess-connection")).to_have_text("Live")
    expect(page.locator(".tess-line.tess-system").filter(has_text="Cut over from session")).to_have_count(1)
    assert IngressBinding.objects.filter(session=target, channel="web", active=True).count() == 1
