"""``GET /api/v1/approvals/`` and ``/approvals/{id}/``: what you requested or may decide; others get 404."""

from __future__ import annotations

import uuid

import pytest

from tests.approvals_app.approval_fixtures import approver2, token_of

pytestmark = pytest.mark.django_db


def test_the_requester_and_the_approvers_see_the_request(mailed, request_touch, api_as):
    approval = request_touch()
    for user, may_decide in ((mailed.owner, False), (mailed.approver, True), (approver2(), True)):
        body = api_as(user).get("/api/v1/approvals/").json()["results"]
        assert [(a["id"], a["may_decide"]) for a in body] == [(str(approval.pk), may_decide)]
        detail = api_as(user).get(f"/api/v1/approvals/{approval.pk}/")
        assert detail.status_code == 200
        assert detail.json()["action"] == "test.touch" and detail.json()["status"] == "pending"
    assert token_of(mailed.approver) not in str(api_as(mailed.approver).get("/api/v1/approvals/").json())


@pytest.mark.parametrize("who", ["teammate", "auditor", "outsider"])
def test_anyone_else_sees_nothing_and_gets_404(mailed, request_touch, api_as, who):
    approval = request_touch()
    client = api_as(getattr(mailed, who), mailed.globex if who == "outsider" else None)
    assert client.get("/api/v1/approvals/").json()["results"] == []
    response = client.get(f"/api/v1/approvals/{approval.pk}/")
    assert response.status_code == 404
    unknown = client.get(f"/api/v1/approvals/{uuid.uuid4()}/")
    assert unknown.status_code == 404
    assert response.json()["error"]["code"] == unknown.json()["error"]["code"] == "not_found"


def test_a_malformed_id_is_404(mailed, api_as):
    assert api_as(mailed.owner).get("/api/v1/approvals/not-a-uuid/").status_code == 404


def test_the_list_is_read_only_and_filters_by_status(
    mailed, request_touch, api_as, executed, django_capture_on_commit_callbacks
):
    from approvals_app.decisions import approval_decide
    from tests.conftest import scope_of

    first, second = request_touch(target_id="doc-1"), request_touch(target_id="doc-2")
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(scope_of(mailed.approver, mailed.acme), token=_token_for(first), approve=True)
    client = api_as(mailed.owner)
    pending = client.get("/api/v1/approvals/?status=pending").json()["results"]
    approved = client.get("/api/v1/approvals/?status=approved").json()["results"]
    assert [a["id"] for a in pending] == [str(second.pk)]
    assert [(a["id"], a["execution"], a["result"]) for a in approved] == [
        (str(first.pk), "executed", {"touched": "doc-1"})
    ]
    assert client.post("/api/v1/approvals/", {}, format="json").status_code == 405
    assert client.get("/api/v1/approvals/?status=bogus").status_code == 400


def _token_for(approval):
    from django.core import mail

    from tests.approvals_app.approval_fixtures import LINK_RE

    for message in mail.outbox:
        if message.to == ["approver@example.test"] and approval.target_id in message.subject:
            return LINK_RE.findall(str(message.body))[0]
    raise AssertionError("no mail for that approval")


def test_the_list_answers_in_few_queries(mailed, request_touch, api_as, django_assert_max_num_queries):
    for i in range(5):
        request_touch(target_id=f"doc-{i}")
    client = api_as(mailed.approver)
    with django_assert_max_num_queries(6):
        response = client.get("/api/v1/approvals/")
    assert len(response.json()["results"]) == 5
