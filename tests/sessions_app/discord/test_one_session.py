"""One session bound from the drawer (browser session), the CLI and a Discord channel: a turn from each
appears, in order, in the others' views — the CLI's live stream, the drawer's events, the Discord channel."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from sessions_app.discord.relay import relay_bound_channels
from tests.cli.conftest import Tess
from tests.cli.conftest import live as live
from tests.cli.conftest import start_child as start_child
from tests.conftest import csrf_token
from tests.factories import SessionFactory

from .conftest import CHANNEL, command, link

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_turn_from_each_channel_appears_in_order_everywhere(
    cast,
    live,
    tmp_path: Path,
    browser_as,
    interact,
    discord_api,
    settings,
):
    settings.TESS_DISCORD_BOT_TOKEN = "bot-secret"
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    link(cast.owner, cast.acme, "101")
    assert "now bound" in interact(command("bind", "101", session=str(session.pk))).json()["data"]["content"]

    tess = Tess(home=tmp_path / "config", url=live.url)
    tess.login("owner")
    watching = tess.popen("stream", str(session.pk), "--json", "--max-events", "6")
    try:
        drawer = browser_as(cast.owner)
        turn = drawer.post(
            f"/api/v1/sessions/{session.pk}/turns/",
            {"text": "hello from the drawer"},
            format="json",
            headers={"X-CSRFToken": csrf_token(drawer), "Idempotency-Key": uuid.uuid4().hex},
        )
        assert turn.status_code == 200
        assert tess("ask", str(session.pk), "hello from the cli").returncode == 0
        ask = command("ask", "101", text="hello from discord")
        assert interact(ask).json() == {"type": 5}  # deferred; the follow-up ran after commit
        assert relay_bound_channels() == 4  # the drawer's and the CLI's turn.in and turn.out
        out, err = watching.communicate(timeout=60)
    finally:
        watching.kill()
    assert watching.returncode == 0, err

    streamed = [json.loads(line) for line in out.splitlines()]
    assert [f["kind"] for f in streamed] == ["turn.in", "turn.out"] * 3
    assert [f["body"]["channel"] for f in streamed[::2]] == ["web", "cli", "discord"]

    events = drawer.get(f"/api/v1/sessions/{session.pk}/events/").json()
    drawer_view = [(e["seq"], e["kind"], e["body"].get("text")) for e in events["events"]]
    assert drawer_view == [(f["seq"], f["kind"], f["body"]["text"]) for f in streamed]

    replies = {f["body"]["turn_id"]: f["body"]["text"] for f in streamed if f["kind"] == "turn.out"}
    followup = [body for method, path, body, _ in discord_api.calls if method == "PATCH"]
    assert [b["content"] for b in followup] == [replies[streamed[4]["body"]["turn_id"]]]
    channel_posts = [b["content"] for m, p, b, _ in discord_api.calls if p == f"/channels/{CHANNEL}/messages"]
    assert channel_posts == [
        "[web] hello from the drawer",
        streamed[1]["body"]["text"],
        "[cli] hello from the cli",
        streamed[3]["body"]["text"],
    ]
    assert relay_bound_channels() == 0  # each event is relayed once


def test_an_unbound_channel_relays_nothing(cast, discord_api, settings):
    settings.TESS_DISCORD_BOT_TOKEN = "bot-secret"
    SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    assert relay_bound_channels() == 0
    assert discord_api.calls == []
