"""GET /api/v1/audit/: the caller's tenant feed, newest first, for auditors and admins only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of

URL = "/api/v1/audit/"


@pytest.fixture
def feeds(cast, record_events):
    """Three acme rows and two globex rows; making API tokens later adds a ``token.issue`` row of its own."""
    record_events(scope_of(cast.owner, cast.acme), 3, prefix="acme")
    record_events(scope_of(cast.outsider, cast.globex), 2, prefix="globex")


def acme_seqs() -> list[int]:
    return list(AuditEvent.objects.filter(tenant__slug="acme").order_by("-seq").values_list("seq", flat=True))


@pytest.mark.parametrize("reader", ["auditor", "admin_user"])
def test_auditors_and_admins_see_only_their_tenants_rows(cast, feeds, api_as, reader):
    response = api_as(getattr(cast, reader)).get(URL)

    assert response.status_code == 200
    rows = response.json()["results"]
    assert [row["seq"] for row in rows] == acme_seqs()
    assert not any(row["target_id"].startswith("globex") for row in rows)
    assert {row["target_id"] for row in rows} >= {"acme-0", "acme-1", "acme-2"}


def test_a_session_in_the_browser_sees_the_same_feed(cast, feeds, browser_as):
    response = browser_as(cast.auditor).get(URL)

    assert response.status_code == 200
    assert [row["seq"] for row in response.json()["results"]] == acme_seqs()


@pytest.mark.parametrize("reader", ["owner", "teammate", "approver"])
def test_it_refuses_members_without_the_auditor_or_admin_role(cast, feeds, api_as, reader):
    response = api_as(getattr(cast, reader)).get(URL)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_an_auditor_of_another_tenant_never_sees_acme_rows(cast, feeds, api_as):
    response = api_as(cast.outsider, cast.globex).get(URL)

    assert response.status_code == 200
    rows = response.json()["results"]
    assert rows and not any(row["target_id"].startswith("acme") for row in rows)
    assert {row["target_id"] for row in rows} >= {"globex-0", "globex-1"}


def test_it_refuses_identity_fields_that_would_pick_another_tenant(cast, feeds, api_as):
    response = api_as(cast.outsider, cast.globex).get(URL, {"tenant": cast.acme.pk})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "identity_field_forbidden"


def test_it_answers_401_without_a_credential(feeds):
    response = APIClient().get(URL)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_it_pages_newest_first_by_cursor(cast, feeds, record_events, api_as) -> None:
    record_events(scope_of(cast.owner, cast.acme), 4, prefix="more")
    client = api_as(cast.auditor)
    seen: list[int] = []
    url: str | None = f"{URL}?page_size=2"
    pages = 0
    while url:
        body = client.get(url).json()
        assert len(body["results"]) <= 2
        seen.extend(row["seq"] for row in body["results"])
        url = body["next"]
        pages += 1

    assert seen == acme_seqs()
    assert len(seen) == 8  # 3 + 4 recorded here, and the token.issue of the auditor's token
    assert pages == 4


def test_it_exposes_no_tenant_or_actor_ids(cast, feeds, api_as):
    row = api_as(cast.auditor).get(URL).json()["results"][0]

    assert "tenant" not in row and "actor" not in row and "id" not in row


@pytest.mark.parametrize("count", [2, 60])
def test_the_list_takes_a_bounded_number_of_queries(cast, record_events, api_as, django_assert_max_num_queries, count):
    record_events(scope_of(cast.owner, cast.acme), count)
    client = api_as(cast.auditor)

    with django_assert_max_num_queries(4):
        response = client.get(URL)

    assert response.status_code == 200
    assert len(response.json()["results"]) == min(count + 1, 50)
