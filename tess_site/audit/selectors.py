"""Permission-aware reads of the audit feed, and the chain verifier."""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet

from tess_site.errors import Forbidden
from tess_site.scope import Role, Scope

from .chain import ChainBreak, ChainReport, missing_seqs, walk_chain
from .models import AuditChainHead, AuditEvent

AUDIT_READER_ROLES = (Role.AUDITOR, Role.ADMIN)

# Rows fetched per round trip while verifying; the chain is streamed, never loaded whole.
VERIFY_CHUNK = 2000


def audit_events_visible(*, scope: Scope) -> QuerySet[AuditEvent]:
    """The scope's tenant feed, for auditors and admins only."""
    if not scope.has_role(*AUDIT_READER_ROLES):
        raise Forbidden("Reading the audit feed needs the auditor or admin role.")
    return AuditEvent.objects.filter(tenant=scope.tenant)


def audit_tenant_ids_readable(*, user: Any) -> frozenset[int] | None:
    """Tenants whose feed ``user`` may read where there is no Scope (the Django admin); ``None`` means all.

    Superusers read every tenant's feed; anyone else only tenants where they hold the auditor or admin role.
    """
    if not (user.is_authenticated and user.is_active):
        return frozenset()
    if user.is_superuser:
        return None
    roles = [role.value for role in AUDIT_READER_ROLES]
    return frozenset(user.tess_memberships.filter(role__in=roles).values_list("tenant_id", flat=True))


def audit_events_readable(*, tenant_ids: frozenset[int] | None) -> QuerySet[AuditEvent]:
    """The feed restricted to ``tenant_ids`` from ``audit_tenant_ids_readable`` (``None``: every tenant)."""
    events = AuditEvent.objects.all()
    return events if tenant_ids is None else events.filter(tenant_id__in=tenant_ids)


def _head(tenant: Model) -> tuple[int, str]:
    head = AuditChainHead.objects.filter(tenant_id=tenant.pk).values_list("last_seq", "last_hash").first()
    return head if head is not None else (0, "")


def audit_rows_verify(*, tenant: Model) -> ChainReport:
    """Recompute ``tenant``'s rows alone (links, seqs, hashes), whatever the head says: before a head repair."""
    rows = AuditEvent.objects.filter(tenant_id=tenant.pk).order_by("seq").iterator(chunk_size=VERIFY_CHUNK)
    return walk_chain(rows, head_seq=-1, head_hash="")


def audit_chain_verify(*, tenant: Model) -> ChainReport:
    """Recompute ``tenant``'s whole hash chain, streaming it in seq order, and compare its end with the head.

    No Scope: this is the installation operator's check from the server console (``tess_audit_verify``),
    not a tenant member's read. Safe to run while events are being recorded: the head is read before the
    rows, so every row up to it is visible, and rows appended meanwhile are checked against a fresh read.
    """
    head_seq, head_hash = _head(tenant)
    rows = AuditEvent.objects.filter(tenant_id=tenant.pk).order_by("seq").iterator(chunk_size=VERIFY_CHUNK)
    report = walk_chain(rows, head_seq=head_seq, head_hash=head_hash)
    if report.broken is not None:
        return report
    broken = None
    if report.last_seq < head_seq:
        broken = ChainBreak(
            seq=report.last_seq + 1,
            row_id=None,
            problem=f"{missing_seqs(report.last_seq + 1, head_seq)}: the chain head is at seq {head_seq} "
            f"but the last row is seq {report.last_seq}",
        )
    elif report.last_seq > head_seq:
        # Rows past the head we read: legitimate if a writer moved the head since, forged otherwise.
        now_seq, now_hash = _head(tenant)
        if now_seq < report.last_seq:
            first = AuditEvent.objects.filter(tenant_id=tenant.pk, seq=now_seq + 1).values_list("id", flat=True).first()
            broken = ChainBreak(
                seq=now_seq + 1,
                row_id=first,
                problem=f"the chain head is at seq {now_seq}: rows after it were not written by record_audit",
            )
        elif now_seq == report.last_seq and now_hash != report.last_hash:
            broken = ChainBreak(
                seq=report.last_seq,
                row_id=report.last_row_id,
                problem=f"chain head hash {now_hash or '(empty)'} differs from this row's hash",
            )
    if broken is None:
        return report
    return ChainReport(report.count, report.last_seq, report.last_hash, report.last_row_id, broken)
