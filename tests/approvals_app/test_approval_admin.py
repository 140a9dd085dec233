"""Approvals in the Django admin: read-only, and only for the tenants the person audits."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:approvals_app_approval_changelist")


def admin_client(user):
    client = Client()
    client.force_login(user)
    return client


def test_auditors_of_the_tenant_read_approvals_and_change_nothing(mailed, request_touch):
    approval = request_touch(reason="clear the backlog")
    client = admin_client(mailed.auditor)
    listing = client.get(CHANGELIST)
    assert listing.status_code == 200 and b"document:doc-1" in listing.content
    change = reverse("admin:approvals_app_approval_change", args=[approval.pk])
    page = client.get(change)
    assert page.status_code == 200 and b"clear the backlog" in page.content
    assert b'name="_save"' not in page.content
    assert client.post(change, {"status": "approved"}).status_code == 403
    assert client.get(reverse("admin:approvals_app_approval_add")).status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_people_of_another_tenant_see_no_approvals(mailed, request_touch):
    approval = request_touch()
    client = admin_client(mailed.outsider)
    listing = client.get(CHANGELIST)
    assert b"document:doc-1" not in listing.content
    change = reverse("admin:approvals_app_approval_change", args=[approval.pk])
    response = client.get(change)
    assert response.status_code == 302 and response["Location"] == reverse("admin:index")  # "does not exist"
