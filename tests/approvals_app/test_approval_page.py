"""The one-time link page: GET shows and changes nothing; POST by the bound approver decides; every refusal."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from approvals_app.models import Approval, ApprovalExecution, ApprovalLink
from tess_site.audit.models import AuditEvent
from tests.approvals_app.approval_fixtures import approver2, token_of
from tests.conftest import csrf_token

pytestmark = pytest.mark.django_db


def page(token: str) -> str:
    return f"/approvals/{token}/"


def unchanged(approval: Approval) -> bool:
    """Nothing about the request or its links moved."""
    fresh = Approval.objects.get(pk=approval.pk)
    return (
        fresh.status == "pending"
        and fresh.decided_at is None
        and not ApprovalLink.objects.filter(approval=approval, used_at__isnull=False).exists()
        and not ApprovalExecution.objects.exists()
    )


def decide(client: Any, token: str, capture: Any, decision: str = "approve", reason: str = "") -> Any:
    data = {"decision": decision, "reason": reason, "csrfmiddlewaretoken": csrf_token(client)}
    with capture(execute=True):
        return client.post(page(token), data)


def test_get_shows_exactly_what_will_happen_and_changes_nothing(mailed, request_touch, browser_as):
    approval = request_touch(parameters={"mode": "gentle", "count": 2}, reason="clear the backlog")
    token = token_of(mailed.approver)
    response = browser_as(mailed.approver).get(page(token))
    assert response.status_code == 200
    html = response.content.decode()
    for shown in ("test.touch", "document doc-1", "&quot;count&quot;: 2", "owner", "clear the backlog"):
        assert shown in html
    assert 'id="tess-approval-countdown"' in html and approval.expires_at.isoformat() in html
    # The countdown is a static file (the Content-Security-Policy runs no inline script); it only displays.
    assert "<script>" not in html and "tess/approval-countdown.js" in html
    countdown = (settings.BASE_DIR / "static" / "tess" / "approval-countdown.js").read_text()
    for effect in (".submit", "fetch(", "XMLHttpRequest", "location"):
        assert effect not in countdown
    assert response["Referrer-Policy"] == "no-referrer"
    assert "no-store" in response["Cache-Control"]
    assert unchanged(approval)
    assert AuditEvent.objects.filter(action="approval.viewed").count() == 1


def test_anonymous_visitors_are_sent_to_log_in_and_back(mailed, request_touch):
    approval = request_touch()
    token = token_of(mailed.approver)
    client = Client()
    for response in (client.get(page(token)), client.post(page(token), {"decision": "approve"})):
        assert response.status_code == 302
        assert response["Location"] == f"/admin/login/?next=/approvals/{token}/"
    assert unchanged(approval)
    assert not AuditEvent.objects.filter(action="approval.viewed").exists()


def test_the_bound_approver_approves_with_session_and_csrf(
    mailed, request_touch, browser_as, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    response = decide(browser_as(mailed.approver), token_of(mailed.approver), django_capture_on_commit_callbacks)
    assert response.status_code == 200 and b'data-status="approved"' in response.content
    assert response["Referrer-Policy"] == "no-referrer"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.execution) == ("approved", mailed.approver, "executed")
    assert executed.calls == [str(approval.pk)]


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(mailed, request_touch, browser_as):
    approval = request_touch()
    response = browser_as(mailed.approver).post(page(token_of(mailed.approver)), {"decision": "approve"})
    assert response.status_code == 403
    assert unchanged(approval)


def test_denying_needs_a_reason(mailed, request_touch, browser_as, executed, django_capture_on_commit_callbacks):
    approval = request_touch()
    client, token = browser_as(mailed.approver), token_of(mailed.approver)
    refused = decide(client, token, django_capture_on_commit_callbacks, decision="deny")
    assert refused.status_code == 400 and b'data-error-code="validation_error"' in refused.content
    assert unchanged(approval)
    denied = decide(client, token, django_capture_on_commit_callbacks, decision="deny", reason="wrong target")
    assert denied.status_code == 200 and b'data-status="denied"' in denied.content
    approval.refresh_from_db()
    assert (approval.status, approval.decision_reason) == ("denied", "wrong target")
    assert executed.calls == [] and not ApprovalExecution.objects.exists()


def test_an_unknown_token_is_404_with_a_page(mailed, request_touch, browser_as):
    approval = request_touch()
    client = browser_as(mailed.approver)
    shown = client.get(page("x" * 43))
    assert shown.status_code == 404 and b'data-error-code="approval_link_unknown"' in shown.content
    assert shown["Referrer-Policy"] == "no-referrer"
    posted = client.post(page("x" * 43), {"decision": "approve", "csrfmiddlewaretoken": csrf_token(client)})
    assert posted.status_code == 404
    assert unchanged(approval)


@pytest.mark.parametrize("who", ["teammate", "outsider", "owner", "approver2"])
def test_someone_elses_link_is_403_and_changes_nothing(
    mailed, request_touch, browser_as, who, django_capture_on_commit_callbacks
):
    approval = request_touch()
    token = token_of(mailed.approver)
    user = approver2() if who == "approver2" else getattr(mailed, who)
    client = browser_as(user)
    shown = client.get(page(token))
    assert shown.status_code == 403 and b'data-error-code="approval_link_not_yours"' in shown.content
    assert b"doc-1" not in shown.content  # nothing of the request is shown to another person
    posted = decide(client, token, django_capture_on_commit_callbacks)
    assert posted.status_code == 403
    assert unchanged(approval)
    assert not AuditEvent.objects.filter(action="approval.viewed").exists()


def test_a_used_link_and_a_decided_request_are_409(
    mailed, request_touch, browser_as, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    first, second = browser_as(mailed.approver), browser_as(approver2())
    assert decide(first, token_of(mailed.approver), django_capture_on_commit_callbacks).status_code == 200
    again = decide(first, token_of(mailed.approver), django_capture_on_commit_callbacks, decision="deny", reason="no")
    assert again.status_code == 409 and b'data-error-code="approval_already_decided"' in again.content
    assert first.get(page(token_of(mailed.approver))).status_code == 409
    other = decide(second, token_of(approver2()), django_capture_on_commit_callbacks, decision="deny", reason="no")
    assert other.status_code == 409
    assert second.get(page(token_of(approver2()))).status_code == 409
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", mailed.approver)
    assert not ApprovalLink.objects.filter(approval=approval, approver=approver2(), used_at__isnull=False).exists()
    assert executed.calls == [str(approval.pk)]


def test_an_expired_request_is_410_and_changes_nothing(
    mailed, request_touch, browser_as, django_capture_on_commit_callbacks
):
    approval = request_touch()
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client, token = browser_as(mailed.approver), token_of(mailed.approver)
    shown = client.get(page(token))
    assert shown.status_code == 410 and b'data-error-code="approval_expired"' in shown.content
    assert decide(client, token, django_capture_on_commit_callbacks).status_code == 410
    assert unchanged(approval)


def test_attempts_are_rate_limited(mailed, request_touch, browser_as, settings):
    settings.TESS_APPROVAL_RATE = "3/min"
    approval = request_touch()
    client, token = browser_as(mailed.approver), token_of(mailed.approver)
    statuses = [client.get(page("z" * 43)).status_code for _ in range(3)]
    assert statuses == [404, 404, 404]
    limited = client.get(page(token))
    assert limited.status_code == 429 and limited["Retry-After"] == "60"
    assert b'data-error-code="rate_limited"' in limited.content
    assert unchanged(approval)


def test_a_link_stops_working_when_its_approver_loses_the_role(
    mailed, request_touch, browser_as, django_capture_on_commit_callbacks
):
    from tess_site.accounts.models import Membership

    approval = request_touch()
    Membership.objects.filter(tenant=mailed.acme, user=mailed.approver, role="approver").delete()
    client, token = browser_as(mailed.approver), token_of(mailed.approver)
    posted = decide(client, token, django_capture_on_commit_callbacks)
    assert posted.status_code == 403
    assert unchanged(approval)


# Browsers post from a no-referrer page with ``Origin: null`` and no Referer; the CSRF token still decides.


def post_with_origin(client: Any, token: str, origin: str, with_token: bool, capture: Any) -> Any:
    data = {"decision": "approve", "reason": ""}
    if with_token:
        data["csrfmiddlewaretoken"] = csrf_token(client)
    else:
        csrf_token(client)
    with capture(execute=True):
        return client.post(page(token), data, HTTP_ORIGIN=origin)


def test_a_null_origin_with_the_csrf_token_decides(
    mailed, request_touch, browser_as, django_capture_on_commit_callbacks
):
    approval = request_touch()
    client = browser_as(mailed.approver)
    response = post_with_origin(client, token_of(mailed.approver), "null", True, django_capture_on_commit_callbacks)
    assert response.status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_a_null_origin_without_the_csrf_token_is_refused(
    mailed, request_touch, browser_as, django_capture_on_commit_callbacks
):
    approval = request_touch()
    client = browser_as(mailed.approver)
    response = post_with_origin(client, token_of(mailed.approver), "null", False, django_capture_on_commit_callbacks)
    assert response.status_code == 403
    assert unchanged(approval)


def test_a_foreign_origin_is_refused_even_with_the_csrf_token(
    mailed, request_touch, browser_as, django_capture_on_commit_callbacks
):
    approval = request_touch()
    client = browser_as(mailed.approver)
    response = post_with_origin(
        client, token_of(mailed.approver), "https://evil.example", True, django_capture_on_commit_callbacks
    )
    assert response.status_code == 403
    assert unchanged(approval)
