"""The session list of an operator with 4 sessions, in a tenant of 100 sessions and in one of 100,000.

Both tenants are loaded first, then the whole table is vacuumed, analyzed and checkpointed, so neither size
pays for its own set-up (as in ``bench/b_memory.py``). Measured: one evaluation of the list query the API
runs (``sessions_listed``, first 200 rows), timed interleaved so both sizes see the same machine noise.
The same comparison is then made over real HTTP, ``GET /api/v1/sessions/`` with each operator's token through
the production tier (``bench/topology.py``: gunicorn from ``tess-web.service`` under the production settings,
behind nginx), ``BENCH_LIST_HTTP_SAMPLES`` (200) each, interleaved. The target of both is at most 1.25x: the
list is read through the owner and grant indexes, so its cost follows the operator's sessions, not the
tenant's.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

import httpx
from django.db import connection

from bench.common import ROUNDS, Row
from bench.topology import production_tier

OWN = 4
SMALL = int(os.environ.get("BENCH_LIST_SMALL", "100"))
LARGE = int(os.environ.get("BENCH_LIST_LARGE", "100000"))
SAMPLES = 400
HTTP_SAMPLES = int(os.environ.get("BENCH_LIST_HTTP_SAMPLES", "200"))


def run() -> list[Row]:
    from sessions_app.models import Session
    from sessions_app.selectors import sessions_listed
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    suffix = uuid.uuid4().hex[:8]
    scopes: dict[int, Scope] = {}
    tenants = []
    for size in (SMALL, LARGE):
        tenant = accounts.tenant_create(slug=f"bench-lists-{size}-{suffix}")
        tenants.append(tenant)
        me, _ = accounts.user_ensure(username=f"bench-lists-me-{size}-{suffix}", password="bench-pass-1234")
        other, _ = accounts.user_ensure(username=f"bench-lists-other-{size}-{suffix}", password="bench-pass-1234")
        for user in (me, other):
            accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
        rows = [
            Session(
                tenant=tenant,
                owner=me if i < OWN else other,
                title="bench",
                provider_instance="bench",
                runtime_id=f"bench-{suffix}-{size}-{i}",
            )
            for i in range(size)
        ]
        Session.objects.bulk_create(rows, batch_size=5_000)
        scopes[size] = Scope(
            tenant=tenant,
            actor=me,
            channel=Channel.CLI,
            correlation_id="bench-lists",
            roles=roles_for(user=me, tenant=tenant),
        )
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {Session._meta.db_table}")
        cursor.execute("CHECKPOINT")

    def listed(size: int) -> None:
        found = list(sessions_listed(scope=scopes[size])[:200])
        assert len(found) == OWN

    for _ in range(50):
        listed(SMALL)
        listed(LARGE)
    samples: dict[int, list[float]] = {SMALL: [], LARGE: []}
    for _ in range(max(ROUNDS, 1) * SAMPLES // 5):
        for size in (SMALL, LARGE):
            started = time.perf_counter()
            listed(size)
            samples[size].append((time.perf_counter() - started) * 1e6)
    try:
        over_http = _over_http({size: accounts.token_issue(scope=scope, name="bench").plaintext
                                for size, scope in scopes.items()})  # fmt: skip
        return [
            Row(
                f"sessions list, {OWN} own in {LARGE // 1000}k sessions",
                f"same, in a tenant of {SMALL} sessions",
                statistics.median(samples[SMALL]),
                statistics.median(samples[LARGE]),
                at_most=1.25,
            ),
            Row(
                f"GET sessions over nginx, {OWN} own in {LARGE // 1000}k",
                f"same, in a tenant of {SMALL} sessions",
                statistics.median(over_http[SMALL]),
                statistics.median(over_http[LARGE]),
                at_most=1.25,
            ),
        ]
    finally:
        Session.objects.filter(tenant__in=tenants).delete()


def _over_http(tokens: dict[int, str]) -> dict[int, list[float]]:
    """``GET /api/v1/sessions/`` of each operator through the production tier, interleaved, in microseconds."""
    samples: dict[int, list[float]] = {size: [] for size in tokens}
    with (
        production_tier("lists", TESS_MODEL_ADAPTER="deterministic") as tier,
        httpx.Client(base_url=tier.url, timeout=60, trust_env=False) as client,
    ):
        headers = {size: {"Authorization": f"Bearer {token}"} for size, token in tokens.items()}

        def listed(size: int) -> None:
            response = client.get("/api/v1/sessions/", headers=headers[size])
            assert response.status_code == 200, response.text
            assert len(response.json()["results"]) == OWN, response.text

        for _ in range(20):
            for size in tokens:
                listed(size)
        for _ in range(HTTP_SAMPLES):
            for size in tokens:
                started = time.perf_counter()
                listed(size)
                samples[size].append((time.perf_counter() - started) * 1e6)
    return samples
