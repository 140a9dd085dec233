"""The fleet board in a real browser: the sessions one may see with their agents' states, live; a click opens
one in the drawer; the Tess button counts the waiting session. Screenshots at 1280 and 390 px, light and dark."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from guardian.shortcuts import assign_perm
from playwright.sync_api import expect

from approvals_app.models import Card
from providers_app.registry import get_provider, reset_instances
from providers_app.tmux import TmuxProvider
from sessions_app import services
from sessions_app.models import Session
from tests.browser.conftest import ARTIFACTS, log_in, provider_config
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory
from tests.sessions_app.agent_state_helpers import WORK
from tests.tess_site.children import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ASKING = 'cd "$1"\n' + WORK.format(flag="ask") + "printf 'Continue? [y/N] '\nread -r answer\n" + WORK.format(flag="end")


def _asking_agent(cast: Cast, demo_tmux: Any, settings: Any, workdir: Path) -> Session:
    """A tmux agent on the server's own instance that works until ``workdir/ask`` exists, then asks."""
    settings.TESS_RUNTIME_PROVIDERS = provider_config(demo_tmux)
    reset_instances()
    script = workdir / "agent.sh"
    script.write_text(ASKING)
    scope = scope_of(cast.owner, cast.acme)
    provider = get_provider("demo")
    assert isinstance(provider, TmuxProvider)
    runtime = provider.start_command(scope, title="asking", argv=["bash", str(script), str(workdir)])
    return services.session_bind_started(scope=scope, owner=cast.owner, runtime=runtime, title="Refactor billing")


def _row(page: Any, session: Session) -> Any:
    return page.locator(f'tr.tess-board-row[data-id="{session.pk}"]')


def test_the_board_lists_states_and_follows_an_agent_that_starts_waiting(
    cast: Cast, demo_tmux: Any, settings: Any, open_browser: Any, tmp_path: Path
) -> None:
    workdir = tmp_path.resolve()
    agent = _asking_agent(cast, demo_tmux, settings, workdir)
    # On an instance this server does not run, so its pump leaves the row as written.
    docs = SessionFactory.create(
        owner=cast.owner, tenant=cast.acme, title="Nightly docs", provider_instance="pi-main", agent_state="idle"
    )
    Card.objects.create(tenant=cast.acme, owner=cast.owner, kind="memory", session_id=str(docs.pk), correlation_id="c")
    shared = SessionFactory.create(
        owner=cast.teammate, tenant=cast.acme, title="Review PR 42", provider_instance="pi-main", agent_state="working"
    )
    assign_perm("view_session", cast.owner, shared)
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="Old spike", status="exited", agent_state="ended")
    SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="Teammate's secret")
    SessionFactory.create(owner=cast.outsider, tenant=cast.globex, title="Globex work")

    page = open_browser()
    log_in(page, cast.owner)
    page.get_by_role("link", name="Fleet board").first.click()
    expect(page.locator("#tess-board-live")).to_have_text("Live")
    expect(page.locator("tr.tess-board-row")).to_have_count(3)
    expect(page.locator(f'tr[data-id="{docs.pk}"] .tess-board-pending')).to_have_text("1 card")
    expect(page.locator(f'tr[data-id="{shared.pk}"] .tess-board-owner')).to_have_text("teammate")
    expect(page.locator("#tess-board-rows")).not_to_contain_text("Teammate's secret")
    expect(page.locator("#tess-board-rows")).not_to_contain_text("Globex work")
    expect(page.locator("#tess-board-rows")).not_to_contain_text("Old spike")  # ended: hidden unless asked
    expect(_row(page, agent).locator(".tess-state")).to_have_text("working", timeout=30_000)
    expect(_row(page, agent)).to_contain_text("demo")
    expect(_row(page, agent).locator(".tess-board-ago")).to_contain_text("ago")
    expect(page.locator("#tess-inbox-count")).to_have_text("1")  # the card

    (workdir / "ask").touch()  # the agent asks and waits: the row and the Tess button follow, no reload
    expect(_row(page, agent).locator(".tess-state")).to_have_text("waiting", timeout=30_000)
    expect(_row(page, agent).locator(".tess-board-for")).to_contain_text("for ")
    expect(page.locator("#tess-inbox-count")).to_have_text("2")  # the card and the waiting session

    page.get_by_label("Show ended").check()
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#tess-board-rows")).to_contain_text("Old spike")
    page.get_by_label("State").select_option("waiting_for_input")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tr.tess-board-row")).to_have_count(1)

    page.locator(".tess-board-open", has_text="Refactor billing").click()
    expect(page.locator("#tess-drawer")).to_be_visible()
    expect(page.locator("#tess-session")).to_have_value(str(agent.pk))
    expect(page.locator("#tess-output")).to_contain_text("Continue? [y/N]", timeout=30_000)

    # The inbox page lists it too, beside the drawer's own list, and opens it in the drawer.
    page.locator("#tess-session").select_option(str(docs.pk))
    page.goto("/inbox/")
    expect(page.locator("#tess-drawer #tess-inbox [data-kind=session_waiting]")).to_contain_text("Refactor billing")
    page.get_by_role("button", name="Close Tess").click()
    page.locator("#tess-inbox-page").get_by_role("button", name="Open in the drawer").click()
    expect(page.locator("#tess-drawer")).to_be_visible()
    expect(page.locator("#tess-session")).to_have_value(str(agent.pk))

    for width, height in ((1280, 800), (390, 844)):
        for scheme in ("light", "dark"):
            shot = open_browser(width=width, height=height, color_scheme=scheme)
            log_in(shot, cast.owner)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            expect(shot.locator("#tess-index-links")).to_contain_text("Fleet board")
            shot.screenshot(path=str(ARTIFACTS / f"admin-index-{width}-{scheme}.png"))
            shot.locator("#tess-index-links").get_by_role("link", name="Fleet board").click()
            expect(shot.locator("#tess-board-live")).to_have_text("Live")
            expect(_row(shot, agent).locator(".tess-state")).to_have_text("waiting")
            expect(shot.locator("#tess-inbox-count")).to_have_text("2")
            path = ARTIFACTS / f"board-{width}-{scheme}.png"
            shot.screenshot(path=str(path), full_page=width < 1000)
            if (width, scheme) == (1280, "light"):
                shutil.copyfile(path, ROOT / "docs" / "board.png")


