"""Websocket authentication through the real ASGI app, served by daphne in a child process.

The server reads the same test database, so every test commits its data (``transaction=True``).
A refused handshake is an HTTP 403 from the server; a close code reaches the client only after accept.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tess_site.accounts import services as accounts
from tess_site.accounts.models import PersonalToken
from tess_site.consumers import CLOSE_NOT_MEMBER
from tess_site.scope import Role
from tests.conftest import scope_of

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

FOREIGN_ORIGIN = "https://evil.example"


def _open(server: str, path: str = "/ws/me/", **kwargs: Any) -> ClientConnection:
    return connect(f"ws://{server}{path}", open_timeout=10, close_timeout=5, proxy=None, **kwargs)


def _hello(server: str, path: str = "/ws/me/", **kwargs: Any) -> dict[str, Any]:
    with _open(server, path, **kwargs) as ws:
        frame = json.loads(ws.recv(timeout=10))
    assert frame["kind"] == "hello"
    return frame["body"]


def _assert_refused(server: str, path: str = "/ws/me/", **kwargs: Any) -> None:
    with pytest.raises(InvalidStatus) as refused:
        _open(server, path, **kwargs).close()
    assert refused.value.response.status_code == 403


def _bearer(token: str) -> dict[str, Any]:
    return {"additional_headers": {"Authorization": f"Bearer {token}"}}


def _session_cookie(user: Any) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}


def test_a_bearer_token_gets_hello_on_the_cli_channel_in_the_tokens_tenant(server, cast, token_for):
    # The owner belongs to both tenants; the token, not the first membership, picks the tenant.
    accounts.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.APPROVER)
    body = _hello(server, **_bearer(token_for(cast.owner, cast.globex)))
    assert body == {"username": "owner", "tenant_slug": "globex", "roles": ["approver"], "channel": "cli"}


def test_it_refuses_a_token_nobody_issued(server, cast, token_for):
    issued = token_for(cast.owner)
    forged = issued[:-4] + ("AAAA" if not issued.endswith("AAAA") else "BBBB")
    _assert_refused(server, **_bearer(forged))
    _assert_refused(server, **_bearer("not-a-token"))


def test_it_refuses_a_revoked_token(server, cast, token_for):
    plaintext = token_for(cast.owner)
    token = PersonalToken.objects.get(prefix=plaintext.split("_")[1])
    accounts.token_revoke(scope=scope_of(cast.owner, cast.acme), token=token)
    _assert_refused(server, **_bearer(plaintext))


def test_it_refuses_an_expired_token(server, cast, token_for):
    plaintext = token_for(cast.owner)
    PersonalToken.objects.filter(prefix=plaintext.split("_")[1]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    _assert_refused(server, **_bearer(plaintext))


def test_it_refuses_a_token_in_the_url(server, cast, token_for):
    plaintext = token_for(cast.owner)
    _assert_refused(server, f"/ws/me/?token={plaintext}")
    _assert_refused(server, f"/ws/me/?access_token={plaintext}")
    # Not even alongside a valid header: a token that reached a URL has leaked and must not work.
    _assert_refused(server, f"/ws/me/?token={plaintext}", **_bearer(plaintext))


def test_a_session_cookie_from_an_allowed_origin_gets_hello_on_the_web_channel(server, cast):
    body = _hello(server, origin=f"http://{server}", additional_headers=_session_cookie(cast.approver))
    assert body == {"username": "approver", "tenant_slug": "acme", "roles": ["approver"], "channel": "web"}


def test_it_refuses_a_session_cookie_from_a_foreign_origin(server, cast):
    _assert_refused(server, origin=FOREIGN_ORIGIN, additional_headers=_session_cookie(cast.owner))


def test_it_refuses_a_session_cookie_without_an_origin(server, cast):
    _assert_refused(server, additional_headers=_session_cookie(cast.owner))


def test_it_refuses_a_caller_with_no_credential(server):
    _assert_refused(server)
    _assert_refused(server, origin=f"http://{server}")


def test_it_closes_with_4403_for_a_signed_in_user_who_is_no_member(server, cast):
    stranger, _ = accounts.user_ensure(username="stranger", password="stranger-pass-1234")
    origin, cookie = f"http://{server}", _session_cookie(stranger)
    with _open(server, origin=origin, additional_headers=cookie) as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == CLOSE_NOT_MEMBER


def test_it_closes_with_4403_when_the_tokens_membership_was_removed(server, cast, token_for):
    plaintext = token_for(cast.teammate)
    cast.teammate.tess_memberships.all().delete()
    with _open(server, **_bearer(plaintext)) as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == CLOSE_NOT_MEMBER


# --- the credential is re-checked while the socket is open (tess_site.consumers) ---------------------------


def _greeted(ws: ClientConnection) -> None:
    """``/ws/me/`` opens with hello, then the snapshot of what waits on the person."""
    assert [json.loads(ws.recv(timeout=10))["kind"] for _ in range(2)] == ["hello", "snapshot"]


def _closed_with(ws: ClientConnection, timeout: float = 20) -> tuple[int | None, list[dict[str, Any]]]:
    """Read until the server closes the socket: its close code, and every frame that arrived before."""
    frames: list[dict[str, Any]] = []
    try:
        while True:
            frames.append(json.loads(ws.recv(timeout=timeout)))
    except ConnectionClosed as closed:
        return (closed.rcvd.code if closed.rcvd else None), frames


@pytest.mark.redis
@pytest.mark.parametrize("link_pushed", [False, True], ids=["idle", "link-pushed-at-once"])
def test_revoking_the_token_closes_an_open_me_socket_with_4401_and_sends_nothing_more(
    server, cast, token_for, link_pushed
):
    from django.db import transaction

    from approvals_app.events import notify_user_on_commit
    from tess_site.consumers import CLOSE_CREDENTIAL_ENDED

    plaintext = token_for(cast.approver)
    with _open(server, **_bearer(plaintext)) as ws:
        _greeted(ws)
        token = PersonalToken.objects.get(prefix=plaintext.split("_")[1])
        accounts.token_revoke(scope=scope_of(cast.approver, cast.acme), token=token)
        if link_pushed:  # before any periodic re-check can run, a link for this approver reaches their socket
            with transaction.atomic():
                notify_user_on_commit(
                    tenant_id=cast.acme.pk,
                    user_id=cast.approver.pk,
                    kind="approval.link",
                    body={"approval_id": "a-1", "url": "https://tess.example/approvals/one-time-secret/"},
                )
        code, frames = _closed_with(ws)
    assert code == CLOSE_CREDENTIAL_ENDED and frames == []


@pytest.mark.redis
def test_logging_out_closes_an_open_me_socket_with_4401(server, cast):
    from tess_site.consumers import CLOSE_CREDENTIAL_ENDED

    browser = Client()
    browser.force_login(cast.approver)
    cookie = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"}
    with _open(server, origin=f"http://{server}", additional_headers=cookie) as ws:
        _greeted(ws)
        browser.logout()
        code, _ = _closed_with(ws)
    assert code == CLOSE_CREDENTIAL_ENDED


def test_every_me_connect_starts_with_what_waits_on_the_person(server, cast, token_for):
    from memory_app.services import memory_propose

    card = memory_propose(
        scope_of(cast.owner, cast.acme), data={"op": "remember", "category": "preferences", "value": "be brief"}
    )
    for _ in range(2):  # a reconnect gets it again: nothing depends on a push that came while it was away
        with _open(server, **_bearer(token_for(cast.owner))) as ws:
            frames = [json.loads(ws.recv(timeout=10)) for _ in range(2)]
        assert [frame["kind"] for frame in frames] == ["hello", "snapshot"]
        assert frames[1]["body"]["cards"] == [{"id": str(card.id), "kind": card.kind, "status": "pending"}]
