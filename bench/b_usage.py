"""The usage ledger: ingesting a pi session file, and the grouped usage read over a million rows.

Ingestion: a pi session file of ``BENCH_USAGE_ENTRIES`` (100,000) entries, every other one an assistant
message with its ``usage``, bound to a Tess session and read by the pump as it reads any session (output
events and ledger rows in the transaction that advances the cursor), until its cursor reaches the end.
Baseline, in the same run: reading the same file's JSON lines with no database (``json.loads`` per line).
Figures: entries per second of each.

Grouped read: ``BENCH_USAGE_ROWS`` (1,000,000) ledger rows of 200 sessions over 90 days in one tenant,
recorded as the pump records them (with their day rows), then vacuumed and analyzed. Measured:
``usage_grouped(group_by="day")`` for the tenant's auditor (what ``GET /api/v1/usage/?group_by=day`` runs)
beside a plain ``COUNT(*)`` of the same ledger rows, the median of ``BENCH_ROUNDS``, interleaved. Target: at most 5x.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from django.db import connection, transaction
from django.utils import timezone

from bench.common import ROUNDS, Row

ENTRIES = int(os.environ.get("BENCH_USAGE_ENTRIES", "100000"))
ROWS = int(os.environ.get("BENCH_USAGE_ROWS", "1000000"))


def _ingestion(tenant, owner, scope) -> list[Row]:
    from django.conf import settings

    from providers_app.registry import get_provider, reset_instances
    from sessions_app import services
    from sessions_app.models import Session, UsageRecord
    from tests.providers_app.pi_writer import PiSessionWriter

    rng = random.Random(19)
    with tempfile.TemporaryDirectory() as root:
        writer = PiSessionWriter(Path(root) / "pi")
        for n in range(ENTRIES // 2):
            writer.user(f"step {n}")
            tokens = {k: rng.randint(0, 4000) for k in ("input", "output", "cacheRead", "cacheWrite")}
            cost = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": rng.uniform(0.001, 0.1)}
            writer.assistant(f"done {n}", usage={**tokens, "totalTokens": sum(tokens.values()), "cost": cost})
        started = time.perf_counter()
        with writer.path.open("rb") as handle:
            lines = sum(1 for line in handle if json.loads(line))
        plain = time.perf_counter() - started

        saved = settings.TESS_RUNTIME_PROVIDERS
        settings.TESS_RUNTIME_PROVIDERS = {"bench-pi": {"kind": "pi", "sessions_dir": str(Path(root) / "pi")}}
        reset_instances()
        try:
            [runtime] = get_provider("bench-pi").list_sessions(scope)
            session = services.session_adopt(
                scope=scope,
                instance="bench-pi",
                runtime_id=runtime.ref.runtime_id,
                assignee=owner.username,
                title="bench usage",
            )
            size = writer.path.stat().st_size
            started = time.perf_counter()
            while True:
                services.session_pump(session_id=session.pk)
                cursor = Session.objects.values_list("cursor", flat=True).get(pk=session.pk)
                if cursor == f"{size}.0":
                    break
            pumped = time.perf_counter() - started
            recorded = UsageRecord.objects.filter(session=session).count()
        finally:
            settings.TESS_RUNTIME_PROVIDERS = saved
            reset_instances()
    assert recorded == ENTRIES // 2, (recorded, ENTRIES // 2)
    print(
        f"usage: {lines} lines of a pi session file read in {plain:.2f} s with no database; ingested in "
        f"{pumped:.2f} s by the pump ({recorded} ledger rows)"
    )
    return [
        Row(
            "usage: pi file ingested (entries/s)",
            "the same lines parsed, no database",
            lines / plain,
            lines / pumped,
            "entries/s",
        ),
    ]


def _grouped(tenant, owner, auditor_scope) -> list[Row]:
    from sessions_app.models import Session, UsageRecord
    from sessions_app.usage import usage_grouped, usage_record

    rng = random.Random(20)
    run_id = uuid.uuid4().hex[:8]
    sessions = Session.objects.bulk_create(
        [
            Session(
                tenant=tenant, owner=owner, title="bench", provider_instance="bench-pi", runtime_id=f"u-{run_id}-{i}"
            )
            for i in range(200)
        ]
    )
    now = timezone.now()
    per_session = ROWS // len(sessions)
    for number, session in enumerate(sessions):
        steps = [
            {
                "ref": f"bench:{number}:{n}",
                "model": "m",
                "input": rng.randint(0, 4000),
                "output": rng.randint(0, 800),
                "cost": str(Decimal(rng.randint(1, 100_000)) / 1_000_000),
                "currency": "USD",
                "at": (now - timedelta(seconds=rng.randint(0, 90 * 86400))).isoformat(),
            }
            for n in range(per_session)
        ]
        with transaction.atomic():
            usage_record(session=session, steps=steps)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE sessions_app_usagerecord")
        cursor.execute("VACUUM ANALYZE sessions_app_usageday")

    total = UsageRecord.objects.filter(tenant=tenant).count()  # the ingested file's rows as well

    def count() -> float:
        started = time.perf_counter()
        UsageRecord.objects.filter(tenant=tenant).count()
        return time.perf_counter() - started

    def grouped() -> float:
        started = time.perf_counter()
        rows = usage_grouped(scope=auditor_scope, group_by="day", since=None, until=None)
        assert sum(r["steps"] for r in rows) == total
        return time.perf_counter() - started

    counts, groups = [], []
    for _ in range(ROUNDS):
        counts.append(count())
        groups.append(grouped())
    base, value = statistics.median(counts) * 1000, statistics.median(groups) * 1000
    print(f"usage: {ROWS} rows grouped by day in {value:.0f} ms beside COUNT(*) in {base:.0f} ms")
    return [
        Row("usage: GET /usage/ grouped by day (1M rows)", "COUNT(*) of those rows", base, value, "ms", at_most=5.0)
    ]


def run() -> list[Row]:
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    suffix = uuid.uuid4().hex[:8]
    tenant = accounts.tenant_create(slug=f"bench-usage-{suffix}")
    owner, _ = accounts.user_ensure(username=f"bench-usage-op-{suffix}", password="bench-pass-1234")
    auditor, _ = accounts.user_ensure(username=f"bench-usage-audit-{suffix}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=owner, role=Role.OPERATOR)
    accounts.membership_grant(tenant=tenant, user=auditor, role=Role.AUDITOR)

    def scope_of(user) -> Scope:
        return Scope(
            tenant=tenant,
            actor=user,
            channel=Channel.CLI,
            correlation_id="bench-usage",
            roles=roles_for(user=user, tenant=tenant),
        )

    admin, _ = accounts.user_ensure(username=f"bench-usage-admin-{suffix}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=admin, role=Role.ADMIN)
    return _ingestion(tenant, owner, scope_of(admin)) + _grouped(tenant, owner, scope_of(auditor))
