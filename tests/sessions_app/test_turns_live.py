"""Status and diagnostics turns answered from a real tmux runtime, read live through the session's provider."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.django_db


def ask(client, session, text: str):
    return client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"text": text},
        format="json",
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )


def test_status_is_answered_from_the_live_runtime(cast, api_as, start_session, tmux):
    session = start_session()
    body = ask(api_as(cast.owner), session, "what's the status?").json()
    assert body["intent"] == "status"
    assert "The runtime reports running" in body["reply"]
    tmux.tmux("kill-server")
    body = ask(api_as(cast.owner), session, "what's the status?").json()
    assert "The runtime reports gone" in body["reply"]  # live, not the stored "running"


def test_diagnostics_report_provider_health_and_capabilities(cast, api_as, start_session):
    session = start_session()
    body = ask(api_as(cast.owner), session, "diagnose the provider").json()
    assert body["intent"] == "diagnostics"
    assert "Provider tmux alpha is healthy" in body["reply"]
    assert "terminate" in body["reply"]
