"""A deferred ``/tess ask`` shows the reply growing: its message is edited with the text so far at most every
``TESS_DISCORD_EDIT_SECONDS`` while the model writes (the chat-completions stand-in, a word every 200 ms),
and the whole reply, sent from the outbox, is the last edit (the Discord API stand-in over real HTTP)."""

from __future__ import annotations

import itertools

import pytest

from sessions_app.discord.progress import GROWING_MARK
from sessions_app.models import SessionEvent
from sessions_app.services import ingress_bind
from tests.conftest import scope_of
from tests.factories import SessionFactory
from tests.providers_app.chat_standin import ChatStandIn

from .conftest import CHANNEL, command, link

pytestmark = pytest.mark.django_db(transaction=True)

OWNER_ID = "101"
TEXT = "how is every session of the fleet doing this morning, one after the other"


def test_the_deferred_reply_grows_then_stands_whole(cast, interact, discord_api, settings):
    standin = ChatStandIn(drip_seconds=0.2).start()
    settings.TESS_MODEL_ADAPTER = "openai_compatible"
    settings.TESS_MODEL = "drip"
    settings.TESS_MODEL_BASE_URL = standin.base_url
    settings.TESS_MODEL_STREAM = True
    settings.TESS_DISCORD_EDIT_SECONDS = 1
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.owner, cast.acme, OWNER_ID)
    ingress_bind(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, channel="discord", external_ref=CHANNEL)
    payload = command("ask", OWNER_ID, text=TEXT)
    try:
        answer = interact(payload)  # the deferred turn runs in-process (tasks are eager in the tests)
    finally:
        standin.stop()
    assert answer.json() == {"type": 5}
    reply = SessionEvent.objects.get(session=session, kind="turn.out").body["text"]
    assert reply == f"stand-in answer to: {TEXT}"
    original = f"/webhooks/app-1/{payload['token']}/messages/@original"
    edits = [(t, body["content"]) for t, (m, path, body, _) in zip(discord_api.times, discord_api.calls, strict=True)
             if m == "PATCH" and path == original]  # fmt: skip
    growing = [(t, text) for t, text in edits if text.endswith(GROWING_MARK)]
    assert len(growing) >= 2  # the reply grew in Discord (about 3 s of writing, an edit a second at most)
    assert edits[-1][1] == reply  # the whole reply, last
    for (before, earlier), (after, later) in itertools.pairwise(growing):
        assert after - before >= 0.9  # no more often than the interval
        assert len(later) > len(earlier)
    for _, text in growing:
        so_far = text.removesuffix(GROWING_MARK)
        assert reply.startswith(so_far) and len(so_far) < len(reply)
