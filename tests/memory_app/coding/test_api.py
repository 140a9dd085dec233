"""Reviewed coding memory over the API: members read, operators write, approvers and admins decide and export."""

from __future__ import annotations

import json

import pytest

from memory_app.coding.models import CodingMemoryEntry, CodingMemoryExport

from .conftest import WORKSPACE

URL = "/api/v1/coding-memory/"
BODY = {
    "workspace_key": WORKSPACE,
    "kind": "command",
    "statement": "Run make check before pushing.",
    "evidence": "CI config",
    "tags": ["ci"],
}


def test_an_operator_writes_a_candidate(cast, api_as):
    response = api_as(cast.owner).post(URL, BODY, format="json")
    assert response.status_code == 201
    assert response.json()["status"] == "candidate"
    assert response.json()["origin"] == "operator"


def test_a_status_in_the_body_is_ignored(cast, api_as):
    response = api_as(cast.owner).post(URL, {**BODY, "status": "active", "human_verified": True}, format="json")
    assert response.status_code == 201
    assert (response.json()["status"], response.json()["human_verified"]) == ("candidate", False)


def test_members_list_their_tenants_entries(cast, api_as, candidate, django_assert_max_num_queries):
    for _ in range(5):
        candidate()
    client = api_as(cast.auditor)
    with django_assert_max_num_queries(6):
        response = client.get(URL, {"workspace": WORKSPACE})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 5


def test_it_refuses_outsiders(cast, api_as, candidate):
    entry = candidate()
    client = api_as(cast.outsider, cast.globex)
    assert client.get(URL).json()["results"] == []
    assert client.get(f"{URL}{entry.pk}/").status_code == 404
    assert client.post(f"{URL}{entry.pk}/apply/", {"rationale": "x"}, format="json").status_code == 404
    assert client.post(f"{URL}{entry.pk}/review-requests/", {}, format="json").status_code == 404


def test_the_detail_shows_the_review_records(cast, api_as, candidate):
    entry = candidate()
    api_as(cast.owner).post(f"{URL}{entry.pk}/review-requests/", {"note": "please"}, format="json")
    api_as(cast.approver).post(f"{URL}{entry.pk}/apply/", {"rationale": "checked"}, format="json")
    body = api_as(cast.teammate).get(f"{URL}{entry.pk}/").json()
    assert [(r["action"], r["reviewer"]) for r in body["reviews"]] == [("request", "owner"), ("apply", "approver")]


def test_an_approver_applies_and_rejects(cast, api_as, candidate):
    client = api_as(cast.approver)
    applied = client.post(f"{URL}{candidate().pk}/apply/", {"rationale": "verified"}, format="json")
    assert applied.status_code == 200 and applied.json()["status"] == "active"
    rejected = client.post(f"{URL}{candidate().pk}/reject/", {"rationale": "wrong"}, format="json")
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    retired = client.post(f"{URL}{applied.json()['id']}/retire/", {"rationale": "obsolete"}, format="json")
    assert retired.json()["status"] == "retired"


@pytest.mark.parametrize("who", ["owner", "teammate", "auditor"])
def test_it_refuses_decisions_without_the_reviewer_role(cast, api_as, candidate, who):
    entry = candidate()
    response = api_as(getattr(cast, who)).post(f"{URL}{entry.pk}/apply/", {"rationale": "ok"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "coding_memory_reviewer_required"
    entry.refresh_from_db()
    assert entry.status == CodingMemoryEntry.Status.CANDIDATE


def test_the_export_downloads_json_lines(cast, api_as, active):
    entry = active()
    response = api_as(cast.approver).post(f"{URL}export/", {"workspace": WORKSPACE}, format="json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    [line] = response.content.decode().splitlines()
    assert json.loads(line)["memoryId"] == str(entry.pk)
    assert response["X-Export-Id"] == str(CodingMemoryExport.objects.get().pk)


@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_it_refuses_exports_to_operators(cast, api_as, active, who):
    active()
    response = api_as(getattr(cast, who)).post(f"{URL}export/", {"workspace": WORKSPACE}, format="json")
    assert response.status_code == 403
    assert not CodingMemoryExport.objects.exists()


def test_an_outsiders_export_holds_nothing_of_another_tenant(cast, api_as, active):
    active()
    # The outsider is an admin of globex: exporting the same key there finds none of acme's entries.
    response = api_as(cast.outsider, cast.globex).post(f"{URL}export/", {"workspace": WORKSPACE}, format="json")
    assert response.status_code == 200
    assert response.content == b""
    assert not CodingMemoryExport.objects.filter(tenant=cast.acme).exists()
