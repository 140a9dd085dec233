"""Foundation figures: the audit chain, a token-scoped API read, and the identity-field refusal."""

from __future__ import annotations

from django.db import transaction
from django.test import Client
from django.utils import timezone

from bench.common import Row, per_op_us
from tess_site.accounts import services as accounts
from tess_site.accounts.models import PersonalToken
from tess_site.accounts.selectors import roles_for
from tess_site.audit.services import record_audit
from tess_site.scope import Channel, Role, Scope

N = 300


def run() -> list[Row]:
    tenant = accounts.tenant_create(slug=f"bench-{timezone.now():%H%M%S%f}")
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
    rows: list[Row] = []

    # 1. Appending to the audit chain (lock the head, hash, insert, move the head) against the plainest
    #    committed single-row write on the same database.
    def plain_write() -> None:
        with transaction.atomic():
            PersonalToken.objects.filter(pk=token_row.pk).update(last_used_at=timezone.now())

    def audit_append() -> None:
        record_audit(scope, action="bench.append", target_type="bench", target_id="1", outcome="ok", metadata={"n": 1})

    rows.append(
        Row(
            "audit append (hash-chained, locked)",
            "single-row UPDATE in a transaction",
            per_op_us(plain_write, N),
            per_op_us(audit_append, N),
        )
    )

    # 2. An authenticated, scoped API read against the unauthenticated liveness probe: the cost of
    #    token lookup, membership roles and the identity-field check on every request.
    client = Client()
    auth = {"Authorization": f"Bearer {token}"}

    def healthz() -> None:
        client.get("/healthz")

    def me() -> None:
        assert client.get("/api/v1/me/", headers=auth).status_code == 200

    rows.append(Row("GET /api/v1/me/ with a token", "GET /healthz", per_op_us(healthz, N), per_op_us(me, N)))

    # 3. The identity-field refusal on a 10 kB JSON body against the same body going through
    #    authentication and the view.
    body = {"items": [{"name": f"item-{i}", "value": "x" * 40} for i in range(150)]}

    def refused() -> None:
        response = client.post(
            "/api/v1/me/tenant/", {**body, "owner": 1}, content_type="application/json", headers=auth
        )
        assert response.status_code == 400

    def parsed() -> None:
        client.post("/api/v1/me/tenant/", body, content_type="application/json", headers=auth)

    rows.append(
        Row(
            "refusing identity in a 10 kB body",
            "the same body through auth and the view",
            per_op_us(parsed, N // 3),
            per_op_us(refused, N // 3),
        )
    )
    return rows
