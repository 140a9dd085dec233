"""The admin: tenant members see their tenant's coding memory; only approvers and admins activate from it."""

from __future__ import annotations

import pytest
from django.test import Client

from memory_app.coding.models import CodingMemoryEntry

CHANGELIST = "/admin/memory_app/codingmemoryentry/"

pytestmark = pytest.mark.django_db


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def activate(client: Client, entry: CodingMemoryEntry):
    return client.post(CHANGELIST, {"action": "activate", "_selected_action": [str(entry.pk)]}, follow=True)


def test_an_approver_activates_from_the_admin(cast, candidate):
    entry = candidate()
    assert activate(admin_client(cast.approver), entry).status_code == 200
    entry.refresh_from_db()
    assert (entry.status, entry.human_verified, entry.reviewer) == ("active", True, "approver")


def test_an_operator_cannot_activate_from_the_admin(cast, candidate):
    entry = candidate()
    response = activate(admin_client(cast.owner), entry)
    assert b"needs a human approver or admin" in response.content
    entry.refresh_from_db()
    assert entry.status == "candidate"


def test_the_outsider_does_not_see_another_tenants_entries(cast, candidate):
    entry = candidate()
    response = admin_client(cast.outsider).get(CHANGELIST)
    assert response.status_code == 200
    assert entry.workspace_key.encode() not in response.content
    assert admin_client(cast.outsider).get(f"{CHANGELIST}{entry.pk}/change/").status_code in (302, 404)
    activate(admin_client(cast.outsider), entry)
    entry.refresh_from_db()
    assert entry.status == "candidate"
