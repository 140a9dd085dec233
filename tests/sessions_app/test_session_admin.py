"""The auditor's admin for sessions and events: read-only, tenant-limited filters, search by correlation id."""

from __future__ import annotations

import pytest

from sessions_app import services
from sessions_app.models import Session
from sessions_app.stream import EventKind, system_body
from tess_site.audit.services import record_audit
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


def _session(cast, tenant=None, owner=None, title="t", runtime_id="$1") -> Session:
    return Session.objects.create(
        tenant=tenant or cast.acme,
        owner=owner or cast.owner,
        title=title,
        provider_instance="alpha",
        runtime_id=runtime_id,
    )


def test_the_filters_name_only_tenants_and_people_the_auditor_may_audit(cast, client):
    _session(cast)
    _session(cast, tenant=cast.globex, owner=cast.outsider, runtime_id="$2")
    client.force_login(cast.auditor)
    page = client.get("/admin/sessions_app/session/").content.decode()
    assert "?tenant_slug=acme" in page and "globex" not in page.lower()
    assert "?actor=owner" in page and "outsider" not in page


def test_the_actor_and_tenant_filters_narrow_the_list(cast, client):
    mine = _session(cast)
    _session(cast, owner=cast.teammate, runtime_id="$2")
    client.force_login(cast.auditor)
    response = client.get("/admin/sessions_app/session/?actor=owner&tenant_slug=acme")
    assert list(response.context["cl"].queryset) == [mine]


def test_a_correlation_id_from_the_audit_feed_finds_its_session_and_events(cast, client):
    found = _session(cast, title="found")
    _session(cast, title="other", runtime_id="$2")
    scope = scope_of(cast.owner, cast.acme, correlation_id="corr-4711")
    record_audit(scope, action="session.terminate", target_type="session", target_id=str(found.pk), outcome="ok")
    services.event_append(session_id=found.pk, kind=EventKind.SYSTEM, body=system_body(text="hi"))
    client.force_login(cast.auditor)
    sessions = client.get("/admin/sessions_app/session/?q=corr-4711")
    assert list(sessions.context["cl"].queryset) == [found]
    events = client.get("/admin/sessions_app/sessionevent/?q=corr-4711")
    assert [e.session_id for e in events.context["cl"].queryset] == [found.pk]


def test_events_of_another_tenant_are_invisible_and_nothing_can_change(cast, client):
    theirs = _session(cast, tenant=cast.globex, owner=cast.outsider)
    event = services.event_append(session_id=theirs.pk, kind=EventKind.SYSTEM, body=system_body(text="x"))
    client.force_login(cast.auditor)
    response = client.get("/admin/sessions_app/sessionevent/")
    assert response.status_code == 200 and list(response.context["cl"].queryset) == []
    assert client.get(f"/admin/sessions_app/sessionevent/{event.pk}/change/").status_code == 302  # "not found"
    assert client.get("/admin/sessions_app/sessionevent/add/").status_code == 403


def test_operators_without_an_auditing_role_cannot_browse_events(cast, client):
    client.force_login(cast.owner)
    assert client.get("/admin/sessions_app/sessionevent/").status_code == 403


def test_the_event_list_keeps_its_query_count(cast, client, django_assert_max_num_queries):
    session = _session(cast)
    for n in range(20):
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=str(n)))
    client.force_login(cast.auditor)
    with django_assert_max_num_queries(16):
        assert client.get("/admin/sessions_app/sessionevent/").status_code == 200


def test_a_sessions_checkpoint_shows_to_auditors_by_ids_only(cast, client):
    session = _session(cast)
    checkpoint = {
        "kind": "compaction",
        "entry_id": "c0ffee01",
        "summary": "Owner is migrating payroll-ledger; keep the PGTZ trick",
        "first_kept_entry_id": "beef0002",
        "tokens_before": 48213,
        "cursor": "1024.0",
    }
    Session.objects.filter(pk=session.pk).update(checkpoint=checkpoint)
    client.force_login(cast.auditor)
    page = client.get(f"/admin/sessions_app/session/{session.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "c0ffee01" in text and "beef0002" in text and "48213" in text
    assert "payroll-ledger" not in text and "PGTZ" not in text
