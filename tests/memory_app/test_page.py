"""The Memory disclosure page: everything seed 002 asks it to show, and its actions behind a confirmation."""

from __future__ import annotations

import re

import pytest

from approvals_app.models import Card
from memory_app.models import OperatorMemory
from tests.conftest import csrf_token

PAGE = "/memory/"


@pytest.fixture
def page_client(cast, browser_as, remember, confirm_write):
    remember("lead with sev0", slot="lead")
    confirm_write("correct", category="preferences", slot="lead", value="lead with sev1")
    client = browser_as(cast.owner)
    client.token = csrf_token(client)
    return client


def post(client, url, data=None):
    return client.post(url, {**(data or {}), "csrfmiddlewaretoken": client.token})


def test_anonymous_visitors_are_sent_to_the_admin_login(client):
    response = client.get(PAGE)

    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_page_shows_scope_policy_ceilings_and_where_erasure_lives(cast, page_client):
    page = page_client.get(PAGE).content.decode()

    assert "Memory: Operator profile" in page
    for text in ("preferences", "standing_initiative", "pinned_contexts", "12 slots", "30 days", "14 days"):
        assert text in page
    assert "at most 8 active notes and 4096 characters" in page
    assert "tess_memory_erase" in page and "all=true" in page


def test_the_page_shows_every_current_row_with_provenance_and_the_superseded_history(cast, page_client):
    row = OperatorMemory.objects.get()
    page = page_client.get(PAGE).content.decode()

    assert "lead with sev1" in page and str(row.memory_id) in page
    assert "predecessor: revision 1" in page and row.card_ref in page and row.source_ref in page
    assert "last used in a prompt" in page and "active" in page
    history = page[page.index('class="tess-memory-history"') :]
    assert "<details" in page[: page.index('class="tess-memory-history"') + 30]
    assert "successor revision 2" in history and "lead with sev0" in history


def test_an_action_parks_a_card_and_asks_for_confirmation_before_anything_changes(cast, page_client):
    response = post(page_client, "/memory/propose/", {"op": "forget", "category": "preferences", "slot": "lead"})

    card = Card.objects.get(status="pending")
    assert response.status_code == 302 and response["Location"] == f"/memory/cards/{card.pk}/"
    confirm_page = page_client.get(response["Location"]).content.decode()
    assert "every superseded revision" in confirm_page and "Confirm" in confirm_page
    assert OperatorMemory.objects.exists()


def test_confirming_on_the_page_shows_the_servers_result(cast, page_client):
    post(page_client, "/memory/propose/", {"op": "forget_all"})
    card = Card.objects.get(status="pending")

    result = post(page_client, f"/memory/cards/{card.pk}/confirm/").content.decode()

    assert re.search(r'data-outcome="deleted"', result) and "2 rows deleted" in result
    assert not OperatorMemory.objects.exists()


def test_correct_and_reauthorize_work_from_the_page(cast, page_client):
    post(page_client, "/memory/propose/", {"op": "correct", "category": "preferences", "slot": "lead", "value": "v3"})
    post(page_client, f"/memory/cards/{Card.objects.get(status='pending').pk}/confirm/")
    post(page_client, "/memory/propose/", {"op": "reauthorize", "category": "preferences", "slot": "lead"})
    result = post(page_client, f"/memory/cards/{Card.objects.get(status='pending').pk}/confirm/").content.decode()

    row = OperatorMemory.objects.get()
    assert (row.value, row.revision) == ("v3", 3)
    assert 'data-outcome="reauthorized"' in result


def test_dismissing_on_the_page_changes_nothing(cast, page_client):
    post(page_client, "/memory/propose/", {"op": "forget_all"})

    post(page_client, f"/memory/cards/{Card.objects.get(status='pending').pk}/dismiss/")

    assert OperatorMemory.objects.count() == 1


def test_a_refused_proposal_is_shown_with_its_code(cast, page_client):
    response = post(page_client, "/memory/propose/", {"op": "remember", "category": "preferences", "value": "a@b.io"})

    assert response.status_code == 400
    assert 'data-error-code="member_data_refused"' in response.content.decode()


def test_another_operators_card_page_is_not_found(cast, page_client, browser_as):
    post(page_client, "/memory/propose/", {"op": "forget_all"})
    card = Card.objects.get(status="pending")
    teammate = browser_as(cast.teammate)
    teammate.token = csrf_token(teammate)

    assert teammate.get(f"/memory/cards/{card.pk}/").status_code == 404
    assert post(teammate, f"/memory/cards/{card.pk}/confirm/").status_code == 404
    assert OperatorMemory.objects.count() == 1


def test_the_page_answers_503_with_retry_after_when_the_database_fails(cast, page_client):
    from unittest import mock

    from django.db import OperationalError

    with mock.patch("memory_app.selectors.current_rows", side_effect=OperationalError("gone")):
        response = page_client.get(PAGE)

    assert response.status_code == 503 and response["Retry-After"] == "2"
