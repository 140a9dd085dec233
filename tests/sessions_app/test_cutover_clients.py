"""Cutover moves the drawer and the CLI too: each binds to the session it uses (the drawer through its stream
socket, the CLI through ``POST …/bind/``), the cutover moves those bindings, and both follow the move.

Through the real ASGI application served by daphne in a child process (sharing the test database and Redis),
so every test commits.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from providers_app.registry import reset_instances
from sessions_app.models import IngressBinding, Session
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[str]:
    port = free_port()
    child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(TESS_STREAM_HEARTBEAT_SECONDS="2", TESS_STREAM_RECHECK_SECONDS="1"),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30) or not child.alive():
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    yield f"127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def instances(settings: Any, tmp_path: Any) -> Iterator[None]:
    """Two instances acme may use; cutover never calls a runtime."""
    settings.TESS_RUNTIME_PROVIDERS = {
        "alpha": {"kind": "tmux", "socket": str(tmp_path / "a.sock")},
        "beta": {"kind": "tmux", "socket": str(tmp_path / "b.sock")},
    }
    reset_instances()
    yield
    reset_instances()


def two_sessions(cast: Any) -> tuple[Session, Session]:
    def make(instance: str, runtime_id: str) -> Session:
        return Session.objects.create(
            tenant=cast.acme, owner=cast.owner, title=instance, provider_instance=instance, runtime_id=runtime_id
        )

    return make("alpha", "$1"), make("beta", "$7")


def cut_over(api: Any, source: Session, target: Session) -> Any:
    return api.post(
        f"/api/v1/sessions/{source.pk}/cutover/",
        {"target": str(target.pk)},
        format="json",
        HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
    )


def bind(api: Any, session: Session) -> Any:
    return api.post(f"/api/v1/sessions/{session.pk}/bind/", {}, format="json")


def logged_in(user: Any) -> str:
    """A browser session of ``user``: its session cookie."""
    browser = Client()
    browser.force_login(user)
    return browser.cookies[settings.SESSION_COOKIE_NAME].value


def stream_socket(server: str, session: Session, headers: dict[str, str], origin: Origin | None) -> ClientConnection:
    return connect(
        f"ws://{server}/ws/sessions/{session.pk}/stream/?cursor=0",
        open_timeout=10,
        close_timeout=5,
        proxy=None,
        origin=origin,
        additional_headers=headers,
    )


def browser_socket(server: str, cookie: str, session: Session) -> ClientConnection:
    cookies = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
    return stream_socket(server, session, cookies, Origin(f"http://{server}"))


def next_frame(ws: ClientConnection, kind: str) -> dict[str, Any]:
    """The next frame of ``kind``, skipping others (heartbeats, events); fails after many without one."""
    for _ in range(200):
        frame = json.loads(ws.recv(timeout=30))
        if frame["kind"] == kind:
            return frame
    pytest.fail(f"no {kind} frame came")


def bound_to(session: Session, channel: str) -> bool:
    return IngressBinding.objects.filter(session=session, channel=channel, active=True).exists()


def test_cutover_moves_a_drawer_only_session_and_tells_the_drawer_at_once(server, cast, api_as):
    source, target = two_sessions(cast)
    with browser_socket(server, logged_in(cast.owner), source) as ws:
        assert wait_for(lambda: bound_to(source, "web"), "the drawer's socket binds its browser session")

        moved = cut_over(api_as(cast.owner), source, target)

        assert moved.status_code == 201, moved.content
        frame = next_frame(ws, "binding.moved")
    assert frame["seq"] is None
    assert frame["body"]["from"] == str(source.pk) and frame["body"]["to"] == str(target.pk)
    assert frame["body"]["migration"] == moved.json()["id"]
    shown = Session.objects.get(pk=target.pk).events.get(seq=frame["body"]["cursor"] + 1)
    assert shown.body["code"] == "session.cutover"  # reading on from the cursor shows the move first
    assert bound_to(target, "web") and not bound_to(source, "web")


def test_a_drawer_reopening_the_old_session_is_pointed_at_the_new_one(server, cast, api_as):
    source, target = two_sessions(cast)
    cookie = logged_in(cast.owner)
    with browser_socket(server, cookie, source):
        assert wait_for(lambda: bound_to(source, "web"), "the drawer's socket binds its browser session")
    assert cut_over(api_as(cast.owner), source, target).status_code == 201

    # A socket of the same browser opened later (the page reloaded, or it reconnected) is told where its
    # binding went.
    with browser_socket(server, cookie, source) as ws:
        assert next_frame(ws, "binding.moved")["body"]["to"] == str(target.pk)
    assert bound_to(target, "web") and not bound_to(source, "web")  # reconnecting did not pull it back


def test_cutover_moves_a_cli_only_session_and_the_cli_follows_on_its_next_command(cast, api_as):
    source, target = two_sessions(cast)
    cli = api_as(cast.owner)
    first = bind(cli, source)
    assert first.status_code == 200 and first.json()["session_id"] == str(source.pk)
    assert first.json()["followed"] is None

    moved = cut_over(api_as(cast.owner), source, target)
    assert moved.status_code == 201, moved.content
    again = bind(cli, source)

    assert again.status_code == 200
    assert again.json()["session_id"] == str(target.pk)
    assert again.json()["followed"] == {"from": str(source.pk), "migration": moved.json()["id"]}
    assert bound_to(target, "cli") and not bound_to(source, "cli")
    other_profile = bind(api_as(cast.owner), source)  # another token: another profile, never moved
    assert other_profile.json()["session_id"] == str(source.pk)


def test_rollback_brings_the_cli_back(cast, api_as):
    source, target = two_sessions(cast)
    cli = api_as(cast.owner)
    bind(cli, source)
    assert cut_over(api_as(cast.owner), source, target).status_code == 201
    back = api_as(cast.owner).post(
        f"/api/v1/sessions/{source.pk}/rollback/", {}, format="json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex
    )
    assert back.status_code == 200, back.content

    again = bind(cli, source)

    assert again.json()["session_id"] == str(source.pk) and again.json()["followed"] is None


def test_a_lapsed_client_binding_stays_behind(cast, api_as):
    source, target = two_sessions(cast)
    bind(api_as(cast.owner), source)
    IngressBinding.objects.filter(session=source).update(expires_at=timezone.now() - timedelta(seconds=1))

    refused = cut_over(api_as(cast.owner), source, target)

    assert refused.status_code == 409 and refused.json()["error"]["code"] == "cutover_nothing_to_move"


def test_nobody_binds_to_a_session_they_cannot_read(cast, api_as):
    source, _ = two_sessions(cast)
    for user, tenant in ((cast.outsider, cast.globex), (cast.teammate, cast.acme)):
        assert bind(api_as(user, tenant), source).status_code == 404
    assert not IngressBinding.objects.exists()


def token_socket(server: str, token: str, session: Session) -> ClientConnection:
    return stream_socket(server, session, {"Authorization": f"Bearer {token}"}, None)


def test_a_cli_profile_watching_many_sessions_moves_nothing_and_every_socket_stays_open(
    server, cast, api_as, token_for
):
    """A fleet watcher (one token, ten sockets on each of two sessions) streams them all; only the profile's
    commands bind it, so its binding stays on the session it used, and no socket is closed for binding."""
    used, watched = two_sessions(cast)
    token = token_for(cast.owner)
    profile = APIClient()
    profile.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert bind(profile, used).status_code == 200  # the profile's command used this session
    sockets = [token_socket(server, token, s) for s in (used, watched) for _ in range(10)]
    try:
        for ws in sockets:
            assert next_frame(ws, "heartbeat")  # open and served, not closed with 1011
    finally:
        for ws in sockets:
            ws.close()
    assert bound_to(used, "cli") and not bound_to(watched, "cli")
    assert IngressBinding.objects.filter(channel="cli", active=True).count() == 1


def test_a_cli_socket_opened_after_the_cutover_of_its_profile_is_told_where_it_went(server, cast, api_as, token_for):
    """``tess stream`` binds over HTTP, then opens its socket: a cutover in between still reaches the socket."""
    source, target = two_sessions(cast)
    token = token_for(cast.owner)
    profile = APIClient()
    profile.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert bind(profile, source).status_code == 200
    moved = cut_over(api_as(cast.owner), source, target)
    assert moved.status_code == 201, moved.content

    with token_socket(server, token, source) as ws:
        frame = next_frame(ws, "binding.moved")
    assert frame["body"]["from"] == str(source.pk) and frame["body"]["to"] == str(target.pk)
    assert frame["body"]["migration"] == moved.json()["id"]
    assert bound_to(target, "cli") and not bound_to(source, "cli")  # watching moved nothing back
