"""Operator memory recall (seed 002): the whole recall — select, validate, re-ground pins, render, mark
used — at 1,000 and at 100,000 operators with full categories (21 rows each, about 2.1 million rows).

Baselines from the same run: a ``SELECT 1`` round trip, and the floor any implementation has — the same
select and last-use update as one raw SQL transaction. Targets: recall p95 at most 2x the raw
transaction's p95, and recall at 100,000 operators at most 1.25x recall at 1,000 (it must not grow with
the table). Each size is measured on a settled table (``_settle``: vacuumed, analyzed and checkpointed
after its bulk load), so neither figure includes set-up work. ``BENCH_MEMORY_OPERATORS`` changes the
large size (e.g. 20000 for a quick run).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from bench.common import Row, percentile
from memory_app.recall import recall_for_prompt
from tess_site.accounts import services as accounts
from tess_site.audit.services import record_audit
from tess_site.scope import Channel, Role, Scope

SMALL = 1_000
LARGE = int(os.environ.get("BENCH_MEMORY_OPERATORS", "100000"))
SAMPLES = int(os.environ.get("BENCH_MEMORY_SAMPLES", "1500"))
PINS = 8

RAW_SELECT = """
    SELECT id, category, slot, value, ref, salience, reauthorized_at
      FROM memory_app_operatormemory
     WHERE tenant_id = %s AND operator_id = %s AND (expires_at IS NULL OR expires_at > now())
     ORDER BY salience DESC, reauthorized_at DESC, id
     LIMIT 8
