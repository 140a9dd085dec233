"""Budgets: periods in the tenant's time zone, the 80 % notice once, require_approval holding turns and raw
input in approvals until approved, raising or rolling over clearing it, and who may change budgets."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from approvals_app.briefs import describe
from approvals_app.decisions import approval_decide
from approvals_app.links import approval_link_open
from approvals_app.models import Approval
from approvals_app.waiting import inbox_of
from sessions_app import budgets
from sessions_app.budgets import (
    budget_blocking,
    budget_save,
    budget_state,
    budgets_waiting,
    period_bounds,
)
from sessions_app.models import Budget, BudgetNotice, InboxItem, Session, SessionEvent, UsageRecord
from sessions_app.usage import usage_record
from tess_site.audit.models import AuditEvent
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory
from tests.providers_app.chat_standin import ChatStandIn, running_chat_standin
from tests.sessions_app.conftest import pump_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat_standin():
    with running_chat_standin() as standin:
        yield standin


@pytest.fixture
def session(cast: Cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="pi1")


def budget(cast: Cast, **fields: Any) -> Budget:
    values: dict[str, Any] = {"name": "b", "period": "day", "metric": "tokens", "limit": Decimal(1000)}
    values.update(fields)
    return budget_save(
        scope=scope_of(cast.admin_user, cast.acme), budget=Budget(tenant=cast.acme, **values), created=True
    )


def spend(session: Session, tokens: int, *, at: datetime | None = None, operator_id: int | None = None) -> None:
    step = {"ref": uuid.uuid4().hex, "model": "m", "input": tokens, "at": (at or datetime.now(UTC)).isoformat()}
    usage_record(session=session, steps=[step], operator_id=operator_id)


def model_settings(standin: ChatStandIn) -> dict[str, Any]:
    return {
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": "gpt-5.6-sol",
        "TESS_MODEL_BASE_URL": standin.base_url,
        "TESS_MODEL_TIMEOUT_SECONDS": 5,
        "TESS_MODEL_STREAM": True,
    }


def turn(client: Any, session: Session, text: str) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"text": text}, format="json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex
    )
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def approve(cast: Cast, approval_id: str, capture: Any) -> None:
    scope = scope_of(cast.approver, cast.acme)
    token = approval_link_open(scope, approval_id=approval_id).rstrip("/").rsplit("/", 1)[-1]
    with capture(execute=True):
        approval_decide(scope, token=token, approve=True)


# --- periods ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "now", "start", "end"),
    [
        # Auckland is UTC+13 in December: its day starts at 11:00 UTC the day before.
        ("day", "2026-12-01T10:59:00+00:00", "2026-11-30T11:00:00+00:00", "2026-12-01T11:00:00+00:00"),
        ("day", "2026-12-01T11:00:00+00:00", "2026-12-01T11:00:00+00:00", "2026-12-02T11:00:00+00:00"),
        ("week", "2026-12-06T12:00:00+00:00", "2026-12-06T11:00:00+00:00", "2026-12-13T11:00:00+00:00"),
        ("month", "2026-11-30T11:30:00+00:00", "2026-11-30T11:00:00+00:00", "2026-12-31T11:00:00+00:00"),
    ],
)
def test_periods_begin_at_midnight_in_the_tenant_s_time_zone(period, now, start, end):
    bounds = period_bounds(period=period, time_zone="Pacific/Auckland", now=datetime.fromisoformat(now))
    assert bounds == (datetime.fromisoformat(start), datetime.fromisoformat(end))


def test_a_budget_rolls_over_at_the_tenant_s_midnight_not_utc_s(cast, session):
    cast.acme.time_zone = "Pacific/Auckland"
    cast.acme.save(update_fields=["time_zone"])
    held = budget(cast, session=session, action="require_approval")
    start, _ = period_bounds(period="day", time_zone="Pacific/Auckland")
    spend(session, 5000, at=start - timedelta(minutes=1))  # yesterday in Auckland, maybe today in UTC
    assert budget_state(held, time_zone="Pacific/Auckland").spent == 0
    assert budget_blocking(session=session, operator_id=cast.owner.pk) is None
    assert budget_state(held, time_zone="UTC", now=start - timedelta(minutes=1)).spent == 5000
    spend(session, 1000, at=start + timedelta(minutes=1))
    assert budget_blocking(session=session, operator_id=cast.owner.pk) == held


def test_a_tenant_s_time_zone_is_an_iana_name(cast):
    cast.acme.time_zone = "Mars/Olympus_Mons"
    with pytest.raises(ValidationError):
        cast.acme.full_clean()
    cast.acme.time_zone = "Europe/Berlin"
    cast.acme.full_clean()


# --- notices ---------------------------------------------------------------------------------------------


def test_the_owner_is_told_once_at_80_percent_then_again_at_100(cast, session, monkeypatch):
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(
        budgets, "inbox_entered_on_commit", lambda *, tenant_id, user_id, item: sent.append((user_id, item["key"]))
    )
    made = budget(cast, session=session, name="daily tokens")
    spend(session, 790)
    assert not BudgetNotice.objects.exists() and not sent
    spend(session, 20)
    assert sent == [(cast.owner.pk, f"budget:{made.pk}:80")]
    spend(session, 50)
    spend(session, 50)
    assert len(sent) == 1
    assert list(BudgetNotice.objects.values_list("level", flat=True)) == [80]
    [item] = [i for i in inbox_of(scope=scope_of(cast.owner, cast.acme)) if i["kind"] == "budget"]
    assert item["title"].startswith("Budget daily tokens (session") and "91%" in item["title"]
    assert budgets_waiting(scope_of(cast.teammate, cast.acme)) == []
    spend(session, 100)
    assert sorted(BudgetNotice.objects.values_list("level", flat=True)) == [80, 100]
    [item] = budgets_waiting(scope_of(cast.owner, cast.acme))
    assert item["level"] == 100


def test_a_tenant_budget_tells_the_tenant_s_admins(cast, session):
    budget(cast, name="all of acme", limit=Decimal(100))
    spend(session, 90)
    assert [i["id"] for i in budgets_waiting(scope_of(cast.admin_user, cast.acme))] == [str(Budget.objects.get().pk)]
    assert budgets_waiting(scope_of(cast.owner, cast.acme)) == []


# --- require_approval --------------------------------------------------------------------------------------


def test_at_100_percent_a_turn_becomes_an_approval_and_reaches_the_model_only_once_approved(
    cast, api_as, session, chat_standin, django_capture_on_commit_callbacks
):
    budget(cast, operator=cast.owner, action="require_approval", limit=Decimal(100))
    spend(session, 100)
    with override_settings(**model_settings(chat_standin)):
        body = turn(api_as(cast.owner), session, "what is next?")
        assert chat_standin.requests == []
        [held] = body["approvals"]
        assert held["action"] == "session.over_budget"
        assert "Nothing was sent to the model" in body["reply"]
        assert not UsageRecord.objects.filter(source_ref__startswith="turn:").exists()
        brief = describe(Approval.objects.get(pk=held["id"]))
        assert "although budget b has reached its limit" in brief.sentence
        assert brief.output_lines == ["what is next?"]  # the approver reads exactly what will be sent
        approve(cast, held["id"], django_capture_on_commit_callbacks)
    assert [r["body"]["messages"][-1]["content"] for r in chat_standin.requests] == ["what is next?"]
    assert Approval.objects.get(pk=held["id"]).execution == Approval.Execution.EXECUTED
    replies = SessionEvent.objects.filter(session=session, kind="turn.out").order_by("seq")
    assert replies.last().body["text"] == "stand-in answer to: what is next?"
    assert UsageRecord.objects.filter(source_ref__startswith="turn:", operator=cast.owner).count() == 1


def test_a_raised_limit_clears_the_hold_at_once(cast, api_as, session, chat_standin):
    held = budget(cast, session=session, action="require_approval", limit=Decimal(100))
    spend(session, 100)
    with override_settings(**model_settings(chat_standin)):
        assert turn(api_as(cast.owner), session, "one")["approvals"]
        held.limit = Decimal(1_000_000)
        budget_save(scope=scope_of(cast.admin_user, cast.acme), budget=held, created=False)
        body = turn(api_as(cast.owner), session, "two")
    assert body["approvals"] == [] and body["reply"] == "stand-in answer to: two"
    assert len(chat_standin.requests) == 1


def test_a_notify_budget_never_holds_anything(cast, api_as, session, chat_standin):
    budget(cast, session=session, action="notify", limit=Decimal(100))
    spend(session, 500)
    with override_settings(**model_settings(chat_standin)):
        body = turn(api_as(cast.owner), session, "carry on")
    assert body["approvals"] == [] and len(chat_standin.requests) == 1


def test_at_100_percent_raw_input_is_held_until_approved(
    cast, api_as, start_session, django_capture_on_commit_callbacks
):
    tmux_session = start_session()
    budget(cast, operator=cast.owner, action="require_approval", limit=Decimal(100))
    spend(SessionFactory.create(owner=cast.owner, tenant=cast.acme), 150)
    client = api_as(cast.owner)
    url = f"/api/v1/sessions/{tmux_session.pk}/"
    client.post(url + "attach/", {"mode": "interactive"}, format="json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url + "messages/", {"text": "echo over"}, format="json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex
        )
    assert response.status_code == 202
    body = response.json()
    assert (body["state"], body["inbox_id"]) == ("awaiting_approval", None)
    assert not InboxItem.objects.filter(session=tmux_session).exists()
    approve(cast, body["approval"]["id"], django_capture_on_commit_callbacks)
    assert pump_until(tmux_session, "got:echo over").count("got:echo over") == 1


# --- who may change budgets --------------------------------------------------------------------------------


def test_only_a_tenant_admin_sets_budgets_and_every_change_is_audited(cast, session):
    for who in (cast.owner, cast.auditor, cast.approver):
        with pytest.raises(Exception, match="admins"):
            budget_save(
                scope=scope_of(who, cast.acme),
                budget=Budget(tenant=cast.acme, name="x", metric="tokens", limit=Decimal(1)),
                created=True,
            )
    with pytest.raises(Exception, match="admins"):
        budget_save(
            scope=scope_of(cast.outsider, cast.globex),
            budget=Budget(tenant=cast.acme, name="x", metric="tokens", limit=Decimal(1)),
            created=True,
        )
    assert not Budget.objects.exists()
    made = budget(cast, name="daily", metric="cost", currency="usd", limit=Decimal("12.5"))
    assert made.currency == "USD"
    event = AuditEvent.objects.get(action="budget.created")
    assert (event.target_id, event.metadata["limit"], event.actor_id) == (str(made.pk), "12.5", cast.admin_user.pk)


@pytest.mark.parametrize("who", ["owner", "auditor", "approver", "outsider"])
def test_the_admin_refuses_budget_changes_to_anyone_but_a_tenant_admin(cast, client, session, who):
    made = budget(cast, name="daily")
    client.force_login(getattr(cast, who))
    form = {
        "tenant": cast.acme.pk,
        "name": "mine",
        "period": "day",
        "metric": "tokens",
        "limit": "5",
        "action": "notify",
    }
    # globex's admin may add budgets to globex only: acme is not among the form's tenants (the form refuses).
    assert client.post("/admin/sessions_app/budget/add/", form).status_code == (200 if who == "outsider" else 403)
    assert client.post(f"/admin/sessions_app/budget/{made.pk}/change/", {**form, "limit": "1"}).status_code in (
        403,
        302,  # another tenant's budget is "not found" and sent back to the list
    )
    assert client.post(f"/admin/sessions_app/budget/{made.pk}/delete/", {"post": "yes"}).status_code in (403, 302)
    assert list(Budget.objects.values_list("name", "limit")) == [("daily", Decimal(1000))]
    listed = client.get("/admin/sessions_app/budget/")
    assert listed.status_code == (200 if who in ("auditor", "outsider") else 403)
    assert ("daily" in listed.content.decode()) == (who == "auditor")


def test_a_tenant_admin_sets_a_budget_in_the_admin_and_it_is_audited(cast, client, session):
    client.force_login(cast.admin_user)
    form = {
        "tenant": cast.acme.pk,
        "name": "pi spend",
        "operator": cast.owner.pk,
        "period": "week",
        "metric": "cost",
        "currency": "eur",
        "limit": "40",
        "action": "require_approval",
    }
    response = client.post("/admin/sessions_app/budget/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    made = Budget.objects.get()
    assert (made.operator, made.currency, made.action) == (cast.owner, "EUR", "require_approval")
    assert AuditEvent.objects.filter(action="budget.created", target_id=str(made.pk)).exists()
    refused = client.post("/admin/sessions_app/budget/add/", {**form, "operator": cast.outsider.pk})
    assert refused.status_code == 200 and Budget.objects.count() == 1  # not a member: the form says so


def test_the_usage_page_shows_each_visible_budget_s_state(cast, client, session):
    budget(cast, session=session, name="held-here", action="require_approval", limit=Decimal(100))
    budget(cast, operator=cast.teammate, name="teammates-own")
    spend(session, 120)
    client.force_login(cast.owner)
    page = client.get("/usage/").content.decode()
    assert "held-here" in page and "120 tokens (120%)" in page and "reached: turns and input need an approval" in page
    assert "teammates-own" not in page
    client.force_login(cast.auditor)
    assert "teammates-own" in client.get("/usage/").content.decode()
