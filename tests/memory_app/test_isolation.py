"""Route-level proof on PostgreSQL: an adjacent operator's current and historical rows are neither shown
nor deleted by any route (seed 002), forget-all and erasure included."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memory_app.models import OperatorMemory, OperatorMemoryHistory

pytestmark = pytest.mark.postgres


@pytest.fixture
def neighbours(cast, confirm_write):
    """The teammate (same tenant) and the outsider (other tenant) each hold a corrected note in slot ``lead``."""
    for user, tenant in ((cast.teammate, cast.acme), (cast.outsider, cast.globex)):
        confirm_write("remember", user=user, tenant=tenant, category="preferences", slot="lead", value="their v1")
        confirm_write("correct", user=user, tenant=tenant, category="preferences", slot="lead", value="their v2")
        confirm_write("remember", user=user, tenant=tenant, category="standing_initiative", value="their initiative")


def neighbour_rows(cast) -> tuple[int, int]:
    others = [cast.teammate, cast.outsider]
    return (
        OperatorMemory.objects.filter(operator__in=others).count(),
        OperatorMemoryHistory.objects.filter(operator__in=others).count(),
    )


@pytest.fixture
def owner_client(cast, api_as, confirm_write):
    confirm_write("remember", category="preferences", slot="lead", value="mine v1")
    confirm_write("correct", category="preferences", slot="lead", value="mine v2")
    return api_as(cast.owner)


def test_inspection_shows_none_of_an_adjacent_operators_rows(cast, neighbours, owner_client):
    body = owner_client.get("/api/v1/memory/").json()

    shown = repr(body)
    assert "their" not in shown
    assert [r["value"] for r in body["rows"]] == ["mine v2"]
    assert [h["value"] for h in body["history"]] == ["mine v1"]


def test_the_disclosure_page_shows_none_of_an_adjacent_operators_rows(cast, neighbours, owner_client, browser_as):
    page = browser_as(cast.owner).get("/memory/").content.decode()

    assert "mine v2" in page and "mine v1" in page and "their" not in page


def test_deleting_one_slot_leaves_an_adjacent_operators_same_slot(cast, neighbours, owner_client):
    response = owner_client.delete("/api/v1/memory/?category=preferences&slot=lead")

    assert response.json()["deleted_count"] == 2
    assert neighbour_rows(cast) == (4, 2)


def test_deleting_everything_leaves_adjacent_operators_alone(cast, neighbours, owner_client):
    assert owner_client.delete("/api/v1/memory/?all=true").json()["deleted_count"] == 2
    assert neighbour_rows(cast) == (4, 2)


@pytest.mark.parametrize("data", [{"op": "forget", "category": "preferences", "slot": "lead"}, {"op": "forget_all"}])
def test_forget_cards_leave_adjacent_operators_alone(cast, neighbours, owner_client, data):
    card = owner_client.post("/api/v1/memory/cards/", data, format="json").json()

    result = owner_client.post(f"/api/v1/cards/{card['id']}/confirm/").json()

    assert result["deleted_count"] == 2
    assert neighbour_rows(cast) == (4, 2)


def test_erasure_of_one_operator_leaves_adjacent_operators_alone(cast, neighbours, owner_client):
    call_command("tess_memory_erase", "--username", "owner")

    assert not OperatorMemory.objects.filter(operator=cast.owner).exists()
    assert neighbour_rows(cast) == (4, 2)


def test_another_operator_cannot_confirm_or_see_the_owners_memory_card(cast, neighbours, owner_client, api_as):
    card = owner_client.post("/api/v1/memory/cards/", {"op": "forget_all"}, format="json").json()

    for user, tenant in ((cast.teammate, None), (cast.outsider, cast.globex)):
        client = api_as(user, tenant)
        assert client.post(f"/api/v1/cards/{card['id']}/confirm/").status_code == 404
        assert client.post(f"/api/v1/cards/{card['id']}/dismiss/").status_code == 404
        assert client.get(f"/api/v1/cards/{card['id']}/").status_code == 404
        assert card["id"] not in repr(client.get("/api/v1/cards/").json())
    assert OperatorMemory.objects.filter(operator=cast.owner).count() == 1
    assert neighbour_rows(cast) == (4, 2)
