"""Writes of operator memory (seed 002). Nothing is remembered or forgotten silently: a write is a card
first (``memory_propose``), and only its owner's confirmation applies it (``memory_apply``, the card
handler). The direct privacy route (``memory_forget``) and administrator erasure delete without a card.

Every writer holds the operator's per-category lock for the whole transaction: the ceiling check and the
insert are one critical section, and the standing-initiative replacement is atomic. The decisions are
tabled in ``policy``. Recall lives in ``recall`` and is re-exported here for the gateway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from approvals_app.card_selectors import cards_visible
from approvals_app.cards import card_propose, cards_scrub_pending
from approvals_app.models import Card
from tess_site.accounts.models import Tenant
from tess_site.audit.services import record_audit
from tess_site.refs import has_resolver, parse_ref, resolve
from tess_site.scope import Channel, Scope

from .errors import (
    AmbiguousShape,
    CategoryFull,
    DuplicateContent,
    InvalidMemoryInput,
    MemoryNotFound,
    MemoryOff,
    ReferenceKindUnsupported,
    ReferenceNotReadable,
    SlotInUse,
    loud,
)
from .forgetting import Forgotten, forgotten_notify, forgotten_values
from .locks import lock_categories
from .models import OperatorMemory, OperatorMemoryHistory
from .policy import (
    POLICY,
    STANDING_SLOT,
    Category,
    canonicalize,
    check_slot,
    check_value,
    derived_slot,
    parse_category,
)
from .recall import Recall, recall_for_prompt
from .selectors import current_rows, history_rows
from .switch import memory_scope_for, memory_served

__all__ = [
    "Recall",
    "memory_apply",
    "memory_forget",
    "memory_propose",
    "memory_propose_once",
    "memory_scope_for",
    "recall_for_prompt",
]

CARD_KIND = "memory"
OPS = ("remember", "correct", "reauthorize", "forget", "forget_all")
# What a decided card keeps of its payload: ids, never the note or its reference.
KEPT_ON_DECIDED = ("op", "category", "slot", "source")


@dataclass(frozen=True)
class Outcome:
    """The server's result of one memory write, as every surface shows it."""

    outcome: str  # created | revised | reauthorized | deleted
    deleted_count: int = 0
    row: OperatorMemory | None = None
    # What carried the deleted notes' words elsewhere (stream turns, replies, conversation summaries) and was
    # redacted with them (``forgetting``).
    redacted_count: int = 0


def _owner(scope: Scope) -> dict[str, int]:
    assert scope.actor is not None
    return {"tenant_id": scope.tenant.pk, "operator_id": scope.actor.pk}


def _require_served(scope: Scope) -> None:
    if not memory_served(scope):
        raise MemoryOff()


def check_ref(scope: Scope, ref: object) -> str:
    """A pin's reference, if the operator can read it in Tess now; typed refusals otherwise."""
    if not isinstance(ref, str) or parse_ref(ref) is None:
        raise InvalidMemoryInput(
            "A pinned context needs ref as session:<id>, approval:<id>, handoff:<id> or audit:<id>.",
            details={"fields": {"ref": "kind:id"}},
        )
    kind, _ = parse_ref(ref) or ("", "")
    if not has_resolver(kind):
        raise ReferenceKindUnsupported(details={"kind": kind})
    if not resolve(scope, ref):
        raise ReferenceNotReadable(details={"ref": ref})
    return ref


def _shape(scope: Scope, data: dict[str, Any]) -> dict[str, Any]:
    """Validate a proposal early and return the card payload (slot resolved, ref checked)."""
    op = data.get("op")
    if op not in OPS:
        raise InvalidMemoryInput("Unknown memory operation.", details={"fields": {"op": list(OPS)}})
    raw_category, raw_slot = data.get("category"), data.get("slot")
    if op == "forget_all":
        if raw_category or raw_slot:
            raise AmbiguousShape("forget_all takes neither a category nor a slot.")
        return {"op": op}
    if not raw_category:
        raise AmbiguousShape("A slot needs its category." if raw_slot else "This operation needs a category.")
    if op == "forget" and not raw_slot:
        raise AmbiguousShape("forget needs both a category and a slot (forget_all takes neither).")
    category = parse_category(raw_category)
    slot = check_slot(str(raw_slot)) if raw_slot else None
    if category is Category.STANDING_INITIATIVE:
        if slot not in (None, STANDING_SLOT):
            raise InvalidMemoryInput("The standing initiative has one slot, 'current'.")
        slot = STANDING_SLOT
    payload: dict[str, Any] = {"op": op, "category": category.value}
    if op in ("reauthorize", "correct") and slot is None:
        raise AmbiguousShape(f"{op} needs both a category and a slot.")
    if op in ("remember", "correct"):
        payload["value"] = check_value(data.get("value"))
        if POLICY[category].needs_ref:
            payload["ref"] = check_ref(scope, data.get("ref"))
        elif data.get("ref"):
            raise InvalidMemoryInput("Only pinned contexts carry a ref.", details={"fields": {"ref": "not allowed"}})
        if slot is None:
            slot = derived_slot(category, payload.get("ref") or payload["value"])
    payload["slot"] = slot
    return payload


