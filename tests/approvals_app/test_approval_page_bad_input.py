"""The one-time approval page refuses a NUL in its form (it once reached PostgreSQL as a 500)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from approvals_app.models import Approval
from tests.approvals_app.approval_fixtures import token_of
from tests.conftest import csrf_token

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("encoding", ["urlencoded", "multipart"])
def test_a_nul_in_the_approval_pages_form_is_a_plain_400_and_decides_nothing(
    mailed, request_touch, browser_as, encoding
):
    approval = request_touch()
    client = browser_as(mailed.approver)
    data = {"decision": "deny", "reason": "no\x00way", "csrfmiddlewaretoken": csrf_token(client)}
    url = f"/approvals/{token_of(mailed.approver)}/"
    if encoding == "urlencoded":
        response = client.post(url, urlencode(data), content_type="application/x-www-form-urlencoded")
    else:
        response = client.post(url, data)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
