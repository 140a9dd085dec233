"""The approval, card and hand-off lists cost what the caller's own rows cost, however many rows other people
have in the same tenant: PostgreSQL reads each through the caller's indexes, never by scanning the tenant.

No timing: the shared buffers ``EXPLAIN (ANALYZE, BUFFERS)`` reports for each list query with 1,000 rows of
other people in the tenant (already enough for every table to span pages) and again with 21,000.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Model, QuerySet
from django.utils import timezone

from approvals_app.approval_selectors import approvals_visible
from approvals_app.card_selectors import cards_visible
from approvals_app.handoff_selectors import handoffs_listed
from approvals_app.models import Approval, ApprovalLink, Card, Handoff
from tests.conftest import scope_of
from tests.plans import analyze, explain

pytestmark = [pytest.mark.postgres]

FEW, MANY = 1_000, 20_000
PAGE = 51  # the cursor paginator reads one row past a page of 50


def _approval(tenant: Any, requester: Any, i: int, **extra: Any) -> Approval:
    return Approval(
        tenant=tenant,
        requester=requester,
        action="test.touch",
        target_type="thing",
        target_id=str(i),
        channel="cli",
        correlation_id=f"c{i}",
        expires_at=timezone.now() + timedelta(hours=1),
        **extra,
    )


def _grows_not(queries: Callable[[], list[QuerySet[Any]]], fill: Callable[[int], None], *tables: type[Model]) -> None:
    """Every query of ``queries()`` touches about as many buffers with MANY more rows of others as with FEW,
    and none scans the big table."""
    fill(FEW)
    analyze(*tables)
    small = [explain(q) for q in queries()]
    fill(MANY)
    analyze(*tables)
    big = [explain(q) for q in queries()]
    for before, after in zip(small, big, strict=True):
        assert not after.seq_scanned(tables[0]), f"{after}"
        assert after.buffers <= 1.25 * before.buffers + 16, f"{before}\n---\n{after}"


def test_the_approval_list_does_not_grow_with_the_tenants_other_approvals(cast):
    requested = Approval.objects.bulk_create([_approval(cast.acme, cast.owner, i) for i in range(3)])
    to_decide = Approval.objects.bulk_create([_approval(cast.acme, cast.teammate, i) for i in range(2)])
    ApprovalLink.objects.bulk_create(
        [ApprovalLink(approval=a, approver=cast.owner, token_hash=f"own{i}") for i, a in enumerate(to_decide)]
    )
    scope = scope_of(cast.owner, cast.acme)

    def fill(n: int) -> None:
        """Approvals of the teammate, each with a link for someone else to decide."""
        start = Approval.objects.count()
        rows = Approval.objects.bulk_create(
            [_approval(cast.acme, cast.teammate, i) for i in range(start, start + n)], batch_size=5_000
        )
        ApprovalLink.objects.bulk_create(
            [ApprovalLink(approval=a, approver=cast.approver, token_hash=f"{a.pk.hex}") for a in rows],
            batch_size=5_000,
        )

    def queries() -> list[QuerySet[Any]]:
        listed = approvals_visible(scope=scope).order_by("-created_at")
        return [
            listed[:PAGE],
            listed.filter(status=Approval.Status.PENDING, expires_at__gt=timezone.now())[:PAGE],
            listed.filter(created_at__lt=timezone.now())[:PAGE],  # a later page: the cursor is a created_at
        ]

    _grows_not(queries, fill, Approval, ApprovalLink)
    shown = {a.pk: a.may_decide for a in approvals_visible(scope=scope)}
    assert shown == {a.pk: False for a in requested} | {a.pk: True for a in to_decide}


def test_the_card_list_does_not_grow_with_the_tenants_other_cards(cast):
    def card(owner: Any, i: int) -> Card:
        return Card(tenant=cast.acme, owner=owner, kind="memory", correlation_id=f"c{i}")

    own = Card.objects.bulk_create([card(cast.owner, i) for i in range(4)])
    scope = scope_of(cast.owner, cast.acme)

    def fill(n: int) -> None:
        Card.objects.bulk_create([card(cast.teammate, i) for i in range(n)], batch_size=5_000)

    def queries() -> list[QuerySet[Any]]:
        return [
            cards_visible(scope=scope)[:PAGE],
            cards_visible(scope=scope, status=Card.Status.PENDING, kind="memory")[:PAGE],
        ]

    _grows_not(queries, fill, Card)
    assert {c.pk for c in cards_visible(scope=scope)} == {c.pk for c in own}


def test_the_handoff_list_does_not_grow_with_the_tenants_other_handoffs(cast):
    def handoff(requester: Any, i: int) -> Handoff:
        return Handoff(
            tenant=cast.acme, requester=requester, correlation_id=f"c{i}", summary="s", session_id=f"s{i % 7}"
        )

    own = Handoff.objects.bulk_create([handoff(cast.owner, i) for i in range(4)])
    scope = scope_of(cast.owner, cast.acme)

    def fill(n: int) -> None:
        Handoff.objects.bulk_create([handoff(cast.teammate, i) for i in range(n)], batch_size=5_000)

    def queries() -> list[QuerySet[Any]]:
        return [
            handoffs_listed(scope)[:200],
            handoffs_listed(scope, status=Handoff.Status.QUEUED, session_id="s1")[:200],
        ]

    _grows_not(queries, fill, Handoff)
    assert {h.pk for h in handoffs_listed(scope)} == {h.pk for h in own}
