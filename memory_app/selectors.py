"""Reads of operator memory: always the scope's own operator, validated, with loud failures.

Inspection (``memory_snapshot``) never advances last use (seed 002) and takes the writers' locks shared, so
a correction can never be seen half done, and an operator's inspections never wait for each other. Only
``recall.recall_for_prompt`` moves ``last_used_at``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from tess_site.refs import parse_ref
from tess_site.scope import Scope

from .errors import loud
from .locks import lock_categories_to_read
from .models import OperatorMemory, OperatorMemoryHistory
from .policy import (
    MAX_VALUE_CHARS,
    POLICY,
    RECALL_MAX_CHARS,
    RECALL_MAX_ROWS,
    SLOT_RE,
    STANDING_SLOT,
    Category,
    canonicalize,
)
from .switch import MemoryScope, memory_served

logger = logging.getLogger(__name__)


def current_rows(*, tenant_id: int, operator_id: int) -> QuerySet[OperatorMemory]:
    return OperatorMemory.objects.filter(tenant_id=tenant_id, operator_id=operator_id)


def history_rows(*, tenant_id: int, operator_id: int) -> QuerySet[OperatorMemoryHistory]:
    return OperatorMemoryHistory.objects.filter(tenant_id=tenant_id, operator_id=operator_id)


def row_problem(row: Any) -> str | None:
    """Why a loaded row must not be used, or ``None``. Rows are validated on every load (seed 002).

    ``row`` is a current or historical model instance, or recall's lighter ``RecallRow``.
    """
    try:
        category = Category(row.category)
    except ValueError:
        return "unknown_category"
    if not SLOT_RE.match(row.slot or ""):
        return "bad_slot"
    if category is Category.STANDING_INITIATIVE and row.slot != STANDING_SLOT:
        return "bad_slot"
    if not row.value or not row.value.strip() or len(row.value) > MAX_VALUE_CHARS:
        return "bad_value"
    if row.canonical != canonicalize(row.value):
        return "canonical_mismatch"
    if row.revision < 1 or (row.revision > 1) != (row.predecessor_revision is not None):
        return "bad_revision"
    if row.predecessor_revision is not None and row.predecessor_revision != row.revision - 1:
        return "bad_revision"
    if row.salience != POLICY[category].salience:
        return "bad_salience"
    if POLICY[category].needs_ref != bool(row.ref) or (row.ref and parse_ref(row.ref) is None):
        return "bad_ref"
    if POLICY[category].retention is not None and row.expires_at is None:
        return "bad_expiry"
    return None


def is_active(row: OperatorMemory, now: datetime) -> bool:
    return row.expires_at is None or row.expires_at > now


def report_invalid(row: Any, problem: str) -> dict[str, Any]:
    logger.error("operator memory row %s (memory %s) failed validation: %s", row.pk, row.memory_id, problem)
    return {"memory_id": str(row.memory_id), "revision": row.revision, "problem": problem}


def category_policy_view() -> list[dict[str, Any]]:
    return [
        {
            "category": category.value,
            "ceiling": policy.ceiling,
            "salience": policy.salience,
            "retention_days": policy.retention.days if policy.retention else None,
            "slots": [STANDING_SLOT] if category is Category.STANDING_INITIATIVE else None,
        }
        for category, policy in POLICY.items()
    ]


PROMPT_CEILINGS = {"rows": RECALL_MAX_ROWS, "characters": RECALL_MAX_CHARS}
ERASURE = {
    "one_note": "DELETE /api/v1/memory/?category=C&slot=S, or a forget card",
    "everything": "DELETE /api/v1/memory/?all=true, or a forget_all card",
    "administrators": "manage.py tess_memory_erase --username U",
}


@dataclass
class Snapshot:
    """What the operator may inspect: every current row (active or expired) and the superseded history."""

    memory_scope: MemoryScope
    served: bool
    rows: list[OperatorMemory] = field(default_factory=list)
    history: list[OperatorMemoryHistory] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)
    now: datetime = field(default_factory=timezone.now)


@loud
def memory_snapshot(*, scope: Scope) -> Snapshot:
    """The scope operator's own memory for inspection; nothing when memory is not served (nothing is read).

    Takes the writers' per-category locks (shared) before reading current and historical rows, so it never
    shows a correction half applied. Leaves ``last_used_at`` untouched.
    """
    if not memory_served(scope):
        return Snapshot(memory_scope="session", served=False)
    assert scope.actor is not None
    owner = {"tenant_id": scope.tenant.pk, "operator_id": scope.actor.pk}
    with transaction.atomic():
        lock_categories_to_read(**owner, categories=list(Category))
        rows = list(current_rows(**owner).order_by("category", "slot"))
        history = list(history_rows(**owner).order_by("category", "slot", "-revision"))
    snapshot = Snapshot(memory_scope="profile", served=True)
    for row in rows:
        problem = row_problem(row)
        if problem is None:
            snapshot.rows.append(row)
        else:
            snapshot.invalid.append(report_invalid(row, problem))
    for old in history:
        problem = row_problem(old)
        if problem is None:
            snapshot.history.append(old)
        else:
            snapshot.invalid.append(report_invalid(old, problem))
    return snapshot
