"""A reply reaches a websocket subscriber while the model writes it: ephemeral ``turn.delta`` frames, then the
durable ``turn.out``; a subscriber that connects mid-reply gets the text so far, then the rest. Through the
real ASGI application (daphne in a child process, channels-redis) and the local chat-completions stand-in
streaming a word every 200 ms."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import override_settings

from sessions_app.gateway import turn_handle
from sessions_app.models import Session, SessionEvent
from tess_site.scope import Channel
from tests.conftest import scope_of
from tests.providers_app.chat_standin import ChatStandIn
from tests.sessions_app.answering import answering_daphne
from tests.sessions_app.test_stream_websocket import _bearer, _open
from tests.sessions_app.test_stream_websocket import server as server
from tests.tess_site.children import Child
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_subscriber_sees_the_reply_grow_before_the_model_finishes(server, cast, token_for):
    session = Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="t", provider_instance="nowhere", runtime_id="$1"
    )
    scope = scope_of(cast.owner, cast.acme, Channel.CLI)
    standin = ChatStandIn(drip_seconds=0.2).start()
    settings = {
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": "drip",
        "TESS_MODEL_BASE_URL": standin.base_url,
        "TESS_MODEL_TIMEOUT_SECONDS": 20,
        "TESS_MODEL_STREAM": True,
    }
    done: dict[str, Any] = {}

    def take_turn() -> None:
        try:
            done["turn"] = turn_handle(scope=scope, session_id=str(session.pk), text="how is the fleet doing today")
        finally:
            connection.close()

    frames: list[dict[str, Any]] = []
    finished_at_first_delta: bool | None = None
    try:
        with _open(server, session, **_bearer(token_for(cast.owner))) as ws, override_settings(**settings):
            turning = threading.Thread(target=take_turn)
            turning.start()
            try:
                while not any(f["kind"] == "turn.out" for f in frames):
                    frame = json.loads(ws.recv(timeout=30))
                    if frame["kind"] == "heartbeat":
                        continue
                    if frame["kind"] == "turn.delta" and finished_at_first_delta is None:
                        finished_at_first_delta = standin.finished.is_set()
                    frames.append(frame)
            finally:
                turning.join()
    finally:
        standin.stop()

    assert finished_at_first_delta is False  # the first piece arrived while the model was still writing
    reply = done["turn"].reply
    assert reply == "stand-in answer to: how is the fleet doing today"
    kinds = [f["kind"] for f in frames]
    deltas = [f for f in frames if f["kind"] == "turn.delta"]
    assert len(deltas) >= 2
    assert kinds.index("turn.out") > kinds.index("turn.delta")
    assert all(f["seq"] is None and f["body"]["turn_id"] == done["turn"].turn_id for f in deltas)
    # Every piece once and in order: each starts where the one before ended, and they add up to the reply.
    offsets = [f["body"]["offset"] for f in deltas]
    assert offsets == [sum(len(f["body"]["text"]) for f in deltas[:i]) for i in range(len(deltas))]
    assert "".join(f["body"]["text"] for f in deltas) == reply
    # Nothing of the pieces was stored: the stream holds the turn and its whole reply only.
    assert list(SessionEvent.objects.filter(session=session).values_list("kind", flat=True)) == ["turn.in", "turn.out"]


DRIP = ChatStandIn(drip_seconds=0.2)  # bound now, so the answering server's environment can name it


@pytest.fixture(scope="module")
def answering_server(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[str]:
    """daphne answering turns itself with the dripping stand-in as its model."""
    with answering_daphne(start_child, DRIP, timeout_seconds=20) as (port, _child):
        yield f"127.0.0.1:{port}"


def _delta_or_event(ws: Any) -> dict[str, Any]:
    while True:
        frame = json.loads(ws.recv(timeout=30))
        if frame["kind"] != "heartbeat":
            return frame


def test_a_client_that_reconnects_mid_reply_gets_the_text_so_far_then_the_rest(answering_server, cast, token_for):
    session = Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="t", provider_instance="nowhere", runtime_id="$1"
    )
    token = token_for(cast.owner)
    text = "tell me how the whole fleet is doing on this fine morning"
    answered: dict[str, Any] = {}

    def ask() -> None:
        answered["response"] = httpx.post(
            f"http://{answering_server}/api/v1/sessions/{session.pk}/turns/",
            json={"text": text},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
            timeout=60,
        )

    asking = threading.Thread(target=ask)
    with _open(answering_server, session, **_bearer(token)) as first:
        asking.start()
        seen = _delta_or_event(first)
        assert seen["kind"] == "turn.delta"
        seen_text = seen["body"]["text"]
    # Gone mid-reply; back a moment later, from the same cursor (nothing was stored yet).
    assert wait_for(lambda: DRIP.requests and not DRIP.finished.is_set(), timeout=10)
    pieces: dict[int, str] = {}
    with _open(answering_server, session, **_bearer(token)) as second:
        frames = []
        while not frames or frames[-1]["kind"] != "turn.out":
            frames.append(_delta_or_event(second))
    asking.join()
    assert answered["response"].status_code == 200, answered["response"].text
    reply = answered["response"].json()["reply"]
    deltas = [f for f in frames if f["kind"] == "turn.delta"]
    so_far = deltas[0]["body"]
    assert so_far["offset"] == 0 and so_far["text"].startswith(seen_text)  # the text so far, in one piece
    assert len(so_far["text"]) < len(reply)  # and then the rest
    for frame in deltas:
        pieces[frame["body"]["offset"]] = frame["body"]["text"]
    joined = ""
    for offset in sorted(pieces):
        assert offset <= len(joined)  # no gap
        joined = max(joined, joined[:offset] + pieces[offset], key=len)  # an overlap repeats what is known
    assert joined == reply
    assert [f["kind"] for f in frames[len(deltas) :]] == ["turn.in", "turn.out"]
