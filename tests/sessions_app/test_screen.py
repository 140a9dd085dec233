"""A terminal session's screen and keystrokes through the API, against a real tmux server."""

from __future__ import annotations

import re
import uuid

import pytest

from providers_app.registry import get_provider
from providers_app.tmux import TmuxProvider
from sessions_app import services
from sessions_app.models import InboxItem, Session
from tests.conftest import scope_of
from tests.waiting import wait_for

from .conftest import pump_until

pytestmark = pytest.mark.django_db

DRAW = "printf '\\033[2J\\033[5;10H\\033[31mRED\\033[0m\\033[?1049h\\033[3;4H\\033[1;32mGREEN\\033[0m'; sleep 600"


def post(client, path, data, key=None):
    return client.post(path, data, format="json", HTTP_IDEMPOTENCY_KEY=key or uuid.uuid4().hex)


def start(cast, argv: list[str], title: str = "drawn") -> Session:
    scope = scope_of(cast.owner, cast.acme)
    provider = get_provider("alpha")
    assert isinstance(provider, TmuxProvider)
    runtime = provider.start_command(scope, title=title, argv=argv)
    return services.session_bind_started(scope=scope, owner=cast.owner, runtime=runtime, title=title)


def test_the_screen_is_what_the_pane_shows_with_colours_cursor_and_the_alternate_screen(cast, api_as, tmux):
    session = start(cast, ["sh", "-c", DRAW])
    client = api_as(cast.owner)
    path = f"/api/v1/sessions/{session.pk}/screen/"
    assert wait_for(lambda: "GREEN" in client.get(path).json().get("data", ""), timeout=15)
    body = client.get(path).json()
    assert (body["cols"], body["rows"]) == (80, 24)  # a detached tmux session's default size
    assert body["alternate"] is True  # the program switched to the alternate screen after drawing RED
    assert (body["cursor_x"], body["cursor_y"]) == (8, 2)  # right after GREEN on the third row
    assert body["source"].startswith("%") and body["cursor"].startswith(body["source"] + ":")
    assert body["seq"] == Session.objects.get(pk=session.pk).last_seq
    data = body["data"]
    assert data.startswith("\x1b[?1049h")  # the viewer switches to the alternate screen too
    row3 = re.search(r"\x1b\[3;1H([^\n]*?)\x1b\[4;1H", data)
    assert row3 and re.search(r"\x1b\[[0-9;]*32[0-9;]*mGREEN", row3.group(1)), data  # green, as drawn
    assert "RED" not in data  # drawn on the normal screen, which the alternate one hides
    assert data.endswith("\x1b[3;9H\x1b[?25h")


def test_keystrokes_are_typed_exactly_as_sent_once_per_key(cast, api_as, tmux, django_capture_on_commit_callbacks):
    session = start(cast, ["sh", "-c", "stty raw -echo; od -An -c"], title="keys")
    client = api_as(cast.owner)
    path = f"/api/v1/sessions/{session.pk}/messages/"
    post(client, f"/api/v1/sessions/{session.pk}/attach/", {"mode": "interactive"})
    with django_capture_on_commit_callbacks(execute=True):
        first = post(client, path, {"text": "ab\x1b[A", "keys": True}, key="keys-1")
    with django_capture_on_commit_callbacks(execute=True):
        again = post(client, path, {"text": "ab\x1b[A", "keys": True}, key="keys-1")
    assert first.status_code == 202, first.json()
    assert again.headers["Idempotency-Replayed"] == "true"
    with django_capture_on_commit_callbacks(execute=True):
        post(client, path, {"text": "z" * 13, "keys": True})  # fills od's 16-byte line: it prints
    text = pump_until(session, "z   z")
    assert re.search(r"a\s+b\s+033\s+\[\s+A(\s+z){11}", text), text  # no Enter after the keys, each once
    assert InboxItem.objects.filter(session=session, keys=True).count() == 2


def test_an_ended_session_has_no_screen_to_read(cast, api_as, tmux):
    session = start(cast, ["sh", "-c", "sleep 600"])
    Session.objects.filter(pk=session.pk).update(status="exited")
    response = api_as(cast.owner).get(f"/api/v1/sessions/{session.pk}/screen/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


def test_keystrokes_are_typed_in_the_order_they_came_whichever_worker_runs_first(
    cast, api_as, tmux, django_capture_on_commit_callbacks
):
    session = start(cast, ["sh", "-c", "stty raw -echo; od -An -c"], title="order")
    client = api_as(cast.owner)
    post(client, f"/api/v1/sessions/{session.pk}/attach/", {"mode": "interactive"})
    with django_capture_on_commit_callbacks(execute=False):  # queued, no worker yet
        for keys in ("ab", "cd", "efghijklmnop"):
            post(client, f"/api/v1/sessions/{session.pk}/messages/", {"text": keys, "keys": True})
    first, _second, third = InboxItem.objects.filter(session=session).order_by("pk")
    assert not services.inbox_deliver(item_id=third.pk, worker="w3")  # a later item's worker runs first
    third.refresh_from_db()
    assert (third.state, third.attempts) == ("pending", 0)  # it waits, with no attempt counted
    with django_capture_on_commit_callbacks(execute=True):
        assert services.inbox_deliver(item_id=first.pk, worker="w1")  # wakes the second, which wakes the third
    assert set(InboxItem.objects.filter(session=session).values_list("state", flat=True)) == {"done"}
    text = pump_until(session, "o   p")
    assert re.search(r"a\s+b\s+c\s+d\s+e\s+f", text), text
