"""Mos hand-offs in the admin: auditors of the tenant read them; nobody changes them; other tenants see none."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals_app.models import Handoff

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def handoff(cast) -> Handoff:
    return Handoff.objects.create(
        tenant=cast.acme, requester=cast.owner, correlation_id="corr-handoff-admin", summary="review the retry patch"
    )


def test_an_auditor_reads_the_tenants_handoffs_and_finds_them_by_correlation_id(cast, handoff):
    client = client_of(cast.auditor)
    listing = client.get("/admin/approvals_app/handoff/", {"q": "corr-handoff-admin"})
    assert listing.status_code == 200 and "review the retry patch" in listing.content.decode()
    detail = client.get(f"/admin/approvals_app/handoff/{handoff.pk}/change/")
    assert detail.status_code == 200 and 'type="submit" value="Save"' not in detail.content.decode()


def test_nobody_changes_or_deletes_a_handoff_in_the_admin(cast, handoff):
    client = client_of(cast.auditor)
    client.post(f"/admin/approvals_app/handoff/{handoff.pk}/change/", {"summary": "rewritten", "status": "completed"})
    assert client.post(f"/admin/approvals_app/handoff/{handoff.pk}/delete/", {"post": "yes"}).status_code == 403
    handoff.refresh_from_db()
    assert (handoff.summary, handoff.status) == ("review the retry patch", "queued")


def test_another_tenants_auditor_sees_no_handoffs(cast, handoff):
    client = client_of(cast.outsider)
    assert "review the retry patch" not in client.get("/admin/approvals_app/handoff/").content.decode()
    assert client.get(f"/admin/approvals_app/handoff/{handoff.pk}/change/").status_code in (302, 403, 404)
