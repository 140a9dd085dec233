"""Operator memory in the Django admin (seed 002): metadata only — never a value, not even to a superuser."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from memory_app.models import OperatorMemory
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


def test_no_admin_page_shows_an_operator_note_not_even_to_a_superuser(cast, client):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose

    scope = scope_of(cast.owner, cast.acme)
    card = memory_propose(scope, data={"op": "remember", "category": "preferences", "value": "lead with sev0"})
    card_confirm(scope=scope, card_id=card.pk)
    assert OperatorMemory.objects.count() == 1
    root = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-1234")
    client.force_login(root)
    for url in ("/admin/", "/admin/memory_app/", "/admin/approvals_app/card/", "/admin/audit/auditevent/"):
        response = client.get(url)
        assert b"lead with sev0" not in response.content, url
    assert client.get(f"/admin/memory_app/operatormemory/{OperatorMemory.objects.get().pk}/change/").status_code == 403


def test_operator_memory_shows_as_metadata_only_to_a_superuser(cast, client):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose

    scope = scope_of(cast.owner, cast.acme)
    data = {"op": "remember", "category": "preferences", "slot": "secret-slot", "value": "lead with sev0"}
    card_confirm(scope=scope, card_id=memory_propose(scope, data=data).pk)
    note = OperatorMemory.objects.get()
    root = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-1234")
    client.force_login(root)
    page = client.get("/admin/memory_app/operatormemory/")
    assert page.status_code == 200
    text = page.content.decode()
    assert str(note.memory_id) in text and "preferences" in text
    assert "lead with sev0" not in text and "secret-slot" not in text
    assert client.get(f"/admin/memory_app/operatormemory/{note.pk}/change/").status_code == 403
    assert client.get("/admin/memory_app/operatormemory/?q=sev0").status_code == 200  # no search box, no oracle


def test_operator_memory_metadata_is_limited_to_tenants_one_audits(cast, client):
    from approvals_app.cards import card_confirm
    from memory_app.services import memory_propose

    scope = scope_of(cast.outsider, cast.globex)
    data = {"op": "remember", "category": "preferences", "value": "globex note"}
    card_confirm(scope=scope, card_id=memory_propose(scope, data=data).pk)
    client.force_login(cast.auditor)
    response = client.get("/admin/memory_app/operatormemory/")
    assert response.status_code == 200 and list(response.context["cl"].queryset) == []
    client.force_login(cast.owner)  # a plain operator audits nothing
    assert client.get("/admin/memory_app/operatormemory/").status_code == 403
