"""Provider heartbeats acted on: a stale one makes its sessions' state unknown and sends fail fast; a fresh
one restores both. Real tmux; the staleness is the last successful check moved back in time."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from providers_app.health import check_provider_heartbeats, heartbeats_check
from providers_app.models import ProviderHeartbeat
from sessions_app import pump, services
from sessions_app.models import InboxItem, Session
from tests.conftest import Cast
from tests.waiting import wait_for

from .agent_state_helpers import announced
from .conftest import TmuxInstance

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_heartbeats_yet() -> None:
    """Start from no recorded heartbeat: a server another test started (its embedded pump checks its own
    instances) writes outside that test's transaction, so its rows can outlive it in this database."""
    ProviderHeartbeat.objects.all().delete()


def post(client: Any, path: str, data: dict[str, Any] | None = None) -> Any:
    return client.post(path, data or {}, format="json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex)


def pump_until_state(session: Session, state: str) -> Session:
    def step() -> Session | None:
        services.session_pump(session_id=session.pk)
        fresh = Session.objects.get(pk=session.pk)
        return fresh if fresh.agent_state == state else None

    return wait_for(step, f"agent state {state}", timeout=30, interval=0.05)


def went_quiet(instance: str, seconds: int) -> None:
    """The instance's last successful heartbeat was ``seconds`` ago (its checks failed or stopped since)."""
    ProviderHeartbeat.objects.filter(instance=instance).update(
        beat_at=timezone.now() - timedelta(seconds=seconds), ok=False
    )


def test_a_stale_heartbeat_makes_the_state_unknown_and_sends_fail_fast_until_a_fresh_one(
    cast: Cast, api_as: Any, start_session: Any, settings: Any
) -> None:
    session = start_session()
    client = api_as(cast.owner)
    messages = f"/api/v1/sessions/{session.pk}/messages/"
    assert post(client, f"/api/v1/sessions/{session.pk}/attach/", {"mode": "interactive"}).status_code == 200
    assert check_provider_heartbeats.delay().get() == 2  # alpha and beta answer
    pump_until_state(session, "idle")

    went_quiet("alpha", settings.TESS_HEARTBEAT_STALE_SECONDS + 60)
    unknown = pump_until_state(session, "unknown")
    assert announced(unknown)[-2:] == ["idle", "unknown"]

    refused = post(client, messages, {"text": "echo hello"})
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "provider_unavailable" and error["details"]["instance"] == "alpha"
    assert "alpha" in error["message"] and "nothing was sent" in error["message"]
    assert not InboxItem.objects.exists()

    status = client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"text": "status"},
        format="json",
        HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
    )
    assert status.status_code == 200  # answered at once, without asking the silent provider
    assert "provider_unavailable" in status.json()["reply"]
    inventory = {e["name"]: e for e in client.get("/api/v1/providers/").json()["results"]}
    assert inventory["alpha"]["health"]["ok"] is False and inventory["alpha"]["health"]["stale"] is True

    health = client.get("/api/v1/health/")
    assert health.status_code == 503
    alpha = health.json()["checks"]["runtime_providers"]["instances"]["alpha"]
    assert alpha["ok"] is False and alpha["heartbeat"]["stale"] is True

    assert heartbeats_check() == 2  # the next check finds alpha answering again
    restored = pump_until_state(session, "idle")
    assert announced(restored)[-3:] == ["idle", "unknown", "idle"]
    assert post(client, messages, {"text": "echo hello"}).status_code == 202
    assert client.get("/api/v1/health/").json()["checks"]["runtime_providers"]["instances"]["alpha"]["ok"] is True


def test_a_message_queued_before_the_heartbeat_went_stale_is_not_sent_while_it_is(
    cast: Cast, api_as: Any, start_session: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    session = start_session()
    client = api_as(cast.owner)
    assert post(client, f"/api/v1/sessions/{session.pk}/attach/", {"mode": "interactive"}).status_code == 200
    heartbeats_check()
    with django_capture_on_commit_callbacks(execute=False):
        assert post(client, f"/api/v1/sessions/{session.pk}/messages/", {"text": "echo queued"}).status_code == 202
    item = InboxItem.objects.get()
    went_quiet("alpha", settings.TESS_HEARTBEAT_STALE_SECONDS + 60)
    with pytest.raises(Exception) as raised:
        services.inbox_deliver(item_id=item.pk, worker="w1", retry_in_seconds=0)
    assert getattr(raised.value, "code", None) == "provider_unavailable"
    item.refresh_from_db()
    assert item.state == "pending" and item.last_error == "provider_unavailable" and item.delivered_seq is None


def test_an_instance_never_checked_is_not_taken_for_down(cast: Cast, api_as: Any, start_session: Any) -> None:
    session = start_session()
    assert not ProviderHeartbeat.objects.exists()
    pump_until_state(session, "idle")


def test_the_embedded_pump_checks_every_provider(tmux_pair: tuple[TmuxInstance, TmuxInstance]) -> None:
    pump.Cycle().run()
    beats = {row.instance: row for row in ProviderHeartbeat.objects.all()}
    assert set(beats) == {"alpha", "beta"}
    assert all(row.ok and row.beat_at is not None for row in beats.values())
