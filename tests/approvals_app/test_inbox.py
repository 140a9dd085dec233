"""The needs-you inbox: who sees what, a fresh one-time link from the inbox, resend, and the live events."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone
from guardian.shortcuts import assign_perm

from approvals_app import events, inbox_items, notifications
from approvals_app.approvals import ApprovalAlreadyDecided, ApprovalExpired, ApprovalLinkUnknown
from approvals_app.decisions import approval_decide, link_for_token
from approvals_app.inbox_items import register_inbox_source, session_item
from approvals_app.links import approval_link_open, approval_resend
from approvals_app.models import Approval, ApprovalLink
from approvals_app.waiting import inbox_of
from tess_site.errors import NotFound
from tests.approvals_app.approval_fixtures import LINK_RE, approver2, token_of
from tests.conftest import csrf_token, scope_of

pytestmark = pytest.mark.django_db


def keys(user: Any, tenant: Any) -> list[str]:
    return [item["key"] for item in inbox_of(scope=scope_of(user, tenant))]


def token_in(url: str) -> str:
    found = LINK_RE.findall(url)
    assert len(found) == 1, url
    return found[0]


# --- who sees what ---------------------------------------------------------------------------------------


def test_approvers_find_what_they_may_decide_and_the_requester_what_they_asked(mailed, request_touch, cast):
    approval = request_touch()
    assert keys(cast.approver, cast.acme) == [f"approval_to_decide:{approval.pk}"]
    assert keys(approver2(), cast.acme) == [f"approval_to_decide:{approval.pk}"]
    assert keys(cast.owner, cast.acme) == [f"approval_requested:{approval.pk}"]
    item = inbox_of(scope=scope_of(cast.approver, cast.acme))[0]
    assert item["url"] == f"/inbox/#approval_to_decide:{approval.pk}"
    assert not LINK_RE.search(json.dumps(item))  # the inbox never holds a one-time link


def test_another_persons_or_tenants_approvals_never_appear(mailed, request_touch, cast):
    request_touch()
    for user, tenant in ((cast.teammate, cast.acme), (cast.auditor, cast.acme), (cast.outsider, cast.globex)):
        assert keys(user, tenant) == []
    # The outsider is admin, auditor and operator of their own tenant; in acme they have no scope at all, and
    # the approver's rows do not follow them into globex.
    assert keys(cast.approver, cast.globex) == []


def test_decided_and_expired_requests_leave_the_inbox(
    mailed, request_touch, cast, executed, django_capture_on_commit_callbacks
):
    decided, lapsed = request_touch(target_id="a"), request_touch(target_id="b")
    Approval.objects.filter(pk=lapsed.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(scope_of(cast.approver, cast.acme), token=_token_for(cast.approver, decided), approve=True)
    assert keys(cast.approver, cast.acme) == []
    assert keys(approver2(), cast.acme) == []
    assert keys(cast.owner, cast.acme) == []


def test_an_approver_who_lost_the_role_no_longer_finds_the_request(mailed, request_touch, cast):
    from tess_site.accounts.models import Membership

    approval = request_touch()
    Membership.objects.filter(user=cast.approver, tenant=cast.acme, role="approver").delete()
    assert keys(cast.approver, cast.acme) == []
    with pytest.raises(NotFound):
        approval_link_open(scope_of(cast.approver, cast.acme), approval_id=approval.pk)


def test_only_their_own_pending_cards_appear(cast):
    from approvals_app.cards import card_dismiss, card_propose, register_card_handler

    class Handler:
        def apply(self, scope: Any, card: Any) -> Any:
            raise AssertionError

        def scrub(self, payload: dict[str, Any]) -> dict[str, Any]:
            return {}

    register_card_handler("testcard", Handler())
    card = card_propose(scope=scope_of(cast.owner, cast.acme), kind="testcard", payload={})
    assert keys(cast.owner, cast.acme) == [f"card:{card.pk}"]
    assert keys(cast.teammate, cast.acme) == [] and keys(cast.admin_user, cast.acme) == []
    card_dismiss(scope=scope_of(cast.owner, cast.acme), card_id=card.pk)
    assert keys(cast.owner, cast.acme) == []


def test_a_registered_session_source_adds_waiting_sessions_and_a_failing_one_is_skipped(
    cast, mailed, request_touch, monkeypatch
):
    # Any app may register a source; one that fails leaves the rest of the inbox standing.
    def waiting(scope: Any) -> list[dict[str, Any]]:
        return (
            [session_item(session_id="s-1", title="build", since=timezone.now())] if scope.actor == cast.owner else []
        )

    def broken(scope: Any) -> list[dict[str, Any]]:
        raise RuntimeError("source down")

    monkeypatch.setattr(inbox_items, "_sources", dict(inbox_items._sources))  # restored after the test
    register_inbox_source("test-sessions", waiting)
    register_inbox_source("test-broken", broken)
    approval = request_touch()
    assert keys(cast.owner, cast.acme) == ["session_waiting:s-1", f"approval_requested:{approval.pk}"]
    assert keys(cast.teammate, cast.acme) == []


def test_sessions_apps_source_reads_only_the_callers_own_waiting_sessions(cast):
    from sessions_app.inbox_source import sessions_waiting
    from tests.factories import SessionFactory

    asking = SessionFactory.create(owner=cast.owner, tenant=cast.acme, agent_state="waiting_for_input")
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, agent_state="working")
    shared = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, agent_state="waiting_for_input")
    assign_perm("view_session", cast.owner, shared)  # visible to the owner, but not theirs to answer
    mine = sessions_waiting(scope_of(cast.owner, cast.acme))
    assert [(item["kind"], item["id"]) for item in mine] == [("session_waiting", str(asking.pk))]
    assert sessions_waiting(scope_of(cast.outsider, cast.globex)) == []


# --- a fresh link from the inbox -----------------------------------------------------------------------------


def test_opening_mints_a_fresh_link_for_that_approver_and_the_old_one_stops_working(
    mailed, request_touch, cast, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    old = token_of(cast.approver)
    other = token_of(approver2())
    url = approval_link_open(scope_of(cast.approver, cast.acme), approval_id=approval.pk)
    fresh = token_in(url)
    assert fresh != old
    with pytest.raises(ApprovalLinkUnknown):
        link_for_token(old)
    assert link_for_token(other).approver_id == approver2().pk  # the other approver's link is untouched
    assert link_for_token(fresh).approver_id == cast.approver.pk
    with django_capture_on_commit_callbacks(execute=True):
        decided = approval_decide(scope_of(cast.approver, cast.acme), token=fresh, approve=True)
    assert decided.status == "approved"


@pytest.mark.parametrize("who", ["owner", "teammate", "auditor"])
def test_someone_who_may_not_decide_gets_404(mailed, request_touch, cast, who):
    approval = request_touch()
    with pytest.raises(NotFound):
        approval_link_open(scope_of(getattr(cast, who), cast.acme), approval_id=approval.pk)
    assert ApprovalLink.objects.filter(approval=approval).count() == 2


def test_another_tenant_gets_404(mailed, request_touch, cast):
    approval = request_touch()
    with pytest.raises(NotFound):
        approval_link_open(scope_of(cast.outsider, cast.globex), approval_id=approval.pk)
    with pytest.raises(NotFound):
        approval_link_open(scope_of(cast.approver, cast.globex), approval_id=approval.pk)


def test_decided_is_409_and_expired_is_410(mailed, request_touch, cast, executed, django_capture_on_commit_callbacks):
    decided, lapsed = request_touch(target_id="a"), request_touch(target_id="b")
    Approval.objects.filter(pk=lapsed.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(scope_of(approver2(), cast.acme), token=_token_for(approver2(), decided), approve=True)
    with pytest.raises(ApprovalAlreadyDecided):
        approval_link_open(scope_of(cast.approver, cast.acme), approval_id=decided.pk)
    with pytest.raises(ApprovalExpired):
        approval_link_open(scope_of(cast.approver, cast.acme), approval_id=lapsed.pk)


def _token_for(user: Any, approval: Approval) -> str:
    return token_in(approval_link_open(scope_of(user, approval.tenant), approval_id=approval.pk))


def test_the_api_mints_the_callers_link_and_404s_for_others(mailed, request_touch, cast, api_as):
    approval = request_touch()
    answer = api_as(cast.approver).post(f"/api/v1/approvals/{approval.pk}/open/")
    assert answer.status_code == 200
    assert link_for_token(token_in(answer.json()["url"])).approver_id == cast.approver.pk
    for user in (cast.owner, cast.teammate):
        refused = api_as(user).post(f"/api/v1/approvals/{approval.pk}/open/")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert api_as(cast.outsider, cast.globex).post(f"/api/v1/approvals/{approval.pk}/open/").status_code == 404


def test_the_browser_needs_the_csrf_token_to_mint(mailed, request_touch, cast, browser_as):
    approval = request_touch()
    old = token_of(cast.approver)
    client = browser_as(cast.approver)
    assert client.post(f"/api/v1/approvals/{approval.pk}/open/").status_code == 403
    assert link_for_token(old)  # nothing was minted
    answer = client.post(f"/api/v1/approvals/{approval.pk}/open/", HTTP_X_CSRFTOKEN=csrf_token(client))
    assert answer.status_code == 200


def test_the_inbox_page_opens_the_approval_page_and_the_old_link_is_refused(
    mailed, request_touch, cast, browser_as, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    old = token_of(cast.approver)
    client = browser_as(cast.approver)
    page = client.get("/inbox/")
    assert page.status_code == 200 and "Open approval page" in page.content.decode()
    assert old not in page.content.decode()
    assert client.post(f"/inbox/approvals/{approval.pk}/open/").status_code == 403  # CSRF
    opened = client.post(f"/inbox/approvals/{approval.pk}/open/", {"csrfmiddlewaretoken": csrf_token(client)})
    assert opened.status_code == 303 and opened["Referrer-Policy"] == "no-referrer"
    fresh = token_in(opened["Location"])
    # The second click on the old link, after the re-mint: refused, nothing decided.
    stale = client.post(f"/approvals/{old}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(client)})
    assert stale.status_code == 404
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(f"/approvals/{fresh}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(client)})
    assert done.status_code == 200 and Approval.objects.get(pk=approval.pk).status == "approved"


# --- resend ------------------------------------------------------------------------------------------------


def test_resend_delivers_fresh_links_privately_and_reaches_the_approvers_drawer(
    mailed, request_touch, cast, monkeypatch, django_capture_on_commit_callbacks
):
    approval = request_touch()
    first = token_of(cast.approver)
    mail.outbox.clear()
    pushed: list[tuple[int, str, dict[str, Any]]] = []
    monkeypatch.setattr(events, "get_channel_layer", lambda: _Recorder(pushed))
    with django_capture_on_commit_callbacks(execute=True):
        sent = approval_resend(scope_of(cast.owner, cast.acme), approval_id=approval.pk)
    assert sent == 2
    fresh = token_of(cast.approver)
    assert fresh != first
    with pytest.raises(ApprovalLinkUnknown):
        link_for_token(first)
    # The approver's drawer gets the new link (their own socket) and the item back in the inbox.
    mine = [(kind, body) for user_id, kind, body in pushed if user_id == cast.approver.pk]
    assert ("approval.link", fresh) in [(k, token_in(b["url"])) for k, b in mine if k == "approval.link"]
    assert any(k == "inbox.item" and b["key"] == f"approval_to_decide:{approval.pk}" for k, b in mine)
    # Nobody else's socket ever carries the approver's link.
    assert not [b for user_id, _, b in pushed if user_id != cast.approver.pk and fresh in json.dumps(b)]


class _Recorder:
    """A channel layer that records group sends as (user id, kind, body)."""

    def __init__(self, into: list[tuple[int, str, dict[str, Any]]]) -> None:
        self.into = into

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.into.append((int(group.rsplit(".", 1)[1]), message["kind"], message["body"]))


@pytest.mark.parametrize("who", ["approver", "teammate"])
def test_only_the_requester_may_resend(mailed, request_touch, cast, who):
    approval = request_touch()
    with pytest.raises(NotFound):
        approval_resend(scope_of(getattr(cast, who), cast.acme), approval_id=approval.pk)
    with pytest.raises(NotFound):
        approval_resend(scope_of(cast.outsider, cast.globex), approval_id=approval.pk)


def test_resend_over_the_api(mailed, request_touch, cast, api_as):
    approval = request_touch()
    assert api_as(cast.owner).post(f"/api/v1/approvals/{approval.pk}/resend/").json() == {"sent": 2}
    assert api_as(cast.approver).post(f"/api/v1/approvals/{approval.pk}/resend/").status_code == 404


# --- the API, settings, notices ------------------------------------------------------------------------------


def test_the_inbox_api_lists_the_callers_items_only(mailed, request_touch, cast, api_as):
    approval = request_touch()
    mine = api_as(cast.approver).get("/api/v1/inbox/").json()
    assert mine["count"] == 1 and mine["results"][0]["key"] == f"approval_to_decide:{approval.pk}"
    assert api_as(cast.teammate).get("/api/v1/inbox/").json() == {"count": 0, "results": []}
    assert api_as(cast.outsider, cast.globex).get("/api/v1/inbox/").json()["count"] == 0


def test_settings_are_per_person_and_unknown_channels_are_refused(cast, api_as):
    client = api_as(cast.owner)
    assert client.get("/api/v1/inbox/settings/").json() == {
        "browser": True,
        "webpush": True,
        "email": False,
        "discord": False,
    }
    assert client.put("/api/v1/inbox/settings/", {"email": True}, format="json").json()["email"] is True
    assert api_as(cast.teammate).get("/api/v1/inbox/settings/").json()["email"] is False


def test_a_notice_goes_to_the_chosen_channels_with_the_inbox_link_only(mailed, request_touch, cast, monkeypatch):
    notifications.preferences_update(scope=scope_of(cast.approver, cast.acme), changes={"email": True})
    dms: list[tuple[str, dict[str, str]]] = []
    # In place of the real Discord sender for this test only (monkeypatch restores it).
    monkeypatch.setitem(
        notifications._notifiers, "discord", lambda user, tenant_id, notice: dms.append((user.username, notice))
    )
    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(notifications, "enqueue_on_commit", lambda task, *args: queued.append(args))
    approval = request_touch()
    mail.outbox.clear()
    for args in queued:
        notifications.inbox_notice_deliver(tenant_id=args[0], user_id=args[1], key=args[2], title=args[3], url=args[4])
    assert sorted(args[1] for args in queued) == sorted([cast.approver.pk, approver2().pk])  # not the requester
    notice_mail = [m for m in mail.outbox if m.to == ["approver@example.test"]]
    assert len(notice_mail) == 1 and f"/inbox/#approval_to_decide:{approval.pk}" in notice_mail[0].body
    assert not LINK_RE.search(notice_mail[0].body)
    assert dms == []  # nobody chose Discord
    assert not [m for m in mail.outbox if m.to == ["approver2@example.test"]]  # e-mail is opt-in


def test_a_failing_channel_neither_fails_the_action_nor_stops_the_others(mailed, cast, monkeypatch):
    notifications.preferences_update(scope=scope_of(cast.approver, cast.acme), changes={"email": True, "discord": True})

    def down(user: Any, tenant_id: int, notice: dict[str, str]) -> None:
        raise RuntimeError("discord is down")

    monkeypatch.setitem(notifications._notifiers, "discord", down)
    notifications.inbox_notice_deliver(
        tenant_id=cast.acme.pk, user_id=cast.approver.pk, key="card:x", title="A card", url="/inbox/#card:x"
    )
    assert [m.to for m in mail.outbox] == [["approver@example.test"]]


def test_a_session_starting_and_stopping_to_wait_reaches_only_its_owner(
    cast, monkeypatch, django_capture_on_commit_callbacks
):
    from sessions_app.inbox_source import announce_waiting
    from tests.factories import SessionFactory

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="build")
    pushed: list[tuple[int, str, dict[str, Any]]] = []
    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(events, "get_channel_layer", lambda: _Recorder(pushed))
    monkeypatch.setattr(notifications, "enqueue_on_commit", lambda task, *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        announce_waiting(session, waiting=True)
        announce_waiting(session, waiting=False)
    key = f"session_waiting:{session.pk}"
    assert [(u, k, b["key"]) for u, k, b in pushed] == [
        (cast.owner.pk, "inbox.item", key),
        (cast.owner.pk, "inbox.left", key),
    ]
    assert pushed[0][2]["title"] == "Session build waits for your input"
    assert [(args[1], args[2]) for args in queued] == [(cast.owner.pk, key)]


def test_a_second_resend_right_away_is_refused_and_sends_nothing(mailed, request_touch, cast, api_as):
    approval = request_touch()
    client = api_as(cast.owner)
    assert client.post(f"/api/v1/approvals/{approval.pk}/resend/").json() == {"sent": 2}
    mail.outbox.clear()
    again = client.post(f"/api/v1/approvals/{approval.pk}/resend/")
    assert again.status_code == 429 and again.json()["error"]["code"] == "rate_limited"
    assert mail.outbox == []
