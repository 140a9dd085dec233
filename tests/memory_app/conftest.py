"""Helpers for the memory tests: propose-and-confirm through the real card bridge, and reading back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals_app.cards import card_confirm
from memory_app.models import OperatorMemory
from memory_app.services import memory_propose
from tess_site.accounts.models import Tenant
from tests.conftest import scope_of

Confirmed = dict[str, Any]


@pytest.fixture
def confirm_write(cast) -> Callable[..., Confirmed]:
    """Propose a memory write as ``user`` (default the owner, in acme) and confirm it; return the result."""

    def write(
        op: str = "remember", *, user: User | None = None, tenant: Tenant | None = None, **data: Any
    ) -> Confirmed:
        scope = scope_of(user or cast.owner, tenant or cast.acme)
        card = memory_propose(scope, data={"op": op, **data})
        _, result = card_confirm(scope=scope, card_id=card.pk)
        return result

    return write


@pytest.fixture
def remember(confirm_write) -> Callable[..., Confirmed]:
    def write(value: str, category: str = "preferences", **data: Any) -> Confirmed:
        result = confirm_write("remember", category=category, value=value, **data)
        assert result["outcome"] in ("created", "revised", "reauthorized"), result
        return result

    return write


@pytest.fixture
def audit_ref(cast) -> str:
    """A reference the owner can read: an audit row of acme, visible because the test grants auditor."""
    from tess_site.accounts import services as accounts
    from tess_site.audit.services import record_audit
    from tess_site.scope import Role

    accounts.membership_grant(tenant=cast.acme, user=cast.owner, role=Role.AUDITOR)
    event = record_audit(scope_of(cast.owner, cast.acme), action="test.pin", target_type="thing", outcome="ok")
    return f"audit:{event.seq}"


def rows_of(user: User) -> list[OperatorMemory]:
    return list(OperatorMemory.objects.filter(operator=user).order_by("category", "slot"))
