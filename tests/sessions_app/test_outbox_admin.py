"""The outbox (events pushed to channels that do not read the stream) and the read-only admin."""

from __future__ import annotations

import pytest

from sessions_app import outbox, services
from sessions_app.models import OutboxItem, Session
from sessions_app.stream import EventKind, system_body
from sessions_app.tasks import deliver_outbox_item
from tess_site.leases import LeaseState

pytestmark = pytest.mark.django_db


def _session(cast, tenant=None, owner=None, runtime_id="$1") -> Session:
    return Session.objects.create(
        tenant=tenant or cast.acme,
        owner=owner or cast.owner,
        title="t",
        provider_instance="alpha",
        runtime_id=runtime_id,
    )


def test_an_outbox_item_is_sent_once_through_its_channels_sender(cast, monkeypatch):
    session = _session(cast)
    event = services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text="hi"))
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(outbox, "_senders", {"discord": lambda ref, frame: sent.append((ref, frame))})
    item = OutboxItem.objects.create(session=session, channel="discord", external_ref="chan-1", event_seq=event.seq)
    assert deliver_outbox_item(item.pk) is True
    assert deliver_outbox_item(item.pk) is False
    assert [(ref, frame["seq"], frame["body"]) for ref, frame in sent] == [("chan-1", 1, {"text": "hi", "code": ""})]


def test_an_outbox_item_without_a_sender_fails_closed(cast, monkeypatch):
    session = _session(cast)
    monkeypatch.setattr(outbox, "_senders", {})
    item = OutboxItem.objects.create(session=session, channel="discord", external_ref="chan-1", event_seq=1)
    assert deliver_outbox_item(item.pk) is False
    item.refresh_from_db()
    assert (item.state, item.last_error) == (LeaseState.FAILED, "no_sender")


def test_the_admin_lists_sessions_of_the_tenants_one_audits_and_changes_nothing(cast, client):
    mine = _session(cast)
    _session(cast, tenant=cast.globex, owner=cast.outsider, runtime_id="$2")
    client.force_login(cast.auditor)
    response = client.get("/admin/sessions_app/session/")
    assert response.status_code == 200
    assert list(response.context["cl"].queryset) == [mine]
    assert client.get(f"/admin/sessions_app/session/{mine.pk}/delete/").status_code == 403


def test_the_admin_hides_sessions_from_plain_operators(cast, client):
    _session(cast)
    client.force_login(cast.owner)
    assert client.get("/admin/sessions_app/session/").status_code == 403
