"""Terminate end to end on a real tmux server: ask (REST), approve (the link page), executed exactly once."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail

from approvals_app.executions import execution_run
from approvals_app.models import Approval, ApprovalExecution
from providers_app.tmux import TmuxProvider
from sessions_app.models import Session, SessionStatus
from tess_site.audit.models import AuditEvent
from tests.approvals_app.approval_fixtures import LINK_RE
from tests.conftest import Cast, csrf_token

pytestmark = pytest.mark.django_db


def runtimes(tmux: Any) -> list[str]:
    return tmux.tmux("list-sessions", "-F", "#{session_id}").split()


def link_token(address: str) -> str:
    tokens = [t for m in mail.outbox if m.to == [address] for t in LINK_RE.findall(str(m.body))]
    assert len(tokens) == 1, tokens
    return tokens[0]


@pytest.fixture
def emails(cast: Cast) -> Cast:
    for user in (cast.owner, cast.approver):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    return cast


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every runtime id the tmux provider was asked to kill (the real kill still happens)."""
    seen: list[str] = []
    real = TmuxProvider.terminate

    def spy(self: TmuxProvider, ref: Any, approval_ref: str, scope: Any) -> None:
        seen.append(ref.runtime_id)
        real(self, ref, approval_ref, scope)

    monkeypatch.setattr(TmuxProvider, "terminate", spy)
    return seen


def ask(client: Any, session: Session, capture: Any, key: str = "term-1") -> Any:
    with capture(execute=True):
        return client.post(
            f"/api/v1/sessions/{session.pk}/terminate/",
            {"reason": "finished"},
            format="json",
            HTTP_IDEMPOTENCY_KEY=key,
        )


def test_the_operator_asks_an_approver_approves_and_the_session_is_gone_exactly_once(
    emails, tmux, start_session, api_as, browser_as, kills, django_capture_on_commit_callbacks
):
    session = start_session()
    operator = api_as(emails.owner)
    asked = ask(operator, session, django_capture_on_commit_callbacks)
    assert asked.status_code == 202 and asked.json()["status"] == "pending"
    assert session.runtime_id in runtimes(tmux)

    token = link_token("approver@example.test")
    approver = browser_as(emails.approver)
    shown = approver.get(f"/approvals/{token}/")
    assert shown.status_code == 200
    assert str(session.pk).encode() in shown.content and session.runtime_id.encode() in shown.content
    assert session.runtime_id in runtimes(tmux)  # looking changes nothing

    with django_capture_on_commit_callbacks(execute=True):
        decided = approver.post(
            f"/approvals/{token}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(approver)}
        )
    assert decided.status_code == 200
    assert session.runtime_id not in runtimes(tmux)
    assert kills == [session.runtime_id]

    session.refresh_from_db()
    approval = Approval.objects.get(pk=asked.json()["id"])
    assert session.status == SessionStatus.TERMINATED
    assert (approval.status, approval.execution) == ("approved", "executed")
    assert approval.result == {"session_id": str(session.pk), "status": "terminated"}

    # A redelivered task, a second click and a second request do not kill anything again.
    item = ApprovalExecution.objects.get(approval=approval)
    assert execution_run(item_id=item.pk, worker="late") is False
    with django_capture_on_commit_callbacks(execute=True):
        again = approver.post(
            f"/approvals/{token}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(approver)}
        )
    assert again.status_code == 409
    assert ask(operator, session, django_capture_on_commit_callbacks, key="term-2").status_code == 409
    assert kills == [session.runtime_id]
    assert AuditEvent.objects.filter(action="session.terminate", outcome="executed").count() == 1

    events = operator.get(f"/api/v1/sessions/{session.pk}/events/").json()["events"]
    approval_events = [e["body"] for e in events if e["kind"] == "approval"]
    assert approval_events == [
        {"id": str(approval.pk), "status": "pending"},
        {"id": str(approval.pk), "status": "approved"},
        {"id": str(approval.pk), "status": "executed"},
    ]
    assert [e["body"]["status"] for e in events if e["kind"] == "status"] == ["running", "terminated"]
    # seed 000: both boundaries are remembered for the owner, and the stream shows each capture.
    from memory_app.plugin import operator_memory_plugin
    from tests.conftest import scope_of

    recent = operator_memory_plugin().recent(scope_of(emails.owner, emails.acme))
    assert sorted(r.source for r in recent) == ["approval.executed", "session.ended"]
    assert [e["body"]["code"] for e in events if e["kind"] == "system"] == ["memory.captured", "memory.captured"]


