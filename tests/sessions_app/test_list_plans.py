"""The session list costs what the caller's own and granted sessions cost, however many other sessions the
tenant holds: PostgreSQL reads it through the owner and grant indexes, never by scanning the tenant.

No timing: the shared buffers ``EXPLAIN (ANALYZE, BUFFERS)`` reports for the list query with 1,000 other
sessions in the tenant (already enough for every table to span pages) and again with 21,000.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from guardian.shortcuts import assign_perm

from sessions_app import selectors
from sessions_app.models import Session, SessionGroupObjectPermission, SessionUserObjectPermission
from tests.conftest import scope_of
from tests.factories import SessionFactory
from tests.plans import analyze, explain

pytestmark = [pytest.mark.postgres]

FEW, MANY = 1_000, 20_000


def _fill(tenant, owner, n: int) -> None:
    start = Session.objects.count()
    Session.objects.bulk_create(
        [
            Session(tenant=tenant, owner=owner, title="other", provider_instance="nowhere", runtime_id=f"$o{i}")
            for i in range(start, start + n)
        ],
        batch_size=5_000,
    )


def test_the_session_list_does_not_grow_with_the_tenants_other_sessions(cast):
    own = [SessionFactory.create(tenant=cast.acme, owner=cast.owner) for _ in range(4)]
    shared = SessionFactory.create(tenant=cast.acme, owner=cast.teammate, title="shared")
    assign_perm(selectors.VIEW, cast.owner, shared)
    team = Group.objects.create(name="team")
    cast.owner.groups.add(team)
    via_group = SessionFactory.create(tenant=cast.acme, owner=cast.admin_user, title="team")
    assign_perm(selectors.VIEW, team, via_group)
    scope = scope_of(cast.owner, cast.acme)
    _fill(cast.acme, cast.teammate, FEW)
    analyze(Session, SessionUserObjectPermission, SessionGroupObjectPermission)
    small = explain(selectors.sessions_listed(scope=scope))

    _fill(cast.acme, cast.teammate, MANY)
    analyze(Session)
    listed = selectors.sessions_listed(scope=scope)
    big = explain(listed)

    assert {s.pk for s in listed} == {s.pk for s in own} | {shared.pk, via_group.pk}
    assert not big.seq_scanned(Session), f"{big}"
    assert big.buffers <= 1.25 * small.buffers + 16, f"{small}\n---\n{big}"
