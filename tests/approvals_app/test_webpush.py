"""Web Push of inbox notices, against a local push-service stand-in over real HTTP (``push_service.py``)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core import mail
from django.core.management import call_command

from approvals_app import notifications
from approvals_app.models import PushSubscription
from tests.approvals_app.approval_fixtures import tokens_by_recipient
from tests.approvals_app.push_service import BrowserSubscription, PushService
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def vapid(settings: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    out = io.StringIO()
    call_command("tess_vapid_keys", stdout=out)
    pair = dict(line.split("=", 1) for line in out.getvalue().split())
    settings.TESS_VAPID_PUBLIC_KEY = pair["TESS_VAPID_PUBLIC_KEY"]
    settings.TESS_VAPID_PRIVATE_KEY = pair["TESS_VAPID_PRIVATE_KEY"]
    settings.TESS_VAPID_SUBJECT = "mailto:ops@example.test"
    settings.TESS_WEBPUSH_ALLOW_HTTP = True  # the stand-in speaks plain http on 127.0.0.1
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return pair["TESS_VAPID_PUBLIC_KEY"]


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The notices queued for the worker; ``deliver`` runs them as the worker would."""
    found: list[tuple[Any, ...]] = []
    monkeypatch.setattr(notifications, "enqueue_on_commit", lambda task, *args: found.append(args))
    return found


def deliver(queued: list[tuple[Any, ...]]) -> None:
    for args in queued:
        notifications.deliver_inbox_notice(*args)


def test_an_approver_subscribed_browser_gets_a_signed_encrypted_notice_without_any_approval_token(
    mailed, request_touch, cast, api_as, vapid, queued
):
    with PushService(vapid) as service:
        browser = BrowserSubscription(endpoint=f"{service.origin}/push/approver-laptop")
        client = api_as(cast.approver)
        assert client.get("/api/v1/inbox/push-subscriptions/").json() == {"vapid_public_key": vapid, "subscriptions": 0}
        answer = client.post("/api/v1/inbox/push-subscriptions/", browser.to_json(), format="json")
        assert answer.status_code == 201 and answer.json()["subscriptions"] == 1
        approval = request_touch()
        deliver(queued)

        assert service.refused == []
        assert len(service.delivered) == 1  # only the subscribed approver's browser
        message = service.delivered[0]
        assert message.path == "/push/approver-laptop" and message.claims["sub"] == "mailto:ops@example.test"
        payload = json.loads(browser.decrypt(message.body))
        assert payload["title"] == f"Tess: Approve test.touch on document {approval.target_id}"
        assert payload["url"].endswith(f"/inbox/#approval_to_decide:{approval.pk}")
        every_token = [token for found in tokens_by_recipient().values() for token in found]
        assert every_token
        plaintext = json.dumps(payload)
        assert not any(token in plaintext for token in every_token)
        assert "/approvals/" not in plaintext


def test_a_notice_is_not_readable_with_another_browsers_keys(mailed, request_touch, cast, api_as, vapid, queued):
    with PushService(vapid) as service:
        browser = BrowserSubscription(endpoint=f"{service.origin}/push/a")
        api_as(cast.approver).post("/api/v1/inbox/push-subscriptions/", browser.to_json(), format="json")
        request_touch()
        deliver(queued)
        stranger = BrowserSubscription(endpoint=browser.endpoint, auth=browser.auth)
        with pytest.raises(Exception):  # noqa: B017 - any failure to decrypt: the AEAD tag does not match
            stranger.decrypt(service.delivered[0].body)


def test_a_gone_subscription_is_dropped_and_unsubscribe_and_preferences_stop_pushes(
    mailed, request_touch, cast, api_as, vapid, queued
):
    with PushService(vapid) as service:
        gone = BrowserSubscription(endpoint=f"{service.origin}/gone/old-phone")
        kept = BrowserSubscription(endpoint=f"{service.origin}/push/laptop")
        client = api_as(cast.approver)
        for browser in (gone, kept):
            assert client.post("/api/v1/inbox/push-subscriptions/", browser.to_json(), format="json").status_code == 201
        request_touch(target_id="one")
        deliver(queued)
        assert [d.path for d in service.delivered] == ["/push/laptop"]
        assert list(PushSubscription.objects.values_list("endpoint", flat=True)) == [kept.endpoint]

        queued.clear()
        client.put("/api/v1/inbox/settings/", {"webpush": False}, format="json")
        request_touch(target_id="two")
        deliver(queued)
        assert len(service.delivered) == 1

        client.put("/api/v1/inbox/settings/", {"webpush": True}, format="json")
        client.delete("/api/v1/inbox/push-subscriptions/", {"endpoint": kept.endpoint}, format="json")
        queued.clear()
        request_touch(target_id="three")
        deliver(queued)
        assert len(service.delivered) == 1


def test_a_subscription_serves_only_its_owner(mailed, request_touch, cast, api_as, vapid, queued):
    with PushService(vapid) as service:
        browser = BrowserSubscription(endpoint=f"{service.origin}/push/teammate")
        api_as(cast.teammate).post("/api/v1/inbox/push-subscriptions/", browser.to_json(), format="json")
        request_touch()  # enters the approvers' inboxes, not the teammate's
        deliver(queued)
        assert service.delivered == []


@pytest.mark.parametrize(
    "change, field",
    [
        ({"endpoint": "ftp://push.example/x"}, "endpoint"),
        ({"keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "p256dh"),
        ({"keys": {"p256dh": None, "auth": "c2hvcnQ"}}, "auth"),
    ],
)
def test_malformed_subscriptions_are_refused(cast, api_as, vapid, change, field):
    body = BrowserSubscription(endpoint="https://push.example.test/x").to_json()
    if "keys" in change and change["keys"]["p256dh"] is None:
        change = {"keys": {**body["keys"], "auth": change["keys"]["auth"]}}
    body.update(change)
    answer = api_as(cast.approver).post("/api/v1/inbox/push-subscriptions/", body, format="json")
    assert answer.status_code == 400
    assert PushSubscription.objects.count() == 0


def test_plain_http_endpoints_are_refused_unless_allowed(cast, api_as, settings):
    settings.TESS_WEBPUSH_ALLOW_HTTP = False
    body = BrowserSubscription(endpoint="http://127.0.0.1:9/push/x").to_json()
    assert api_as(cast.approver).post("/api/v1/inbox/push-subscriptions/", body, format="json").status_code == 400


def test_a_push_service_that_refuses_the_signature_fails_only_that_channel(
    mailed, request_touch, cast, api_as, vapid, queued, settings
):
    other = io.StringIO()
    call_command("tess_vapid_keys", stdout=other)
    expected_by_service = dict(line.split("=", 1) for line in other.getvalue().split())["TESS_VAPID_PUBLIC_KEY"]
    notifications.preferences_update(scope=scope_of(cast.approver, cast.acme), changes={"email": True})
    with PushService(expected_by_service) as service:  # registered for another server's key
        browser = BrowserSubscription(endpoint=f"{service.origin}/push/laptop")
        api_as(cast.approver).post("/api/v1/inbox/push-subscriptions/", browser.to_json(), format="json")
        request_touch()
        mail.outbox.clear()
        deliver(queued)  # raises nothing
        assert service.delivered == [] and len(service.refused) == 1
        assert [m.to for m in mail.outbox] == [["approver@example.test"]]  # the next channel still went out
        assert PushSubscription.objects.count() == 1  # a 401 is not "gone": the subscription stays