def test_a_denied_terminate_leaves_the_session_running(
    emails, tmux, start_session, api_as, browser_as, kills, django_capture_on_commit_callbacks
):
    session = start_session()
    ask(api_as(emails.owner), session, django_capture_on_commit_callbacks)
    approver = browser_as(emails.approver)
    token = link_token("approver@example.test")
    data = {"decision": "deny", "reason": "still needed", "csrfmiddlewaretoken": csrf_token(approver)}
    with django_capture_on_commit_callbacks(execute=True):
        assert approver.post(f"/approvals/{token}/", data).status_code == 200
    assert session.runtime_id in runtimes(tmux) and kills == []
    session.refresh_from_db()
    assert session.status == SessionStatus.RUNNING
    assert [e.body["status"] for e in session.events.filter(kind="approval").order_by("seq")] == ["pending", "denied"]


def test_the_executor_refuses_an_approval_that_no_longer_names_exactly_this_runtime(
    emails, tmux, start_session, api_as, browser_as, kills, django_capture_on_commit_callbacks
):
    session = start_session()
    asked = ask(api_as(emails.owner), session, django_capture_on_commit_callbacks)
    # The session was re-bound to another runtime after the request: the approval does not cover that one.
    Session.objects.filter(pk=session.pk).update(runtime_id="$999")
    approver = browser_as(emails.approver)
    token = link_token("approver@example.test")
    with django_capture_on_commit_callbacks(execute=True):
        approver.post(f"/approvals/{token}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(approver)})
    approval = Approval.objects.get(pk=asked.json()["id"])
    assert approval.execution == "failed" and approval.result == {"error": {"code": "approval_not_usable"}}
    assert approval.consumed_at is None
    assert kills == [] and session.runtime_id in runtimes(tmux)


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_others_cannot_ask_to_terminate_a_session(cast, start_session, api_as, who, django_capture_on_commit_callbacks):
    session = start_session()
    client = api_as(getattr(cast, who), cast.globex if who == "outsider" else None)
    assert ask(client, session, django_capture_on_commit_callbacks).status_code == 404
    assert not Approval.objects.exists()


def test_a_terminate_request_always_pins_the_sessions_current_runtime(cast, start_session):
    from approvals_app.approvals import approval_request
    from tess_site.errors import InvalidInput
    from tests.conftest import scope_of

    session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    fields = {"action": "session.terminate", "target_type": "session", "target_id": str(session.pk)}
    approval = approval_request(scope, parameters={}, session_id=str(session.pk), **fields)
    assert approval.parameters == {"provider": "alpha", "runtime_id": session.runtime_id}
    with pytest.raises(InvalidInput):
        approval_request(scope, parameters={"provider": "alpha", "runtime_id": "$77"}, session_id=None, **fields)
    assert Approval.objects.count() == 1


@pytest.mark.parametrize(
    ("instance", "config"),
    [
        ("replay", {"kind": "pi", "sessions_dir": "terminate-test"}),  # pi offers no terminate
        ("gone", None),  # an instance no longer configured offers nothing
    ],
)
def test_terminating_where_the_provider_cannot_fails_closed_before_any_approver_is_asked(
    emails, settings, api_as, instance, config, django_capture_on_commit_callbacks
):
    from approvals_app.approvals import approval_request
    from providers_app.contract import CapabilityUnsupported
    from providers_app.registry import reset_instances
    from tests.conftest import scope_of
    from tests.factories import SessionFactory

    if config is not None:
        settings.TESS_RUNTIME_PROVIDERS = {**settings.TESS_RUNTIME_PROVIDERS, instance: config}
    reset_instances()
    session = SessionFactory.create(owner=emails.owner, tenant=emails.acme, provider_instance=instance)

    refused = ask(api_as(emails.owner), session, django_capture_on_commit_callbacks)
    assert refused.status_code == 501
    error = refused.json()["error"]
    assert error["code"] == "capability_unsupported"
    assert error["details"]["capability"] == "terminate" and error["details"]["instance"] == instance

    # The gateway's path (a request straight to approvals_app, through the action's binder) is refused too.
    fields = {"action": "session.terminate", "target_type": "session", "target_id": str(session.pk)}
    with pytest.raises(CapabilityUnsupported):
        approval_request(scope_of(emails.owner, emails.acme), parameters={}, session_id=str(session.pk), **fields)

    assert not Approval.objects.exists()
    assert mail.outbox == []  # no approver was asked
    session.refresh_from_db()
    assert session.status == SessionStatus.RUNNING
    reset_instances()
