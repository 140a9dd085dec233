"""Copilot turn latency: ``POST /api/v1/sessions/<id>/turns/`` with the deterministic adapter,
operator memory served and 8 notes recalled, server side through the whole Django stack (token auth,
idempotency record, turn.in/turn.out events, recall, audit), beside ``GET /healthz`` measured in the same
run. Target: turn p95 at most 10x the health p95. A third row sets the turn beside the cheapest idempotent,
audited POST on the same session (``.../detach/``): the request stack a turn stands on, without the gateway.

Three more rows show the floor any turn stands on, each beside the same health p95: the cheapest
authenticated API request (``GET /api/v1/me/`` with the same token: token lookup, roles, one read, DRF);
one durable commit (a one-row INSERT and COMMIT, the write every turn must make before it answers); and
the database's own work of a turn: the statements one turn made, sent again as one batch in a transaction
that is rolled back (three round trips: BEGIN, the batch, ROLLBACK; no Python in between, no fsync).
``BENCH_TURN_SAMPLES`` sets the sample count.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from approvals_app.cards import card_confirm
from bench.common import Row, percentile
from memory_app.services import memory_propose
from sessions_app.models import Session
from tess_site.accounts import services as accounts
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Role, Scope

SAMPLES = int(os.environ.get("BENCH_TURN_SAMPLES", "400"))
NOTES = 8


def _timings(fn: Callable[[], object], n: int) -> list[float]:
    for _ in range(min(20, n)):  # warm-up: connections, caches, first-request imports
        fn()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1e6)
    return out


def _remember(scope: Scope, data: dict[str, str]) -> None:
    card = memory_propose(scope, data=data)
    card_confirm(scope=scope, card_id=card.id)


def run() -> list[Row]:
    assert settings.TESS_MODEL_ADAPTER == "deterministic", "the turn benchmark measures the deterministic adapter"
    tenant = accounts.tenant_create(slug=f"bench-turns-{timezone.now():%H%M%S%f}")
    user, _ = accounts.user_ensure(username=f"bench-turns-{tenant.pk}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.CLI,
        correlation_id="bench-turns",
        roles=roles_for(user=user, tenant=tenant),
    )
    _remember(scope, {"op": "remember", "category": "standing_initiative", "value": "EVE_EVERYWHERE Phase 5"})
    for i in range(NOTES - 1):
        _remember(scope, {"op": "remember", "category": "preferences", "value": f"bench preference number {i}"})
    token = accounts.token_issue(scope=scope, name="bench").plaintext
    session = Session.objects.create(
        tenant=tenant, owner=user, title="bench", provider_instance="bench", runtime_id=f"${uuid.uuid4().hex[:8]}"
    )
    client = Client()
    url = f"/api/v1/sessions/{session.pk}/turns/"

    def take_turn() -> None:
        response = client.post(
            url,
            {"text": "what am I working on?"},
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
        )
        assert response.status_code == 200, response.content
        assert response.json()["memory"]["recalled_count"] == NOTES

    def healthz() -> None:
        client.get("/healthz")

    def detach() -> None:
        # The cheapest idempotent, audited POST on the same session: the stack a turn stands on, no gateway.
        response = client.post(
            f"/api/v1/sessions/{session.pk}/detach/",
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
        )
        assert response.status_code == 200, response.content

    def me() -> None:
        # The cheapest authenticated API request: what every turn pays before the gateway starts.
        assert client.get("/api/v1/me/", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    def durable_commit() -> None:
        # One row written and committed (the write-ahead log flushed): what every turn pays to be durable.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO bench_turns_commit (at) VALUES (now())")

    def turn_batch() -> str:
        # The statements of one turn (savepoints aside), as literal SQL. The turn runs inside a transaction
        # that is rolled back, so every replay of the batch starts from the same state and stays valid.
        made: list[tuple[str, object]] = []

        def keep(execute: Callable[..., object], sql: str, params: object, many: bool, context: object) -> object:
            if "SAVEPOINT" not in sql:
                made.append((sql, params))
            return execute(sql, params, many, context)

        with transaction.atomic(), connection.execute_wrapper(keep):
            take_turn()
            transaction.set_rollback(True)
        with connection.cursor() as cursor:
            return ";\n".join(cursor.mogrify(sql, params) for sql, params in made)

    def replay(batch: str) -> Callable[[], None]:
        def run() -> None:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(batch)
                transaction.set_rollback(True)

        return run

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_turns_commit (id bigserial PRIMARY KEY, at timestamptz)")
    health = _timings(healthz, SAMPLES)
    turns = _timings(take_turn, SAMPLES)
    floor = _timings(detach, SAMPLES)
    reads = _timings(me, SAMPLES)
    commits = _timings(durable_commit, SAMPLES)
    replays = _timings(replay(turn_batch()), SAMPLES)  # right after the capture: nothing committed since
    name = f"turn (deterministic, {NOTES} notes recalled)"
    health_p95 = percentile(health, 0.95)
    return [
        Row(f"{name} p50", "GET /healthz p50", percentile(health, 0.5), percentile(turns, 0.5)),
        Row(f"{name} p95", "GET /healthz p95", percentile(health, 0.95), percentile(turns, 0.95)),
        Row(f"{name} p95", "audited POST .../detach/ p95", percentile(floor, 0.95), percentile(turns, 0.95)),
        Row("floor: GET /api/v1/me/ (token) p95", "GET /healthz p95", health_p95, percentile(reads, 0.95)),
        Row("floor: one-row INSERT + COMMIT p95", "GET /healthz p95", health_p95, percentile(commits, 0.95)),
        Row("floor: a turn's SQL in one batch p95", "GET /healthz p95", health_p95, percentile(replays, 0.95)),
    ]
