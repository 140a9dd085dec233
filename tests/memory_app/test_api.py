"""The memory REST API: inspect, propose, confirm through the generic cards, and the direct privacy route."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError
from django.test import override_settings

from memory_app.models import MemorySwitch, OperatorMemory, OperatorMemoryHistory

URL = "/api/v1/memory/"
CARDS = "/api/v1/memory/cards/"


def propose_and_confirm(client, **data):
    card = client.post(CARDS, data, format="json")
    assert card.status_code == 201, card.json()
    return client.post(f"/api/v1/cards/{card.json()['id']}/confirm/")


def test_a_proposal_returns_a_pending_card_and_changes_nothing(cast, api_as):
    response = api_as(cast.owner).post(
        CARDS, {"op": "remember", "category": "preferences", "value": "lead with sev0"}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending" and body["kind"] == "memory" and body["id"]
    assert body["payload"]["value"] == "lead with sev0"
    assert not OperatorMemory.objects.exists()


def test_confirming_returns_the_servers_result(cast, api_as):
    response = propose_and_confirm(
        api_as(cast.owner), op="remember", category="preferences", slot="lead", value="lead with sev0"
    )

    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == "created" and body["deleted_count"] == 0 and body["error"] is None
    assert body["row"]["value"] == "lead with sev0" and body["row"]["revision"] == 1 and body["row"]["active"]
    assert body["card"]["status"] == "confirmed"
    assert "value" not in body["card"]["payload"]


def test_a_refusal_is_the_confirmed_outcome_with_its_code(cast, api_as):
    client = api_as(cast.owner)
    propose_and_confirm(client, op="remember", category="preferences", slot="lead", value="lead with sev0")

    response = propose_and_confirm(client, op="remember", category="preferences", slot="lead", value="other")

    assert response.status_code == 200
    assert response.json()["outcome"] == "refused"
    assert response.json()["error"]["code"] == "slot_in_use"


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"op": "remember", "category": "preferences", "value": "mail ana@example.com"}, "member_data_refused"),
        ({"op": "remember", "category": "nope", "value": "x"}, "validation_error"),
        ({"op": "forget", "slot": "lead"}, "ambiguous_shape"),
        ({"op": "forget", "category": "preferences"}, "ambiguous_shape"),
        ({"op": "explode"}, "validation_error"),
    ],
)
def test_proposals_are_validated_early(cast, api_as, data, code):
    response = api_as(cast.owner).post(CARDS, data, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("field", ["operator", "owner", "subject", "user_id"])
def test_no_route_accepts_a_subject(cast, api_as, field):
    client = api_as(cast.owner)

    assert client.get(URL, {field: cast.teammate.pk}).status_code == 400
    assert client.delete(f"{URL}?all=true&{field}={cast.teammate.pk}").status_code == 400
    response = client.post(CARDS, {"op": "forget_all", field: cast.teammate.pk}, format="json")
    assert response.json()["error"]["code"] == "identity_field_forbidden"


def test_inspection_shows_scope_policy_rows_with_provenance_and_history(cast, api_as):
    client = api_as(cast.owner)
    propose_and_confirm(client, op="remember", category="preferences", slot="lead", value="lead with sev0")
    propose_and_confirm(client, op="correct", category="preferences", slot="lead", value="lead with sev1")

    body = client.get(URL).json()

    assert (body["memory_scope"], body["served"]) == ("profile", True)
    policy = {c["category"]: c for c in body["categories"]}
    assert policy["preferences"]["ceiling"] == 12 and policy["preferences"]["retention_days"] is None
    assert policy["standing_initiative"]["retention_days"] == 30 and policy["pinned_contexts"]["ceiling"] == 8
    assert body["prompt_ceilings"] == {"rows": 8, "characters": 4096}
    assert "tess_memory_erase" in body["erasure"]["administrators"]
    [row] = body["rows"]
    assert row["value"] == "lead with sev1" and row["revision"] == 2 and row["predecessor_revision"] == 1
    for key in ("source_ref", "card_ref", "confirmed_at", "reauthorized_ref", "reauthorized_at", "expires_at"):
        assert key in row
    assert row["active"] is True and row["last_used_at"] is None
    [old] = body["history"]
    assert (old["value"], old["revision"], old["successor_revision"]) == ("lead with sev0", 1, 2)


def test_inspection_flags_expired_rows(cast, api_as):
    from datetime import timedelta

    from django.utils import timezone

    client = api_as(cast.owner)
    propose_and_confirm(client, op="remember", category="standing_initiative", value="Phase 5")
    OperatorMemory.objects.update(expires_at=timezone.now() - timedelta(days=1))

    assert client.get(URL).json()["rows"][0]["active"] is False


def test_inspection_takes_a_bounded_number_of_queries(cast, api_as, django_assert_max_num_queries):
    client = api_as(cast.owner)
    for i in range(6):
        propose_and_confirm(client, op="remember", category="preferences", slot=f"s{i}", value=f"note {i}")
        propose_and_confirm(client, op="correct", category="preferences", slot=f"s{i}", value=f"note {i} fixed")
    with django_assert_max_num_queries(8):
        assert client.get(URL).status_code == 200


@pytest.mark.parametrize(
    "query",
    ["", "?slot=lead", "?category=preferences", "?all=true&category=preferences", "?all=true&slot=lead"],
)
def test_the_direct_route_rejects_ambiguous_shapes(cast, api_as, query):
    response = api_as(cast.owner).delete(f"{URL}{query}")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "ambiguous_shape"


def test_the_direct_route_deletes_one_row_and_its_lineage_with_the_count(cast, api_as):
    client = api_as(cast.owner)
    propose_and_confirm(client, op="remember", category="preferences", slot="lead", value="lead with sev0")
    propose_and_confirm(client, op="correct", category="preferences", slot="lead", value="lead with sev1")
    propose_and_confirm(client, op="remember", category="preferences", slot="keep", value="keep me")

    response = client.delete(f"{URL}?category=preferences&slot=lead")

    assert response.json() == {"outcome": "deleted", "deleted_count": 2, "redacted_count": 0}
    assert list(OperatorMemory.objects.values_list("slot", flat=True)) == ["keep"]
    assert client.delete(f"{URL}?category=preferences&slot=lead").json()["deleted_count"] == 0


def test_the_direct_route_deletes_everything_with_the_count(cast, api_as):
    client = api_as(cast.owner)
    propose_and_confirm(client, op="remember", category="preferences", slot="lead", value="lead with sev0")
    propose_and_confirm(client, op="correct", category="preferences", slot="lead", value="lead with sev1")

    assert client.delete(f"{URL}?all=true").json() == {"outcome": "deleted", "deleted_count": 2, "redacted_count": 0}
    assert not OperatorMemory.objects.exists() and not OperatorMemoryHistory.objects.exists()


def test_a_database_error_is_a_retryable_503_never_an_empty_memory(cast, api_as):
    client = api_as(cast.owner)
    propose_and_confirm(client, op="remember", category="preferences", value="lead with sev0")

    with mock.patch("memory_app.selectors.current_rows", side_effect=OperationalError("connection reset")):
        response = client.get(URL)

    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "memory_unavailable"


def test_a_database_error_while_confirming_is_a_503_and_the_card_stays_pending(cast, api_as):
    client = api_as(cast.owner)
    card = client.post(CARDS, {"op": "remember", "category": "preferences", "value": "x y"}, format="json").json()

    with mock.patch("memory_app.services.current_rows", side_effect=OperationalError("server closed")):
        response = client.post(f"/api/v1/cards/{card['id']}/confirm/")

    assert response.status_code == 503 and response["Retry-After"] == "2"
    assert client.get(f"/api/v1/cards/{card['id']}/").json()["status"] == "pending"
    assert (
        propose_and_confirm(client, op="remember", category="preferences", value="x z").json()["outcome"] == "created"
    )


@override_settings(TESS_OPERATOR_MEMORY=False)
def test_with_the_environment_switch_off_nothing_is_read_or_written(cast, api_as):
    client = api_as(cast.owner)

    body = client.get(URL).json()
    proposal = client.post(CARDS, {"op": "remember", "category": "preferences", "value": "x"}, format="json")

    assert (body["memory_scope"], body["served"], body["rows"]) == ("session", False, [])
    assert proposal.status_code == 409 and proposal.json()["error"]["code"] == "memory_off"


def test_the_runtime_switch_applies_on_the_next_request_and_refuses_pending_cards(cast, api_as):
    client = api_as(cast.owner)
    card = client.post(CARDS, {"op": "remember", "category": "preferences", "value": "x y"}, format="json").json()
    MemorySwitch.objects.create(enabled=False)

    confirmed = client.post(f"/api/v1/cards/{card['id']}/confirm/").json()

    assert confirmed["outcome"] == "refused" and confirmed["error"]["code"] == "memory_off"
    assert client.get(URL).json()["memory_scope"] == "session"
    assert not OperatorMemory.objects.exists()