def test_a_change_made_before_the_socket_joined_is_on_the_board_once_it_reads_live(
    cast: Cast, open_browser: Any
) -> None:
    """The page is rendered, then its socket joins the board's group: a change committed in between sends it no
    frame. Here the socket is held back while the row changes in the database, from this process, whose channel
    layer the server's sockets never hear, so only the page's own read on hello can show it; and again after the
    server drops the socket and the page reconnects."""
    docs = SessionFactory.create(
        owner=cast.owner, tenant=cast.acme, title="Nightly docs", provider_instance="pi-main", agent_state="idle"
    )
    changes = iter(["waiting_for_input", "working"])
    sockets: list[Any] = []

    def hold_then_join(socket: Any) -> None:
        # Runs as the page opens the socket, before it reaches the server: the row changes meanwhile.
        Session.objects.filter(pk=docs.pk).update(agent_state=next(changes))
        socket.connect_to_server()
        sockets.append(socket)

    page = open_browser()
    log_in(page, cast.owner)
    page.route_web_socket(re.compile(r"/ws/board/$"), hold_then_join)
    page.goto("/board/")
    expect(page.locator("#tess-board-live")).to_have_text("Live")
    expect(_row(page, docs).locator(".tess-state")).to_have_text("waiting")
    expect(page.locator("#tess-board-count")).to_have_text("1")

    sockets[0].close(code=1012, reason="restart")  # the socket drops as in a restart: the page reconnects by itself
    expect(page.locator("#tess-board-live")).to_have_text("Reconnecting…")
    expect(page.locator("#tess-board-live")).to_have_text("Live", timeout=15_000)
    expect(_row(page, docs).locator(".tess-state")).to_have_text("working")
    assert len(sockets) == 2
