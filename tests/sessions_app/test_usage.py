"""The usage ledger: pi's reported usage read once each, priced where it came without a cost, and read back
grouped only by those who may see it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Sum
from django.test import override_settings

from providers_app.registry import get_provider, reset_instances
from sessions_app import services
from sessions_app.models import Session, UsageDay, UsageRecord
from sessions_app.usage import price_table, usage_record
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory
from tests.providers_app.pi_writer import PiSessionWriter

pytestmark = pytest.mark.django_db

PRICES = {"gpt-priced": {"input": "2", "output": "8", "cache_read": "0.5", "cache_write": "1", "currency": "USD"}}


def pi_usage(rng: random.Random, *, cost: float | None) -> dict[str, Any]:
    tokens = {k: rng.randint(0, 5000) for k in ("input", "output", "cacheRead", "cacheWrite")}
    parts = {k: 0.0 for k in ("input", "output", "cacheRead", "cacheWrite")}
    return {**tokens, "totalTokens": sum(tokens.values()), "cost": {**parts, "total": cost or 0}}


@pytest.fixture
def pi_session(cast: Cast, settings: Any, tmp_path: Path) -> Iterator[tuple[Session, PiSessionWriter]]:
    settings.TESS_MODEL_PRICES = PRICES
    writer = PiSessionWriter(tmp_path / "pi")
    writer.user("Refactor the parser")
    settings.TESS_RUNTIME_PROVIDERS = {"pi1": {"kind": "pi", "sessions_dir": str(tmp_path / "pi")}}
    reset_instances()
    admin = scope_of(cast.admin_user, cast.acme)
    [runtime] = get_provider("pi1").list_sessions(admin)
    session = services.session_adopt(
        scope=admin, instance="pi1", runtime_id=runtime.ref.runtime_id, assignee="owner", title="pi work"
    )
    yield session, writer
    reset_instances()


def test_the_ledger_equals_the_file_s_usage_however_often_the_file_is_read(pi_session):
    session, writer = pi_session
    rng = random.Random(19)
    expected: dict[str, Decimal | None] = {}
    tokens = 0
    fork = None
    for n in range(60):
        kind = n % 3  # reported by pi; tokens only, priced by Tess; tokens only, no price anywhere
        model = ("gpt-reported", "gpt-priced", "gpt-unpriced")[kind]
        usage = pi_usage(rng, cost=round(rng.uniform(0.001, 0.5), 6) if kind == 0 else None)
        entry = writer.assistant(f"step {n}", model=model, usage=usage, **({"parent": fork} if n == 40 else {}))
        tokens += usage["totalTokens"]
        if kind == 0:
            expected[entry] = Decimal(str(usage["cost"]["total"]))
        elif kind == 1:
            priced = usage["input"] * 2 + usage["output"] * 8 + usage["cacheRead"] * Decimal("0.5")
            expected[entry] = (priced + usage["cacheWrite"]) / Decimal(1_000_000)
        else:
            expected[entry] = None
        if n == 20:
            fork = writer.user("Try the other approach")
        if n == 30:
            writer.compaction("Parser refactored.", first_kept=entry)
        if n % 7 == 0:  # the reader follows the file as it grows
            services.session_pump(session_id=session.pk)
    for _ in range(5):
        services.session_pump(session_id=session.pk)

    def ledger() -> dict[str, Decimal | None]:
        rows = UsageRecord.objects.filter(session=session)
        return {row.source_ref.removeprefix("pi:"): row.cost for row in rows}

    assert ledger() == expected
    rows = UsageRecord.objects.filter(session=session)
    counted = sum(r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens for r in rows)
    assert counted == tokens
    assert {r.cost_source for r in rows if r.model == "gpt-unpriced"} == {"unpriced"}
    assert {(r.currency, r.operator_id, r.provider_instance) for r in rows if r.cost is not None} == {
        ("USD", session.owner_id, "pi1")
    }

    # The day rows the API reads hold the same sums.
    days = UsageDay.objects.filter(session=session).aggregate(
        steps=Sum("steps"), unpriced=Sum("unpriced_steps"), cost=Sum("cost"), tokens=Sum("input_tokens")
    )
    assert days["steps"] == len(expected) and days["unpriced"] == 20
    assert days["cost"] == sum(cost for cost in expected.values() if cost is not None)
    assert days["tokens"] == sum(r.input_tokens for r in rows)

    # A reader that starts over (its cursor lost, or a second reader) counts nothing twice.
    Session.objects.filter(pk=session.pk).update(cursor="")
    for _ in range(5):
        services.session_pump(session_id=session.pk)
    assert ledger() == expected
    assert UsageDay.objects.filter(session=session).aggregate(steps=Sum("steps"))["steps"] == len(expected)


@pytest.mark.parametrize(
    "table",
    [
        {"m": {"input": "-1"}},
        {"m": {"input": "cheap"}},
        {"m": {"output": "1", "currency": "dollars"}},
        {"m": "1.0"},
    ],
)
def test_a_bad_price_table_is_refused_with_its_entry_named(settings, table):
    settings.TESS_MODEL_PRICES = table
    with pytest.raises(ImproperlyConfigured, match=r"TESS_MODEL_PRICES\['m'\]"):
        price_table()


def _steps(session: Session, *steps: dict[str, Any]) -> None:
    assert usage_record(session=session, steps=[{"currency": "USD", **step} for step in steps]) == len(steps)


@pytest.fixture
def ledger(cast: Cast) -> dict[str, Session]:
    mine = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="pi1")
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, provider_instance="tmux1")
    elsewhere = SessionFactory.create(owner=cast.outsider, tenant=cast.globex, provider_instance="pi1")
    with override_settings(TESS_MODEL_PRICES={"m": {"input": "10000"}}):
        _steps(mine, {"ref": "a", "model": "m", "input": 100, "output": 10, "cost": "0.25"})
        _steps(mine, {"ref": "b", "model": "m", "input": 50}, {"ref": "c", "model": "x", "output": 7})
        _steps(theirs, {"ref": "d", "model": "m", "input": 1, "cost": "9"})
        _steps(elsewhere, {"ref": "e", "model": "m", "input": 1, "cost": "99"})
        assert usage_record(session=mine, steps=[{"ref": "a", "model": "m", "input": 100, "cost": "0.25"}]) == 0
    return {"mine": mine, "theirs": theirs, "elsewhere": elsewhere}


def test_an_operator_reads_the_usage_of_their_own_sessions_only(cast, api_as, ledger):
    body = api_as(cast.owner).get("/api/v1/usage/?group_by=model").json()
    assert body["group_by"] == "model"
    by = {(r["group"], r["currency"]): r for r in body["results"]}
    assert set(by) == {("m", "USD"), ("x", None)}
    assert (by["m", "USD"]["cost"], by["m", "USD"]["steps"], by["m", "USD"]["input_tokens"]) == ("0.75", 2, 150)
    assert (by["x", None]["cost"], by["x", None]["unpriced_steps"], by["x", None]["output_tokens"]) == (None, 1, 7)
    assert api_as(cast.outsider, cast.globex).get("/api/v1/usage/?group_by=session").json()["results"] == [
        {
            "group": str(ledger["elsewhere"].pk),
            "currency": "USD",
            "steps": 1,
            "input_tokens": 1,
            "output_tokens": 0,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "cost": "99",
            "unpriced_steps": 0,
        }
    ]


def test_an_auditor_reads_the_whole_tenant_and_nothing_of_another(cast, api_as, ledger):
    rows = api_as(cast.auditor).get("/api/v1/usage/?group_by=operator").json()["results"]
    assert {(r["group"], r["currency"], r["cost"]) for r in rows} == {
        ("owner", "USD", "0.75"),
        ("owner", None, None),
        ("teammate", "USD", "9"),
    }


def test_a_granted_session_s_usage_is_readable_and_a_window_limits_the_rows(cast, api_as, ledger):
    services.session_grant(scope=scope_of(cast.teammate, cast.acme), session_id=ledger["theirs"].pk, grantee=cast.owner)
    rows = api_as(cast.owner).get("/api/v1/usage/?group_by=provider").json()["results"]
    assert {(r["group"], r["cost"]) for r in rows} == {("pi1", "0.75"), ("pi1", None), ("tmux1", "9")}
    day = api_as(cast.owner).get("/api/v1/usage/?group_by=day").json()["results"]
    assert sum(r["steps"] for r in day) == 4
    later = api_as(cast.owner).get("/api/v1/usage/?since=2999-01-01").json()["results"]
    assert later == []


@pytest.mark.parametrize(
    "query",
    ["group_by=tenant", "group_by=", "since=yesterday", "since=2026-02-01&until=2026-01-31"],
)
def test_a_malformed_query_is_a_validation_error(cast, api_as, ledger, query):
    response = api_as(cast.owner).get(f"/api/v1/usage/?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


def test_the_ledger_is_not_written_through_the_api_or_the_admin(cast, api_as, client, ledger):
    assert api_as(cast.owner).post("/api/v1/usage/", {}, format="json").status_code == 405
    client.force_login(cast.admin_user)
    row = UsageRecord.objects.filter(tenant=cast.acme).first()
    assert row is not None
    assert client.post(f"/admin/sessions_app/usagerecord/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert UsageRecord.objects.filter(pk=row.pk).exists()


def test_the_usage_page_and_its_csv_show_only_what_the_reader_may_see(cast, client, ledger):
    assert client.get("/usage/").status_code == 302  # the admin login first
    client.force_login(cast.outsider)
    page = client.get("/usage/?since=2000-01-01")
    assert page.status_code == 200
    assert str(ledger["elsewhere"].pk) in page.content.decode()
    assert str(ledger["mine"].pk) not in page.content.decode()
    exported = client.get("/usage/export.csv?since=2000-01-01").content.decode().splitlines()
    assert len(exported) == 2 and exported[1].startswith(str(ledger["elsewhere"].pk))
    client.force_login(cast.auditor)
    exported = client.get("/usage/export.csv?since=2000-01-01").content.decode()
    assert str(ledger["theirs"].pk) in exported and str(ledger["elsewhere"].pk) not in exported
