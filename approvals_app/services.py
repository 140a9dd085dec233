"""Writes of the approvals app. ``record_audit`` is the one way anything enters the audit feed."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.utils import timezone

from tess_site.scope import Scope

from .audit import GENESIS, chain_hash, check_metadata
from .models import AuditChainHead, AuditEvent

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")


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
    with transaction.atomic():
        AuditChainHead.objects.get_or_create(tenant=scope.tenant)
        head = AuditChainHead.objects.select_for_update().get(tenant=scope.tenant)
        seq = head.last_seq + 1
        prev_hash = head.last_hash or GENESIS
        created_at = timezone.now()
        actor_id = scope.actor.pk if scope.actor is not None else None
        digest = chain_hash(
            tenant_id=scope.tenant.pk,
            seq=seq,
            actor_id=actor_id,
            actor_label=scope.actor_label,
            channel=scope.channel.value,
            action=action,
            target_type=target_type,
            target_id=target_id,
            outcome=outcome,
            correlation_id=scope.correlation_id,
            metadata=meta,
            created_at=created_at,
            prev_hash=prev_hash,
        )
        event = AuditEvent.objects.create(
            tenant=scope.tenant,
            seq=seq,
            actor_id=actor_id,
            actor_label=scope.actor_label,
            channel=scope.channel.value,
            action=action,
            target_type=target_type,
            target_id=target_id,
            outcome=outcome,
            correlation_id=scope.correlation_id,
            metadata=meta,
            created_at=created_at,
            prev_hash=prev_hash,
            hash=digest,
        )
        AuditChainHead.objects.filter(tenant=scope.tenant).update(last_seq=seq, last_hash=digest)
    return event
