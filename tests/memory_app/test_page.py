"""The Memory disclosure page: everything seed 002 asks it to show, and its actions behind a confirmation."""

from __future__ import annotations

import re

import pytest

from approvals_app.models import Card
from memory_app.models import OperatorMemory
from tests.conftest import csrf_token

PAGE = "/memory/"


def visible(html: str) -> str:
    """The page's text as a reader sees it: tags and their attributes (hidden form values) left out."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture
def page_client(cast, browser_as, remember, confirm_write):
    remember("lead with sev0", slot="lead")
    confirm_write("correct", category="preferences", slot="lead", value="lead with sev1")
    client = browser_as(cast.owner)
    client.token = csrf_token(client)
    return client


def post(client, url, data=None):
    return client.post(url, {**(data or {}), "csrfmiddlewaretoken": client.token})


def test_the_page_is_linked_from_every_admin_page(cast, browser_as):
    page = browser_as(cast.owner).get("/admin/").content.decode()
    assert '<a href="/memory/">Your memory</a>' in page


def test_anonymous_visitors_are_sent_to_the_admin_login(client):
    response = client.get(PAGE)

    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_page_says_in_words_what_each_category_is_for_and_how_long_it_lasts(cast, page_client):
    page = page_client.get(PAGE).content.decode()

    assert "Memory: Operator profile" in page
    for text in (
        "Preferences",
        "Up to 12 notes, kept until you delete them.",
        "Current focus",
        "One note, used for 30 days after you last confirm it.",
        "Pinned items",
        "Up to 8 notes; each is used for 14 days after you last confirm it.",
        "at most 8 of your notes (4096 characters)",
    ):
        assert text in page
    text = visible(page)
    for api_talk in ("/api/v1/", "DELETE ", "all=true", "manage.py", "standing_initiative", "pinned_contexts"):
        assert api_talk not in text


def test_internals_are_only_in_a_collapsed_details_line(cast, page_client):
    row = OperatorMemory.objects.get()
    page = page_client.get(PAGE).content.decode()
    details = page.index('<details class="tess-details-line">')
    before, inside = visible(page[:details]), page[details : page.index("</details>", details)]
    for internal in (str(row.memory_id), "salience", row.card_ref, row.source_ref):
        assert internal not in before and internal in inside
    assert "<details open" not in page


def test_dates_are_machine_readable_for_the_local_time_script(cast, page_client):
    row = OperatorMemory.objects.get()
    page = page_client.get(PAGE).content.decode()
    assert f'<time datetime="{row.reauthorized_at.isoformat()}">' in page
    assert "tess/local-time.js" in page and "<script>" not in page


def test_the_page_shows_every_current_row_with_provenance_and_the_superseded_history(cast, page_client):
    row = OperatorMemory.objects.get()
    page = page_client.get(PAGE).content.decode()

    assert "lead with sev1" in page and str(row.memory_id) in page
    assert "predecessor: revision 1" in page and row.card_ref in page and row.source_ref in page
    assert "Not used in a reply yet." in page and "Kept until you delete it." in page
    history = page[page.index('class="tess-memory-history"') :]
    assert "successor revision 2" in history and "lead with sev0" in history


def test_an_action_parks_a_card_and_asks_for_confirmation_before_anything_changes(cast, page_client):
    response = post(page_client, "/memory/propose/", {"op": "forget", "category": "preferences", "slot": "lead"})

    card = Card.objects.get(status="pending")
    assert response.status_code == 302 and response["Location"] == f"/memory/cards/{card.pk}/"
    confirm_page = page_client.get(response["Location"]).content.decode()
    assert "Delete your note in preferences, with every superseded revision of it." in confirm_page
    assert '<input type="submit" class="default" value="Confirm">' in confirm_page
    assert OperatorMemory.objects.exists()


def test_confirming_on_the_page_shows_the_servers_result(cast, page_client):
    post(page_client, "/memory/propose/", {"op": "forget_all"})
    card = Card.objects.get(status="pending")

    result = post(page_client, f"/memory/cards/{card.pk}/confirm/").content.decode()

    assert re.search(r'data-outcome="deleted"', result) and "Deleted 2 notes, superseded revisions counted." in result
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
