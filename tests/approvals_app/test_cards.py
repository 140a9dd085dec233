"""Confirm cards: owned, single-use, scrubbed once decided, pushed to the owner's /ws/me/."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.db import OperationalError

from approvals_app.cards import CardApplied, card_confirm, card_propose, register_card_handler
from approvals_app.models import Card
from tess_site.errors import Conflict
from tests.conftest import scope_of

LIST = "/api/v1/cards/"


class RecordingHandler:
    """A card kind for these tests: applies by counting, refuses when the payload says so."""

    def __init__(self) -> None:
        self.applied: list[str] = []

    def apply(self, scope: Any, card: Card) -> CardApplied:
        if card.payload.get("refuse"):
            raise Conflict("no", details={"why": "asked"})
        self.applied.append(str(card.pk))
        return CardApplied(response={"outcome": "done", "text": card.payload["text"]}, stored={"outcome": "done"})

    def scrub(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in payload.items() if k != "text"}


@pytest.fixture
def handler() -> RecordingHandler:
    recording = RecordingHandler()
    register_card_handler("testing", recording)
    return recording


@pytest.fixture
def card(cast, handler) -> Card:
    return card_propose(scope=scope_of(cast.owner, cast.acme), kind="testing", payload={"text": "secret words", "n": 1})


def test_the_owner_confirms_a_card_and_gets_the_servers_result(cast, card, handler, api_as):
    response = api_as(cast.owner).post(f"{LIST}{card.pk}/confirm/")

    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == "done" and body["text"] == "secret words"
    assert body["card"]["status"] == "confirmed" and body["card"]["outcome"] == {"outcome": "done"}
    assert handler.applied == [str(card.pk)]


def test_a_decided_card_keeps_ids_and_outcome_but_not_the_text(cast, card, api_as):
    api_as(cast.owner).post(f"{LIST}{card.pk}/confirm/")

    card.refresh_from_db()
    assert card.payload == {"n": 1}
    assert card.decided_at is not None


def test_a_second_confirm_does_nothing_and_says_so(cast, card, handler, api_as):
    client = api_as(cast.owner)
    client.post(f"{LIST}{card.pk}/confirm/")

    again = client.post(f"{LIST}{card.pk}/confirm/")

    assert again.status_code == 409
    assert again.json()["error"]["code"] == "card_already_decided"
    assert again.json()["error"]["details"]["status"] == "confirmed"
    assert len(handler.applied) == 1


def test_a_dismissed_card_is_never_applied_and_its_text_is_scrubbed(cast, card, handler, api_as):
    client = api_as(cast.owner)

    dismissed = client.post(f"{LIST}{card.pk}/dismiss/")
    confirmed = client.post(f"{LIST}{card.pk}/confirm/")

    assert dismissed.status_code == 200 and dismissed.json()["card"]["status"] == "dismissed"
    assert confirmed.status_code == 409
    card.refresh_from_db()
    assert card.payload == {"n": 1} and handler.applied == []


def test_a_handlers_refusal_is_the_confirmed_outcome(cast, handler, api_as):
    refused = card_propose(scope=scope_of(cast.owner, cast.acme), kind="testing", payload={"text": "t", "refuse": True})

    body = api_as(cast.owner).post(f"{LIST}{refused.pk}/confirm/").json()

    assert body["outcome"] == "refused" and body["error"]["code"] == "conflict"
    refused.refresh_from_db()
    assert refused.status == "confirmed" and refused.outcome == {"outcome": "refused", "error": {"code": "conflict"}}


@pytest.mark.parametrize("who", ["teammate", "outsider", "admin_user"])
def test_it_refuses_anyone_but_the_owner_as_if_the_card_did_not_exist(cast, card, handler, api_as, who):
    user = getattr(cast, who)
    client = api_as(user, cast.globex if who == "outsider" else None)

    for response in (
        client.post(f"{LIST}{card.pk}/confirm/"),
        client.post(f"{LIST}{card.pk}/dismiss/"),
        client.get(f"{LIST}{card.pk}/"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert client.get(LIST).json()["results"] == []
    card.refresh_from_db()
    assert card.status == "pending" and handler.applied == []


def test_an_unknown_card_is_not_found(cast, api_as):
    response = api_as(cast.owner).post(f"{LIST}00000000-0000-0000-0000-000000000000/confirm/")

    assert response.status_code == 404


def test_the_list_holds_only_your_cards_newest_first_and_filters_by_status(cast, handler, api_as):
    owner = scope_of(cast.owner, cast.acme)
    mine = [card_propose(scope=owner, kind="testing", payload={"text": "t", "i": i}) for i in range(3)]
    card_propose(scope=scope_of(cast.teammate, cast.acme), kind="testing", payload={"text": "t"})
    card_confirm(scope=owner, card_id=mine[0].pk)
    client = api_as(cast.owner)

    everything = client.get(LIST).json()["results"]
    pending = client.get(LIST, {"status": "pending"}).json()["results"]

    assert [c["id"] for c in everything] == [str(c.pk) for c in reversed(mine)]
    assert [c["id"] for c in pending] == [str(mine[2].pk), str(mine[1].pk)]


@pytest.mark.parametrize("count", [1, 20])
def test_the_list_takes_a_bounded_number_of_queries(cast, handler, api_as, django_assert_max_num_queries, count):
    owner = scope_of(cast.owner, cast.acme)
    for i in range(count):
        card_propose(scope=owner, kind="testing", payload={"text": "t", "i": i})
    client = api_as(cast.owner)

    with django_assert_max_num_queries(4):
        assert len(client.get(LIST).json()["results"]) == count


def test_card_changes_are_pushed_to_the_owners_socket_with_ids_and_status_only(cast, handler, api_as):
    with mock.patch("approvals_app.cards.notify_user_on_commit") as notify:
        card = card_propose(scope=scope_of(cast.owner, cast.acme), kind="testing", payload={"text": "secret words"})
        api_as(cast.owner).post(f"{LIST}{card.pk}/confirm/")

    bodies = [call.kwargs for call in notify.call_args_list]
    assert [b["body"]["status"] for b in bodies] == ["pending", "confirmed"]
    assert all(b["user_id"] == cast.owner.pk and b["tenant_id"] == cast.acme.pk and b["kind"] == "card" for b in bodies)
    assert all(set(b["body"]) == {"id", "kind", "status"} for b in bodies)


def test_a_card_proposed_in_a_session_carries_its_id(cast, handler):
    scope = scope_of(cast.owner, cast.acme).for_session("sess-42")

    assert card_propose(scope=scope, kind="testing", payload={"text": "t"}).session_id == "sess-42"


def test_a_database_error_is_a_retryable_503(cast, card, api_as):
    with mock.patch("approvals_app.api.card_views.cards_visible", side_effect=OperationalError("gone")):
        listed = api_as(cast.owner).get(LIST)
    with mock.patch("approvals_app.cards.Card.objects.get", side_effect=OperationalError("gone")):
        confirmed = api_as(cast.owner).post(f"{LIST}{card.pk}/confirm/")

    for response in (listed, confirmed):
        assert response.status_code == 503 and response["Retry-After"] == "2"
        assert response.json()["error"]["code"] == "unavailable"
    card.refresh_from_db()
    assert card.status == "pending"