@loud
def memory_propose(scope: Scope, *, data: dict[str, Any]) -> Card:
    """Validate a proposed memory write and park it as a pending card of the scope's operator."""
    _require_served(scope)
    payload = _shape(scope, data)
    payload["source"] = f"session:{scope.session}" if scope.session else f"channel:{scope.channel.value}"
    return card_propose(scope=scope, kind=CARD_KIND, payload=payload)


PROPOSAL_KEYS = ("op", "category", "slot", "value", "ref")


@loud
def memory_propose_once(scope: Scope, *, data: dict[str, Any]) -> tuple[Card, bool]:
    """Like ``memory_propose``, but the same proposal said again while its card still waits returns that card
    (``True``: reused) instead of parking a second one the operator would have to decide twice."""
    _require_served(scope)
    payload = _shape(scope, dict(data))
    wanted = {key: payload.get(key) for key in PROPOSAL_KEYS}
    with transaction.atomic():
        # The category's writer lock: two identical sends racing must not both park a card.
        if scope.actor is not None and payload.get("category"):
            lock_categories(
                tenant_id=scope.tenant.pk, operator_id=scope.actor.pk, categories=[Category(payload["category"])]
            )
        for card in cards_visible(scope=scope, status=Card.Status.PENDING, kind=CARD_KIND):
            if {key: card.payload.get(key) for key in PROPOSAL_KEYS} == wanted:
                return card, True
        return memory_propose(scope, data=data), False


def _audit(
    scope: Scope, action: str, outcome: Outcome, *, category: str | None, slot: str | None, **extra: Any
) -> None:
    row = outcome.row
    record_audit(
        scope,
        action=f"memory.{action}",
        target_type="operator_memory",
        target_id=str(row.memory_id) if row is not None else "",
        outcome=outcome.outcome,
        metadata={
            "category": category,
            "slot": slot,
            "memory_id": str(row.memory_id) if row is not None else None,
            "revision": row.revision if row is not None else None,
            "deleted_count": outcome.deleted_count,
            "redacted_count": outcome.redacted_count,
            **extra,
        },
    )


def _renew(row: OperatorMemory, *, card_id: str, now: datetime) -> None:
    retention = POLICY[Category(row.category)].retention
    row.reauthorized_ref = card_id
    row.reauthorized_at = now
    row.expires_at = now + retention if retention else None
    row.last_used_at = None
    row.updated_at = now


def _reauthorize(row: OperatorMemory, *, card_id: str, now: datetime) -> Outcome:
    _renew(row, card_id=card_id, now=now)
    row.save(update_fields=["reauthorized_ref", "reauthorized_at", "expires_at", "last_used_at", "updated_at"])
    return Outcome("reauthorized", row=row)


def _archive(row: OperatorMemory, *, now: datetime) -> None:
    OperatorMemoryHistory.objects.create(
        **{f.attname: getattr(row, f.attname) for f in OperatorMemory._meta.concrete_fields if f.attname != "id"},
        successor_revision=row.revision + 1,
        superseded_at=now,
    )


def _revise(row: OperatorMemory, *, value: str, ref: str, card_id: str, now: datetime) -> Outcome:
    """Archive the whole prior row, keep the memory id, bump the revision, link both sides."""
    _archive(row, now=now)
    row.predecessor_revision = row.revision
    row.revision += 1
    row.value, row.canonical, row.ref = value, canonicalize(value), ref
    row.card_ref = card_id
    row.confirmed_at = now
    _renew(row, card_id=card_id, now=now)
    row.save()
    return Outcome("revised", row=row)


def _same_content(row: OperatorMemory, canonical: str, ref: str) -> bool:
    return row.canonical == canonical and row.ref == ref


def _refuse_duplicate(rows: list[OperatorMemory], canonical: str, *, slot: str) -> None:
    for other in rows:
        if other.slot != slot and other.canonical == canonical:
            raise DuplicateContent(f"The slot '{other.slot}' already holds this note.", details={"slot": other.slot})


