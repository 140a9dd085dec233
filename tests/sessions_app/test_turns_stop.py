"""Stop: a turn stopped while the model writes its reply ends its model call (the stand-in sees its connection
closed), is written as stopped with the text shown so far, frees the input, and replays stopped; a second
Stop, or one after the end, changes nothing and says so. The Stop arrives at another process than the one
answering (daphne in a child process, the Stop through this process's API, Redis between them), and in the
embedded default (no Redis) within the one process."""

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
from guardian.shortcuts import assign_perm

from sessions_app.gateway import turn_handle
from sessions_app.models import Session, SessionEvent, TurnRun
from sessions_app.turn_stop import turn_stop
from tess_site.audit.models import AuditEvent
from tess_site.scope import Channel
from tests.conftest import scope_of
from tests.providers_app.chat_standin import ChatStandIn
from tests.sessions_app.answering import answering_daphne
from tests.sessions_app.test_stream_websocket import _bearer, _open
from tests.tess_site.children import Child
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

DRIP = ChatStandIn(drip_seconds=0.2)  # bound now, so the answering server's environment can name it
TEXT = "tell me how the whole fleet is doing on this fine and sunny morning, every session and every agent of it"
WHOLE = f"stand-in answer to: {TEXT}"


@pytest.fixture(scope="module")
def answering_server(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[str]:
    """daphne answering turns itself with the dripping stand-in as its model."""
    with answering_daphne(start_child, DRIP, timeout_seconds=30) as (port, _child):
        yield f"127.0.0.1:{port}"


def _session(cast: Any) -> Session:
    return Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="t", provider_instance="nowhere", runtime_id=f"${uuid.uuid4().hex}"
    )


def _frame(ws: Any) -> dict[str, Any]:
    while True:
        frame = json.loads(ws.recv(timeout=30))
        if frame["kind"] != "heartbeat":
            return frame


def test_a_stop_from_another_process_ends_the_call_and_writes_the_turn_stopped(
    answering_server, cast, token_for, api_as
):
    DRIP.closed_event.clear()
    session = _session(cast)
    token = token_for(cast.owner)
    key = uuid.uuid4().hex
    answered: dict[str, Any] = {}

    def ask() -> None:
        answered["response"] = httpx.post(
            f"http://{answering_server}/api/v1/sessions/{session.pk}/turns/",
            json={"text": TEXT},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
            timeout=60,
        )

    asking = threading.Thread(target=ask)
    frames: list[dict[str, Any]] = []
    with _open(answering_server, session, **_bearer(token)) as ws:
        asking.start()
        frames.append(_frame(ws))
        announced = frames[0]["body"]
        assert frames[0]["kind"] == "turn.delta" and announced["offset"] == 0 and announced["text"] == ""
        turn_id = announced["turn_id"]  # known before the model's first word: Tess is thinking
        while not any(f["kind"] == "turn.delta" and f["body"]["text"] for f in frames):
            frames.append(_frame(ws))
        # Stopped mid-reply, through this process's API: the answering process hears it through Redis.
        stop = api_as(cast.owner).post(f"/api/v1/sessions/{session.pk}/turns/{turn_id}/stop/")
        assert stop.status_code == 200, stop.content
        assert stop.json()["status"] == "stopping"
        while frames[-1]["kind"] != "turn.out":
            frames.append(_frame(ws))
    asking.join()
    assert DRIP.closed_event.wait(10)  # the model's connection was closed
    assert not DRIP.finished.is_set()
    response = answered["response"]
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stopped"] is True and body["turn_id"] == turn_id
    shown = "".join(f["body"]["text"] for f in frames if f["kind"] == "turn.delta")
    assert body["reply"] == shown  # the text shown so far, all of it and nothing more
    assert body["reply"] and WHOLE.startswith(body["reply"]) and len(body["reply"]) < len(WHOLE)  # cut mid-reply
    # The stream has it durably, marked stopped; every channel reads the same.
    out = SessionEvent.objects.get(session=session, kind="turn.out").body
    assert out["stopped"] is True and out["text"] == body["reply"]
    assert frames[-1]["body"]["stopped"] is True
    assert not TurnRun.objects.filter(pk=turn_id).exists()  # the input is free
    # Stopping again changes nothing and says so; the idempotent replay answers the stopped turn.
    again = api_as(cast.owner).post(f"/api/v1/sessions/{session.pk}/turns/{turn_id}/stop/")
    assert again.status_code == 200 and again.json()["status"] == "already_stopped"
    replay = httpx.post(
        f"http://{answering_server}/api/v1/sessions/{session.pk}/turns/",
        json={"text": TEXT},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
        timeout=60,
    )
    assert replay.status_code == 200 and replay.json() == body
    assert SessionEvent.objects.filter(session=session, kind="turn.out").count() == 1


