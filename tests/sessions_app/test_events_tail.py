"""A stream opened at its tail: the last events without a cursor, and pages backwards from there."""

from __future__ import annotations

import pytest

from sessions_app import services
from sessions_app.stream import EventKind, system_body
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(cast):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    for i in range(1, 11):
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=f"line {i}"))
    return session


def events_url(session):
    return f"/api/v1/sessions/{session.pk}/events/"


def texts(page):
    return [e["body"]["text"] for e in page["events"]]


def test_tail_returns_the_last_events_oldest_first_and_follows_on_from_the_end(cast, api_as, session):
    client = api_as(cast.owner)
    page = client.get(events_url(session), {"tail": 3}).json()
    assert [e["seq"] for e in page["events"]] == [8, 9, 10]
    assert texts(page) == ["line 8", "line 9", "line 10"]
    assert page["next_cursor"] == 10 and page["last_seq"] == 10
    assert page["prev_cursor"] == 8
    services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text="line 11"))
    after = client.get(events_url(session), {"cursor": page["next_cursor"]}).json()
    assert texts(after) == ["line 11"]


def test_before_pages_backwards_to_the_first_event(cast, api_as, session):
    client = api_as(cast.owner)
    page = client.get(events_url(session), {"tail": 4}).json()
    seen = [page["events"]]
    while page["prev_cursor"] is not None:
        page = client.get(events_url(session), {"before": page["prev_cursor"], "limit": 4}).json()
        seen.insert(0, page["events"])
    assert [[e["seq"] for e in chunk] for chunk in seen] == [[1, 2], [3, 4, 5, 6], [7, 8, 9, 10]]


def test_a_tail_longer_than_the_stream_is_the_whole_stream(cast, api_as, session):
    page = api_as(cast.owner).get(events_url(session), {"tail": 500}).json()
    assert [e["seq"] for e in page["events"]] == list(range(1, 11))
    assert page["prev_cursor"] is None


def test_an_empty_stream_tails_to_nothing_and_follows_from_zero(cast, api_as):
    empty = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    page = api_as(cast.owner).get(events_url(empty), {"tail": 5}).json()
    assert page["events"] == [] and page["next_cursor"] == 0 and page["prev_cursor"] is None


@pytest.mark.parametrize(
    "params",
    [{"tail": 0}, {"tail": 1001}, {"before": 0}, {"tail": 2, "cursor": 1}, {"before": 5, "cursor": 1}],
)
def test_malformed_or_mixed_pages_are_refused(cast, api_as, session, params):
    response = api_as(cast.owner).get(events_url(session), params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


@pytest.mark.parametrize("who", ["teammate", "outsider"])
@pytest.mark.parametrize("params", [{"tail": 5}, {"before": 5, "limit": 3}])
def test_backwards_pages_keep_the_read_rule(cast, api_as, session, who, params):
    user = getattr(cast, who)
    client = api_as(user, cast.globex if who == "outsider" else cast.acme)
    response = client.get(events_url(session), params)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "line" not in response.content.decode()