def _write(scope: Scope, payload: dict[str, Any], *, card: Card, now: datetime) -> Outcome:
    """remember / correct / reauthorize, under the operator's lock for the category."""
    op, category, slot = payload["op"], Category(payload["category"]), payload["slot"]
    owner = _owner(scope)
    lock_categories(**owner, categories=[category])
    rows = list(current_rows(**owner).filter(category=category.value))
    at_slot = next((row for row in rows if row.slot == slot), None)
    card_id = str(card.id)
    if op == "reauthorize":
        if at_slot is None:
            raise MemoryNotFound(details={"category": category.value, "slot": slot})
        if at_slot.ref:
            check_ref(scope, at_slot.ref)  # a source is only reauthorized while the operator can still read it
        return _reauthorize(at_slot, card_id=card_id, now=now)
    value = check_value(payload.get("value"))
    ref = check_ref(scope, payload.get("ref")) if POLICY[category].needs_ref else ""
    canonical = canonicalize(value)
    if at_slot is not None:
        if _same_content(at_slot, canonical, ref):
            return _reauthorize(at_slot, card_id=card_id, now=now)
        if op == "remember" and category is not Category.STANDING_INITIATIVE:
            raise SlotInUse(details={"category": category.value, "slot": slot})
        _refuse_duplicate(rows, canonical, slot=slot)
        return _revise(at_slot, value=value, ref=ref, card_id=card_id, now=now)
    if op == "correct":
        raise MemoryNotFound(details={"category": category.value, "slot": slot})
    _refuse_duplicate(rows, canonical, slot=slot)
    policy = POLICY[category]
    if len(rows) >= policy.ceiling:
        raise CategoryFull(details={"category": category.value, "ceiling": policy.ceiling})
    row = OperatorMemory.objects.create(
        **owner,
        category=category.value,
        slot=slot,
        value=value,
        canonical=canonical,
        ref=ref,
        source_ref=str(payload.get("source") or f"card:{card_id}")[:80],
        card_ref=card_id,
        confirmed_at=now,
        reauthorized_ref=card_id,
        reauthorized_at=now,
        salience=policy.salience,
        expires_at=now + policy.retention if policy.retention else None,
        updated_at=now,
    )
    return Outcome("created", row=row)


def _pending_values(*, tenant_id: int, operator_id: int, match: Callable[[dict[str, Any]], bool]) -> list[str]:
    """The values of the operator's pending memory cards that ``match``: proposals scrubbed with the notes."""
    cards = Card.objects.filter(owner_id=operator_id, tenant_id=tenant_id, kind=CARD_KIND, status=Card.Status.PENDING)
    return [str(p.get("value")) for p in cards.values_list("payload", flat=True) if match(p) and p.get("value")]


def _delete_slot(*, tenant_id: int, operator_id: int, category: Category, slot: str) -> Outcome:
    """Delete one current row and its whole lineage, and redact what carried its words; the exact counts."""
    owner = {"tenant_id": tenant_id, "operator_id": operator_id}
    lock_categories(**owner, categories=[category])
    memory_ids = current_rows(**owner).filter(category=category.value, slot=slot).values("memory_id")
    lineage = Q(memory_id__in=memory_ids) | Q(category=category.value, slot=slot)

    def matches(p: dict[str, Any]) -> bool:
        return p.get("category") == category.value and p.get("slot") == slot

    values = [
        *current_rows(**owner).filter(category=category.value, slot=slot).values_list("value", flat=True),
        *history_rows(**owner).filter(lineage).values_list("value", flat=True),
        *_pending_values(**owner, match=matches),
    ]
    redacted = forgotten_notify(
        Forgotten(tenant_id=tenant_id, operator_id=operator_id, values=forgotten_values(values))
    )
    history_deleted, _ = history_rows(**owner).filter(lineage).delete()
    current_deleted, _ = current_rows(**owner).filter(category=category.value, slot=slot).delete()
    cards_scrub_pending(owner_id=operator_id, tenant_id=tenant_id, kind=CARD_KIND, match=matches)
    return Outcome("deleted", deleted_count=current_deleted + history_deleted, redacted_count=redacted)


