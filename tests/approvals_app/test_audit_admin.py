"""The audit feed in the Django admin: read-only for everyone, rows only from tenants the user audits."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tess_site.audit.models import AuditChainHead, AuditEvent
from tests.conftest import scope_of

CHANGELIST = reverse("admin:audit_auditevent_changelist")
ADD = reverse("admin:audit_auditevent_add")


def change_url(event: AuditEvent) -> str:
    return reverse("admin:audit_auditevent_change", args=[event.pk])


def delete_url(event: AuditEvent) -> str:
    return reverse("admin:audit_auditevent_delete", args=[event.pk])


def admin_client(user: User) -> Client:
    # No CSRF enforcement: a refused POST below must be refused by the permission check, not the token.
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser(db) -> User:
    return User.objects.create_superuser("root", "root@example.com", "root-pass-1234")


@pytest.fixture
def events(cast, record_events) -> dict[str, list[AuditEvent]]:
    return {
        "acme": record_events(scope_of(cast.owner, cast.acme), 3, prefix="acme"),
        "globex": record_events(scope_of(cast.outsider, cast.globex), 2, prefix="globex"),
    }


@pytest.mark.parametrize("reader", ["auditor", "admin_user"])
def test_auditors_and_admins_see_only_their_tenants_rows(cast, events, reader):
    response = admin_client(getattr(cast, reader)).get(CHANGELIST)

    assert response.status_code == 200
    shown = {event.pk for event in response.context["cl"].result_list}
    assert shown == {event.pk for event in events["acme"]}
    assert b"globex" not in response.content.lower()


def test_an_auditor_of_another_tenant_sees_only_that_tenant(cast, events):
    response = admin_client(cast.outsider).get(CHANGELIST)

    assert {event.pk for event in response.context["cl"].result_list} == {event.pk for event in events["globex"]}


def test_filters_in_the_url_cannot_widen_the_rows(cast, events):
    response = admin_client(cast.auditor).get(CHANGELIST, {"tenant__id__exact": cast.globex.pk})

    assert not any(event.tenant_id == cast.globex.pk for event in response.context["cl"].result_list)


def test_a_superuser_sees_every_tenant(events, superuser):
    response = admin_client(superuser).get(CHANGELIST)

    assert response.status_code == 200
    assert {event.pk for event in response.context["cl"].result_list} == {
        event.pk for rows in events.values() for event in rows
    }


@pytest.mark.parametrize("reader", ["owner", "approver"])
def test_staff_without_the_auditor_or_admin_role_cannot_open_the_feed(cast, events, reader):
    client = admin_client(getattr(cast, reader))

    assert client.get(CHANGELIST).status_code == 403
    assert client.get(change_url(events["acme"][0])).status_code == 403


def test_the_feed_is_listed_on_the_index_only_for_those_who_may_read_it(cast, events):
    assert b"Audit events" in admin_client(cast.auditor).get(reverse("admin:index")).content
    assert b"Audit events" not in admin_client(cast.owner).get(reverse("admin:index")).content


@pytest.mark.parametrize("reader", ["auditor", "admin_user", "superuser"])
def test_nobody_can_open_the_add_view(cast, events, superuser, reader):
    user = superuser if reader == "superuser" else getattr(cast, reader)

    assert admin_client(user).get(ADD).status_code == 403
    assert admin_client(user).post(ADD, {"action": "forged", "outcome": "ok"}).status_code == 403


@pytest.mark.parametrize("reader", ["auditor", "admin_user", "superuser"])
def test_nobody_can_delete_a_row(cast, events, superuser, reader):
    user = superuser if reader == "superuser" else getattr(cast, reader)
    event = events["acme"][0]
    client = admin_client(user)

    assert client.get(delete_url(event)).status_code == 403
    assert client.post(delete_url(event), {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


@pytest.mark.parametrize("reader", ["auditor", "superuser"])
def test_the_changelist_offers_no_bulk_actions(cast, events, superuser, reader):
    user = superuser if reader == "superuser" else cast.auditor
    response = admin_client(user).get(CHANGELIST)

    assert response.context["action_form"] is None
    assert b'name="action"' not in response.content
    event = events["acme"][0]
    admin_client(user).post(CHANGELIST, {"action": "delete_selected", "_selected_action": [event.pk]})
    assert AuditEvent.objects.filter(pk=event.pk).exists()


@pytest.mark.parametrize("reader", ["auditor", "superuser"])
def test_the_change_view_shows_the_row_without_a_save_button(cast, events, superuser, reader):
    user = superuser if reader == "superuser" else cast.auditor
    event = events["acme"][0]

    response = admin_client(user).get(change_url(event))

    assert response.status_code == 200
    assert event.hash.encode() in response.content
    assert b'name="_save"' not in response.content
    assert b'name="_continue"' not in response.content


@pytest.mark.parametrize("reader", ["auditor", "superuser"])
def test_a_post_to_the_change_view_is_refused(cast, events, superuser, reader):
    user = superuser if reader == "superuser" else cast.auditor
    event = events["acme"][0]

    response = admin_client(user).post(change_url(event), {"outcome": "denied", "_save": "Save"})

    assert response.status_code == 403
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.outcome, stored.hash) == (event.outcome, event.hash)


def test_another_tenants_row_cannot_be_opened_by_id(cast, events):
    response = admin_client(cast.outsider).get(change_url(events["acme"][0]))

    # The admin answers a row outside the queryset as it answers a missing one.
    assert response.status_code == 302
    assert response.url == reverse("admin:index")


def test_the_changelist_query_count_does_not_grow_with_the_rows(cast, record_events):
    # Compared with itself rather than a fixed number: the sidebar also runs other apps' admin queries.
    client = admin_client(cast.auditor)

    def changelist_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(CHANGELIST).status_code == 200
        return len(queries)

    record_events(scope_of(cast.owner, cast.acme), 2)
    few = changelist_queries()
    record_events(scope_of(cast.owner, cast.acme), 40, prefix="more", action="test.other")

    assert changelist_queries() == few


def test_the_chain_head_is_not_in_the_admin():
    assert not admin.site.is_registered(AuditChainHead)
