"""``record_audit``: the one way anything enters the audit feed."""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tess_site.errors import ServiceUnavailable
from tess_site.rows import hot_cursor
from tess_site.scope import Scope

from .chain import GENESIS, chain_hash, check_metadata
from .models import AuditChainHead, AuditEvent

logger = logging.getLogger("tess.audit")

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")


class AuditUnavailable(ServiceUnavailable):
    """The tenant's chain head is missing or behind its rows: nothing audited can be written until an operator
    runs ``tess_audit_verify --repair-head``. The change that needed the record is not made."""

    code = "audit_unavailable"
    default_message = "The audit feed cannot record right now; nothing was changed. An operator has been told."
    retry_after_seconds = 60


def record_audit(
    scope: Scope,
    *,
    action: str,
    target_type: str,
    target_id: str = "",
    outcome: str,
    metadata: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to the scope's tenant chain.

    Runs in (or opens) a transaction and locks the tenant's chain head, so concurrent writers get
    consecutive sequence numbers and an unbroken hash chain. Call it inside the transaction of the
    change it records, so the record and the change commit or roll back together.
    """
    for label, value in (("action", action), ("target_type", target_type), ("outcome", outcome)):
        if not _NAME.match(value):
            raise ValueError(f"audit {label} {value!r} is not a dotted identifier")
    if len(target_id) > 64:
        raise ValueError("audit target_id is longer than 64 characters")
    meta = check_metadata(dict(metadata or {}))
    # No savepoint of its own: the record belongs to the caller's transaction (or opens one), and a failure
    # here fails that whole transaction anyway.
    with transaction.atomic(savepoint=False):
        last_seq, last_hash = _lock_head(scope.tenant.pk)
        # The row's own fields, hashed with its predecessor's hash and stored as they were hashed.
        fields: dict[str, Any] = {
            "seq": last_seq + 1,
            "actor_id": scope.actor.pk if scope.actor is not None else None,
            "actor_label": scope.actor_label,
            "channel": scope.channel.value,
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "outcome": outcome,
            "correlation_id": scope.correlation_id,
            "metadata": meta,
            "created_at": timezone.now(),
            "prev_hash": last_hash or GENESIS,
        }
        event = AuditEvent(tenant=scope.tenant, hash=chain_hash(tenant_id=scope.tenant.pk, **fields), **fields)
        _append(event)
    return event


_HEAD = AuditChainHead._meta.db_table
_EVENT = AuditEvent._meta.db_table
_LOCK_HEAD = f"SELECT last_seq, last_hash FROM {_HEAD} WHERE tenant_id = %s FOR UPDATE"  # noqa: S608
_EVENT_COLUMNS = (
    "tenant_id, seq, actor_id, actor_label, channel, action, target_type, target_id, outcome, correlation_id, "
    "metadata, created_at, prev_hash, hash"
)
# The row and the head it becomes, in one round trip (the head is locked by ``_lock_head``).
_APPEND = f"""
    WITH event AS (
        INSERT INTO {_EVENT} ({_EVENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        RETURNING id
    )
    UPDATE {_HEAD} SET last_seq = %s, last_hash = %s WHERE tenant_id = %s RETURNING (SELECT id FROM event)
"""  # noqa: S608 (table names are the models')


def _head_row(tenant_id: int) -> tuple[int, str] | None:
    with hot_cursor() as cursor:
        cursor.execute(_LOCK_HEAD, [tenant_id])
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1])


def _lock_head(tenant_id: int) -> tuple[int, str]:
    """The tenant chain's head, locked until the transaction ends; created on the tenant's first event."""
    if connection.vendor == "postgresql":
        row = _head_row(tenant_id)
        if row is not None:
            return row
        if AuditEvent.objects.filter(tenant_id=tenant_id).exists():
            # A concurrent first writer may have committed the head and its first row since the head was read.
            row = _head_row(tenant_id)
            if row is not None:
                return row
            logger.error("audit chain head of tenant %s is missing: run tess_audit_verify --repair-head", tenant_id)
            raise AuditUnavailable()
    AuditChainHead.objects.get_or_create(tenant_id=tenant_id)
    head = AuditChainHead.objects.select_for_update().get(tenant_id=tenant_id)
    return head.last_seq, head.last_hash


def _append(event: AuditEvent) -> None:
    if connection.vendor != "postgresql":
        event.save(force_insert=True)
        AuditChainHead.objects.filter(tenant_id=event.tenant_id).update(last_seq=event.seq, last_hash=event.hash)
        return
    metadata = AuditEvent._meta.get_field("metadata").get_db_prep_save(event.metadata, connection)
    with hot_cursor() as cursor:
        try:
            cursor.execute(_APPEND, _append_params(event, metadata))
        except IntegrityError as exc:
            if "audit_seq_unique_per_tenant" not in str(exc):
                raise
            # The seq after the head is taken: the head is behind its rows.
            logger.error(
                "audit chain head of tenant %s is behind: run tess_audit_verify --repair-head", event.tenant_id
            )
            raise AuditUnavailable() from exc
        (event.pk,) = cursor.fetchone()
    event._state.adding = False
    event._state.db = connection.alias


def _append_params(event: AuditEvent, metadata: Any) -> list[Any]:
    return [
        event.tenant_id,
        event.seq,
        event.actor_id,
        event.actor_label,
        event.channel,
        event.action,
        event.target_type,
        event.target_id,
        event.outcome,
        event.correlation_id,
        metadata,
        event.created_at,
        event.prev_hash,
        event.hash,
        event.seq,
        event.hash,
        event.tenant_id,
    ]


def audit_head_repair(*, tenant_id: int, last_seq: int, last_hash: str) -> None:
    """Set a tenant's chain head to its verified last row (``tess_audit_verify --repair-head`` only).

    The head's triggers refuse anything but one-step advances; this transaction alone is allowed more.
    """
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('tess.audit_head_repair', 'on', true)")
        AuditChainHead.objects.update_or_create(
            tenant_id=tenant_id, defaults={"last_seq": last_seq, "last_hash": last_hash}
        )
