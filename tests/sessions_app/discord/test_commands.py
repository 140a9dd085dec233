"""/tess subcommands: refusals for unlinked users and other owners; bind, status, sessions, memory; ask
deferred and followed up through the interaction webhook (a stand-in over real HTTP) from the outbox."""

from __future__ import annotations

import time

import pytest

from sessions_app.discord.models import DiscordInteraction
from sessions_app.models import IngressBinding, OutboxItem, SessionEvent
from sessions_app.services import ingress_bind
from tests.conftest import scope_of
from tests.factories import SessionFactory

from .conftest import CHANNEL, command, link

pytestmark = pytest.mark.django_db

OWNER_ID, TEAMMATE_ID, OUTSIDER_ID = "101", "102", "103"


def content(response) -> str:
    return response.json()["data"]["content"]


def bind(session) -> None:
    ingress_bind(
        scope=scope_of(session.owner, session.tenant), session_id=session.pk, channel="discord", external_ref=CHANNEL
    )


@pytest.mark.parametrize(
    "sub,options",
    [("ask", {"text": "hi"}), ("status", {}), ("sessions", {}), ("bind", {"session": "x"}), ("memory", {})],
)
def test_unlinked_users_get_an_ephemeral_refusal(cast, interact, sub, options):
    answer = interact(command(sub, "999", **options)).json()
    assert answer["type"] == 4
    assert answer["data"]["flags"] == 64
    assert "Link your Discord account first" in answer["data"]["content"]


def test_it_binds_the_channel_to_the_callers_session(cast, interact):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.owner, cast.acme, OWNER_ID)
    answer = interact(command("bind", OWNER_ID, session=str(session.pk)))
    assert "now bound" in content(answer)
    assert IngressBinding.objects.get(channel="discord", external_ref=CHANNEL, active=True).session == session


def test_it_refuses_to_bind_another_owners_session(cast, interact):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.teammate, cast.acme, TEAMMATE_ID)
    link(cast.outsider, cast.globex, OUTSIDER_ID)
    for user_id in (TEAMMATE_ID, OUTSIDER_ID):
        answer = interact(command("bind", user_id, session=str(session.pk))).json()
        assert answer["data"]["flags"] == 64 and "No such session" in answer["data"]["content"]
    assert not IngressBinding.objects.filter(channel="discord").exists()


def test_status_reports_the_bound_session(cast, interact):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.owner, cast.acme, OWNER_ID)
    assert "not bound" in content(interact(command("status", OWNER_ID)))
    bind(session)
    assert f"({session.pk}) is running; 0 events so far." in content(interact(command("status", OWNER_ID)))


def test_sessions_lists_only_the_callers_sessions(cast, interact, django_assert_max_num_queries):
    mine = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    link(cast.owner, cast.acme, OWNER_ID)
    with django_assert_max_num_queries(8):
        text = content(interact(command("sessions", OWNER_ID)))
    assert str(mine.pk) in text and str(theirs.pk) not in text


def test_memory_reports_the_callers_note_count(cast, interact):
    link(cast.owner, cast.acme, OWNER_ID)
    answer = interact(command("memory", OWNER_ID)).json()
    assert answer["data"]["flags"] == 64
    assert "0 operator notes" in answer["data"]["content"] or "off" in answer["data"]["content"]


def test_one_note_is_counted_in_the_singular(cast, interact):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose
    from tests.conftest import scope_of

    scope = scope_of(cast.owner, cast.acme)
    card = memory_propose(scope, data={"op": "remember", "category": "preferences", "value": "lead with sev"})
    card_confirm(scope=scope, card_id=card.pk)
    link(cast.owner, cast.acme, OWNER_ID)
    text = interact(command("memory", OWNER_ID)).json()["data"]["content"]
    assert text.startswith("You have 1 operator note;"), text


def test_ask_defers_then_follows_up_through_the_webhook_from_the_outbox(
    cast, interact, discord_api, django_capture_on_commit_callbacks
):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.owner, cast.acme, OWNER_ID)
    bind(session)
    payload = command("ask", OWNER_ID, text="hello tess")
    with django_capture_on_commit_callbacks(execute=True):
        answer = interact(payload)
    assert answer.json() == {"type": 5}
    events = list(SessionEvent.objects.filter(session=session).order_by("seq"))
    assert [e.kind for e in events][:1] == ["turn.in"] and events[0].body["channel"] == "discord"
    reply = next(e for e in events if e.kind == "turn.out")
    item = OutboxItem.objects.get(session=session)
    assert (item.state, item.event_seq) == ("done", reply.seq)
    method, path, body, _ = discord_api.calls[-1]
    assert (method, path) == ("PATCH", f"/webhooks/app-1/{payload['token']}/messages/@original")
    assert body["content"] == reply.body["text"]


def test_a_redelivered_interaction_runs_one_turn(cast, interact, discord_api, django_capture_on_commit_callbacks):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.owner, cast.acme, OWNER_ID)
    bind(session)
    payload = command("ask", OWNER_ID, text="hello")
    now = int(time.time())
    with django_capture_on_commit_callbacks(execute=True):
        interact(payload, timestamp=now)
        # Discord retrying delivery signs again (another timestamp, whatever the clock did in between), so this is
        # not a replayed request.
        again = interact(payload, timestamp=now - 1)
    assert "already received" in content(again)
    assert SessionEvent.objects.filter(session=session, kind="turn.in").count() == 1


def test_another_owners_discord_user_cannot_ask_in_a_bound_channel(cast, interact, discord_api):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    bind(session)
    link(cast.teammate, cast.acme, TEAMMATE_ID)
    link(cast.outsider, cast.globex, OUTSIDER_ID)
    teammate = interact(command("ask", TEAMMATE_ID, text="hi")).json()
    assert teammate["data"]["flags"] == 64 and "No such session" in teammate["data"]["content"]
    outsider = interact(command("ask", OUTSIDER_ID, text="hi")).json()
    assert outsider["data"]["flags"] == 64 and "Link your Discord account first" in outsider["data"]["content"]
    assert not DiscordInteraction.objects.exists()
    assert not SessionEvent.objects.filter(session=session).exists()


def test_a_bound_channel_gets_approval_notices_and_the_approver_the_link_privately(
    cast, discord_api, settings, django_capture_on_commit_callbacks
):
    from sessions_app.services import session_terminate

    settings.TESS_DISCORD_BOT_TOKEN = "bot-secret"
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    bind(session)
    link(cast.approver, cast.acme, "555")
    with django_capture_on_commit_callbacks(execute=True):
        session_terminate(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, reason="done")
    posts = [(path, body.get("content", "")) for method, path, body, _ in discord_api.calls if method == "POST"]
    channel_posts = [text for path, text in posts if path == f"/channels/{CHANNEL}/messages"]
    direct = [text for path, text in posts if path == "/channels/dm-555/messages"]
    assert len(channel_posts) == 1 and "Approval requested" in channel_posts[0]
    assert "/approvals/" not in channel_posts[0]
    assert len(direct) == 1 and "/approvals/" in direct[0]
    assert all(auth == "Bot bot-secret" for _, _, _, auth in discord_api.calls)


def test_without_a_bot_token_nothing_is_posted_to_discord(cast, discord_api, django_capture_on_commit_callbacks):
    from sessions_app.services import session_terminate

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    bind(session)
    link(cast.approver, cast.acme, "555")
    with django_capture_on_commit_callbacks(execute=True):
        session_terminate(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, reason="done")
    assert discord_api.calls == []