"""
RAW_UPDATE = "UPDATE memory_app_operatormemory SET last_used_at = now() WHERE id = ANY(%s)"


def _insert_operators(tenant_id: int, prefix: str, start: int, stop: int) -> None:
    """Users ``start..stop-1`` and their full categories, in set-based SQL (seconds, not hours)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO auth_user (username, password, is_superuser, first_name, last_name, email, is_staff,
                                   is_active, date_joined)
            SELECT %s || g, '!', false, '', '', '', true, true, now() FROM generate_series(%s, %s) g
            """,
            [prefix, start, stop - 1],
        )
        cursor.execute(
            """
            INSERT INTO memory_app_operatormemory
                (tenant_id, operator_id, category, slot, memory_id, revision, predecessor_revision, value,
                 canonical, ref, source_ref, card_ref, confirmed_at, reauthorized_ref, reauthorized_at, salience,
                 expires_at, updated_at, last_used_at)
            SELECT %(tenant)s, u.id, n.category, n.slot, gen_random_uuid(), 1, NULL, n.value || ' ' || u.id,
                   n.value || ' ' || u.id, n.ref, 'channel:web', 'bench', now() - n.age, 'bench',
                   now() - n.age, n.salience, n.expires_at, now(), NULL
              FROM auth_user u
             CROSS JOIN (
                   SELECT 'preferences' AS category, 'pref-' || i AS slot, 'preference ' || i || ' of' AS value,
                          '' AS ref, 50 AS salience, NULL::timestamptz AS expires_at, i * interval '1 minute' AS age
                     FROM generate_series(1, 12) i
                   UNION ALL
                   SELECT 'standing_initiative', 'current', 'driving phase 5 for', '', 100,
                          now() + interval '30 days', interval '0 minutes'
                   UNION ALL
                   SELECT 'pinned_contexts', 'pin-' || i, 'pinned context ' || i || ' of', 'audit:' || i, 80,
                          now() + interval '14 days', i * interval '1 minute'
                     FROM generate_series(1, %(pins)s) i
             ) n
             WHERE u.username LIKE %(like)s AND substr(u.username, length(%(prefix)s) + 1)::int BETWEEN %(a)s AND %(b)s
            """,
            {"tenant": tenant_id, "pins": PINS, "like": prefix + "%", "prefix": prefix, "a": start, "b": stop - 1},
        )
    _settle()


def _settle() -> None:
    """Leave the freshly loaded table as a live one is between turns, before either size is measured.

    A bulk load leaves every page without hint bits or visibility information (the first read of each page
    would write it; autovacuum does that on a live table) and a backlog of WAL that starts a checkpoint at
    some point of the next minutes. Measured straight after loading, the large size would pay for its own
    set-up, the small one hardly at all. Both sizes therefore start the same way: vacuumed, analyzed and
    checkpointed (every page's first change after a checkpoint still logs a full page, as in production).
    """
    with connection.cursor() as cursor:
        for table in ("memory_app_operatormemory", "auth_user"):
            cursor.execute(f"VACUUM (ANALYZE) {table}")
        cursor.execute("CHECKPOINT")


def _timed(fns: dict[str, Callable[[], object]], samples: int) -> dict[str, list[float]]:
    """Time every function ``samples`` times, interleaved, so all of them see the same machine noise."""
    names = list(fns)
    for _ in range(min(50, samples)):
        for name in names:
            fns[name]()  # warm the connection, the plan cache and the interpreter
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(samples):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter()
            fns[name]()
            times[name].append((time.perf_counter() - started) * 1e6)
    return times


def _measure(tenant, users: list[User]) -> dict[str, list[float]]:
    scopes = [
        Scope(
            tenant=tenant,
            actor=user,
            channel=Channel.WEB,
            correlation_id="bench-memory",
            roles=frozenset({Role.OPERATOR, Role.AUDITOR}),
        )
        for user in users
    ]
    picks = iter(random.choices(scopes, k=SAMPLES * 3 + 200))

    def recall() -> None:
        assert recall_for_prompt(next(picks)).recalled_count == 8

    def raw() -> None:
        scope = next(picks)
        assert scope.actor is not None
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(RAW_SELECT, [tenant.pk, scope.actor.pk])
            ids = [row[0] for row in cursor.fetchall()]
            cursor.execute(RAW_UPDATE, [ids])

    def select_1() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    return _timed({"recall": recall, "raw": raw, "select1": select_1}, SAMPLES)


def run() -> list[Row]:
    if connection.vendor != "postgresql":
        return []
    stamp = f"{timezone.now():%H%M%S%f}"
    tenant = accounts.tenant_create(slug=f"bench-mem-{stamp}")
    system = Scope(tenant=tenant, actor=None, channel=Channel.SYSTEM, correlation_id="bench-memory")
    for _ in range(PINS):  # what the pins point at: audit rows the bench operators (auditors) may read
        record_audit(system, action="bench.pin", target_type="bench", outcome="ok")
    prefix = f"bm{stamp}-"
    try:
        _insert_operators(tenant.pk, prefix, 0, SMALL)
        small_users = list(User.objects.filter(username__startswith=prefix))
        small = _measure(tenant, small_users)
        _insert_operators(tenant.pk, prefix, SMALL, LARGE)
        large_users = random.sample(list(User.objects.filter(username__startswith=prefix)), 5000)
        large = _measure(tenant, large_users)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_app_operatormemory WHERE tenant_id = %s", [tenant.pk])
            (row_count,) = cursor.fetchone()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memory_app_operatormemory WHERE tenant_id = %s", [tenant.pk])
            cursor.execute("DELETE FROM auth_user WHERE username LIKE %s", [prefix + "%"])
            cursor.execute("VACUUM ANALYZE memory_app_operatormemory")  # the next run starts from a lean table

    def p(values: list[float], q: float) -> float:
        return percentile(values, q)

    big = f"{LARGE // 1000}k ops ({row_count / 1e6:.1f}M rows)"
    return [
        Row(
            "memory recall p50, 1k operators",
            "SELECT 1 round trip p50",
            p(small["select1"], 0.5),
            p(small["recall"], 0.5),
        ),
        Row(
            "memory recall p95, 1k operators",
            "raw select+update txn p95, 1k",
            p(small["raw"], 0.95),
            p(small["recall"], 0.95),
        ),
        Row(f"memory recall p50, {big}", "SELECT 1 round trip p50", p(large["select1"], 0.5), p(large["recall"], 0.5)),
        Row(
            f"memory recall p95, {LARGE // 1000}k operators",
            f"raw select+update txn p95, {LARGE // 1000}k",
            p(large["raw"], 0.95),
            p(large["recall"], 0.95),
        ),
        Row(
            f"memory recall p95, {LARGE // 1000}k vs 1k operators",
            "memory recall p95, 1k operators",
            p(small["recall"], 0.95),
            p(large["recall"], 0.95),
        ),
        Row(
            f"raw select+update txn p50, {LARGE // 1000}k",
            "SELECT 1 round trip p50",
            p(large["select1"], 0.5),
            p(large["raw"], 0.5),
        ),
    ]