@pytest.mark.parametrize("model", ["drip", "held"])
def test_a_stop_in_the_embedded_default_reaches_the_turn_in_its_own_process(cast, model):
    """No Redis: the Stop and the turn share the process, and the wake-up is handed over in it. ``held``: the
    model is still thinking (nothing shown yet) when the Stop comes."""
    session = _session(cast)
    scope = scope_of(cast.owner, cast.acme, Channel.CLI)
    standin = ChatStandIn(drip_seconds=0.2).start()
    settings = {
        "REDIS_URL": None,
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": model,
        "TESS_MODEL_BASE_URL": standin.base_url,
        "TESS_MODEL_TIMEOUT_SECONDS": 30,
        "TESS_MODEL_STREAM": True,
    }
    done: dict[str, Any] = {}

    def take_turn() -> None:
        try:
            done["turn"] = turn_handle(scope=scope, session_id=str(session.pk), text=TEXT)
        finally:
            connection.close()

    try:
        with override_settings(**settings):
            turning = threading.Thread(target=take_turn)
            turning.start()
            if model == "drip":
                assert wait_for(lambda: standin.first_tokens, timeout=30)
            else:
                assert wait_for(lambda: standin.requests, timeout=30)
            running = list(TurnRun.objects.filter(session=session).values_list("turn_id", flat=True))
            assert len(running) == 1
            outcome = turn_stop(scope=scope, session_id=str(session.pk), turn_id=running[0])
            turning.join(timeout=60)
        assert outcome.status == "stopping"
        assert standin.closed_event.wait(10)
    finally:
        standin.release.set()
        standin.stop()
    turn = done["turn"]
    assert turn.stopped and turn.turn_id == running[0]
    assert len(turn.reply) < len(WHOLE)
    if model == "held":
        assert turn.reply == ""
    out = SessionEvent.objects.get(session=session, kind="turn.out").body
    assert out == {**out, "stopped": True, "text": turn.reply}


def test_stopping_a_finished_turn_changes_nothing_and_says_so(cast, api_as):
    session = _session(cast)
    scope = scope_of(cast.owner, cast.acme, Channel.CLI)
    turn = turn_handle(scope=scope, session_id=str(session.pk), text="how are things")
    answer = api_as(cast.owner).post(f"/api/v1/sessions/{session.pk}/turns/{turn.turn_id}/stop/")
    assert answer.status_code == 200
    assert answer.json()["status"] == "already_finished"
    assert "stopped" not in SessionEvent.objects.get(session=session, kind="turn.out").body
    unknown = api_as(cast.owner).post(f"/api/v1/sessions/{session.pk}/turns/{uuid.uuid4().hex}/stop/")
    assert unknown.status_code == 404


def test_only_someone_who_may_operate_the_session_can_stop_its_turn(cast, api_as):
    session = _session(cast)
    run = TurnRun.objects.create(turn_id=uuid.uuid4().hex, session=session, actor=cast.owner, channel="web", text="x")
    url = f"/api/v1/sessions/{session.pk}/turns/{run.turn_id}/stop/"
    # Another tenant's operator, and a teammate with no grant, cannot see the session at all.
    assert api_as(cast.outsider, cast.globex).post(url).status_code == 404
    assert api_as(cast.teammate).post(url).status_code == 404
    # A teammate who may watch it, but not operate it, is refused.
    assign_perm("view_session", cast.teammate, session)
    refused = api_as(cast.teammate).post(url)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    # A turn of another session is not this session's to stop.
    other = _session(cast)
    assert api_as(cast.owner).post(f"/api/v1/sessions/{other.pk}/turns/{run.turn_id}/stop/").status_code == 404
    run.refresh_from_db()
    assert run.stop_requested_at is None
    # With an operate grant the teammate may; a second Stop says it is already stopping.
    assign_perm("operate_session", cast.teammate, session)
    assert api_as(cast.teammate).post(url).json()["status"] == "stopping"
    assert api_as(cast.owner).post(url).json()["status"] == "already_stopping"
    run.refresh_from_db()
    assert run.stop_requested_at is not None
    # The Stop that did something is audited, once, with ids only.
    audited = AuditEvent.objects.filter(action="turn.stopped")
    assert [(a.actor_id, a.target_id, a.metadata) for a in audited] == [
        (cast.teammate.pk, str(session.pk), {"turn_id": run.turn_id})
    ]