def _delete_all(*, tenant_id: int, operator_id: int) -> Outcome:
    """Delete every current and superseded row of one operator in one tenant, and redact what carried their
    words; the exact counts."""
    owner = {"tenant_id": tenant_id, "operator_id": operator_id}
    lock_categories(**owner, categories=list(Category))
    values = [
        *current_rows(**owner).values_list("value", flat=True),
        *history_rows(**owner).values_list("value", flat=True),
        *_pending_values(**owner, match=lambda p: True),
    ]
    redacted = forgotten_notify(
        Forgotten(tenant_id=tenant_id, operator_id=operator_id, values=forgotten_values(values), everything=True)
    )
    history_deleted, _ = history_rows(**owner).delete()
    current_deleted, _ = current_rows(**owner).delete()
    cards_scrub_pending(owner_id=operator_id, tenant_id=tenant_id, kind=CARD_KIND, match=lambda p: True)
    return Outcome("deleted", deleted_count=current_deleted + history_deleted, redacted_count=redacted)


def memory_apply(scope: Scope, card: Card) -> Outcome:
    """Apply a confirmed memory card (the card handler; inside the confirming transaction)."""
    _require_served(scope)
    payload = dict(card.payload)
    op = payload.get("op")
    now = timezone.now()
    if op == "forget_all":
        outcome = _delete_all(**_owner(scope))
        _audit(scope, "forget_all", outcome, category=None, slot=None, card=str(card.id))
        return outcome
    category, slot = Category(payload["category"]), check_slot(payload["slot"])
    if op == "forget":
        outcome = _delete_slot(**_owner(scope), category=category, slot=slot)
        _audit(scope, "forget", outcome, category=category.value, slot=slot, card=str(card.id))
        return outcome
    outcome = _write(scope, payload, card=card, now=now)
    action = {"created": "remember", "revised": "correct", "reauthorized": "reauthorize"}[outcome.outcome]
    _audit(scope, action, outcome, category=category.value, slot=slot, card=str(card.id), op=op)
    return outcome


@loud
def memory_forget(scope: Scope, *, category: str | None, slot: str | None, forget_all: bool) -> Outcome:
    """The direct privacy route: one exact row and its lineage, or everything, and what carried their words
    redacted. Returns the exact counts.

    Ambiguous shapes are refused: a slot without a category, a category without a slot, nothing at all,
    or ``all`` together with either.
    """
    if forget_all and (category or slot):
        raise AmbiguousShape("all=true takes neither a category nor a slot.")
    if not forget_all and not (category and slot):
        raise AmbiguousShape()
    _require_served(scope)
    with transaction.atomic():
        if forget_all:
            outcome = _delete_all(**_owner(scope))
            _audit(scope, "forget_all", outcome, category=None, slot=None)
            return outcome
        parsed, checked = parse_category(category), check_slot(str(slot))
        outcome = _delete_slot(**_owner(scope), category=parsed, slot=checked)
        _audit(scope, "forget", outcome, category=parsed.value, slot=checked)
    return outcome


@loud
def memory_erase_operator(*, user: User, correlation_id: str) -> dict[str, Outcome]:
    """Operator-subject erasure for administrators: every row of ``user`` in every tenant, and what carried
    their words redacted; per-tenant counts.

    Works whatever the switches say (erasure is the administrator's duty, not a memory read). Each tenant's
    deletion is audited with a system scope, ids and counts only.
    """
    tenant_ids = set(tenant_ids_with_rows_of(user.pk)) | set(tenant_ids_with_history_of(user.pk))
    counts: dict[str, Outcome] = {}
    for tenant in Tenant.objects.filter(pk__in=tenant_ids).order_by("slug"):
        system = Scope(tenant=tenant, actor=None, channel=Channel.SYSTEM, correlation_id=correlation_id)
        with transaction.atomic():
            outcome = _delete_all(tenant_id=tenant.pk, operator_id=user.pk)
            _audit(system, "erase", outcome, category=None, slot=None, operator=user.pk)
        counts[tenant.slug] = outcome
    with transaction.atomic():
        cards_scrub_pending(owner_id=user.pk, tenant_id=None, kind=CARD_KIND, match=lambda p: True)
    return counts


def tenant_ids_with_rows_of(user_id: int) -> list[int]:
    """The tenants in which ``user_id`` has current memory rows (their ids, not the rows)."""
    return list(OperatorMemory.objects.filter(operator_id=user_id).values_list("tenant_id", flat=True).distinct())


def tenant_ids_with_history_of(user_id: int) -> list[int]:
    """The tenants in which ``user_id`` has memory history (their ids, not the rows)."""
    return list(
        OperatorMemoryHistory.objects.filter(operator_id=user_id).values_list("tenant_id", flat=True).distinct()
    )
