"""Inbox notices by Discord direct message: only where the person chose it, with the inbox link only."""

from __future__ import annotations

from typing import Any

import pytest

from approvals_app import notifications
from approvals_app.links import approval_resend
from tests.conftest import scope_of
from tests.factories import SessionFactory
from tests.sessions_app.discord.conftest import link

pytestmark = pytest.mark.django_db


def direct_messages(discord_api: Any) -> list[str]:
    return [
        body.get("content", "")
        for method, path, body, _ in discord_api.calls
        if method == "POST" and path == "/channels/dm-555/messages"
    ]


def test_an_approver_who_chose_discord_gets_the_inbox_link_and_resend_brings_a_fresh_private_link(
    cast, discord_api, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from sessions_app.services import session_terminate

    settings.TESS_DISCORD_BOT_TOKEN = "bot-secret"
    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(notifications, "enqueue_on_commit", lambda task, *args: queued.append(args))
    link(cast.approver, cast.acme, "555")
    notifications.preferences_update(scope=scope_of(cast.approver, cast.acme), changes={"discord": True})
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    with django_capture_on_commit_callbacks(execute=True):
        approval = session_terminate(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, reason="done")
    for args in queued:
        notifications.deliver_inbox_notice(*args)
    sent = direct_messages(discord_api)
    links = [text for text in sent if "/approvals/" in text]
    notices = [text for text in sent if "/inbox/" in text]
    assert len(links) == 1 and len(notices) == 1
    assert f"/inbox/#approval_to_decide:{approval.pk}" in notices[0] and "/approvals/" not in notices[0]

    with django_capture_on_commit_callbacks(execute=True):
        assert approval_resend(scope_of(cast.owner, cast.acme), approval_id=approval.pk) == 1
    fresh = [text for text in direct_messages(discord_api) if "/approvals/" in text]
    assert len(fresh) == 2 and fresh[0] != fresh[1]


def test_without_the_choice_no_notice_is_sent(cast, discord_api, settings):
    settings.TESS_DISCORD_BOT_TOKEN = "bot-secret"
    link(cast.approver, cast.acme, "555")
    notifications.inbox_notice_deliver(
        tenant_id=cast.acme.pk, user_id=cast.approver.pk, key="card:x", title="A card", url="/inbox/#card:x"
    )
    assert direct_messages(discord_api) == []
