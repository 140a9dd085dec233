"""Performance figures, each a ratio against a baseline measured in the same run on the same machine.

Run with ``make bench`` (real PostgreSQL; a throwaway database ``tess_bench``). Ratios, not seconds,
are the figures to compare between runs and machines.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.test")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from approvals_app.services import record_audit  # noqa: E402
from tess_site.accounts import services as accounts  # noqa: E402
from tess_site.accounts.models import PersonalToken  # noqa: E402
from tess_site.accounts.selectors import roles_for  # noqa: E402
from tess_site.scope import Channel, Role, Scope  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
N = int(os.environ.get("BENCH_N", "300"))


def per_op_us(fn: Callable[[], object], n: int = N) -> float:
    """Median over ROUNDS of the mean time of one call, in microseconds."""
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(samples)


def main() -> None:
    logging.disable(logging.WARNING)  # 400s are the point of the third figure; keep the table readable
    setup_test_environment()
    call_command("migrate", verbosity=0)
    tenant = accounts.tenant_create(slug=f"bench-{int(time.time())}")
    user, _ = accounts.user_ensure(username=f"bench-{tenant.pk}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.CLI,
        correlation_id="bench-run-0001",
        roles=roles_for(user=user, tenant=tenant),
    )
    token = accounts.token_issue(scope=scope, name="bench").plaintext
    token_row = PersonalToken.objects.get(user=user)

    rows: list[tuple[str, str, float, float]] = []

    # 1. Appending to the audit chain (lock the head, hash, insert, move the head) against the plainest
    #    committed single-row write on the same database.
    def plain_write() -> None:
        with transaction.atomic():
            PersonalToken.objects.filter(pk=token_row.pk).update(last_used_at=timezone.now())

    def audit_append() -> None:
        record_audit(scope, action="bench.append", target_type="bench", target_id="1", outcome="ok", metadata={"n": 1})

    rows.append(
        (
            "audit append (hash-chained, locked)",
            "single-row UPDATE in a transaction",
            per_op_us(plain_write),
            per_op_us(audit_append),
        )
    )

    # 2. An authenticated, scoped API read against the unauthenticated liveness probe: the cost of
    #    token lookup, membership roles and the identity-field check on every request.
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    def healthz() -> None:
        client.get("/healthz")

    def me() -> None:
        assert client.get("/api/v1/me/", **auth).status_code == 200

    rows.append(("GET /api/v1/me/ with a token", "GET /healthz", per_op_us(healthz), per_op_us(me)))

    # 3. The identity-field refusal on a 10 kB JSON body against reading the same body through DRF only.
    body = {"items": [{"name": f"item-{i}", "value": "x" * 40} for i in range(150)]}

    def refused() -> None:
        assert (
            client.post("/api/v1/me/tenant/", {**body, "owner": 1}, content_type="application/json", **auth).status_code
            == 400
        )

    def parsed() -> None:
        client.post("/api/v1/me/tenant/", body, content_type="application/json", **auth)

    rows.append(
        (
            "refusing identity in a 10 kB body",
            "the same body through auth and the view",
            per_op_us(parsed, N // 3),
            per_op_us(refused, N // 3),
        )
    )

    print(f"\nTess benchmarks on {connection.vendor} ({ROUNDS} rounds, median of means)\n")
    print(f"{'measured':<40} {'baseline':<38} {'base µs':>9} {'µs':>9} {'ratio':>7}")
    for name, base_name, base, value in rows:
        print(f"{name:<40} {base_name:<38} {base:>9.1f} {value:>9.1f} {value / base:>6.2f}x")


if __name__ == "__main__":
    main()
