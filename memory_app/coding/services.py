"""Reviewed coding memory: candidates, reviews and exports (seed 003).

Who may do what (decided here, enforced here, not in views):

| action | who |
| --- | --- |
| read entries of the tenant | any member (operator, approver, auditor, admin) |
| propose a candidate from a hand-off result | the hand-off completion (any scope: a candidate activates nothing) |
| write a candidate, request a review | operator, approver or admin |
| apply (activate), reject, retire, export | a human approver or admin: a scope with an actor, not the system channel |

Nothing here that the gateway could call with model output reaches ``active`` or an export: candidates are
always created as ``candidate`` with ``human_verified`` false, whatever the input says.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, Forbidden, InvalidInput, NotFound
from tess_site.scope import Channel, Role, Scope
from tess_site.tasks import enqueue_on_commit

from ..plugin.redaction import redact
from .bridge import bridge_record, exportable
from .ingest import LOST_WAKEUP_GRACE_SECONDS
from .models import CodingMemoryEntry, CodingMemoryExport, CodingMemoryReview
from .tasks import ingest_coding_memory_export

WORKSPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
MAX_STATEMENT = 1000
MAX_EVIDENCE = 4000
MAX_LIST = 32
REVIEWERS = (Role.APPROVER, Role.ADMIN)
WRITERS = (Role.OPERATOR, Role.APPROVER, Role.ADMIN)


class CodingMemoryNotFound(NotFound):
    code = "coding_memory_not_found"
    default_message = "No such coding memory entry."


class ReviewerRequired(Forbidden):
    code = "coding_memory_reviewer_required"
    default_message = "Reviewing, activating and exporting coding memory needs a human approver or admin."


class InvalidTransition(Conflict):
    code = "coding_memory_invalid_transition"
    default_message = "The entry's status does not allow that."


@dataclass(frozen=True)
class ExportResult:
    export: CodingMemoryExport
    records: list[dict[str, Any]]


def check_workspace_key(raw: object) -> str:
    key = str(raw or "").strip()
    if not WORKSPACE_RE.match(key) or ".." in key:
        raise InvalidInput("A workspace key names a repository or workspace, such as acme/payments-api.")
    return key


def require_human_reviewer(scope: Scope) -> None:
    if scope.actor is None or scope.channel is Channel.SYSTEM or not scope.has_role(*REVIEWERS):
        raise ReviewerRequired()


def _strings(raw: object, field: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_LIST or not all(isinstance(v, str) and v for v in raw):
        raise InvalidInput(f"{field} is a list of at most {MAX_LIST} non-empty strings.", details={"field": field})
    return [v[:200] for v in raw]


def _clean(text: object, field: str, limit: int) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{field} is required.", details={"field": field})
    # Candidates come from hand-off results too: secrets and customer data never get stored.
    return redact(text.strip()).text[:limit]


def _choice(value: object, choices: type[Any], field: str) -> str:
    if value not in choices.values:
        raise InvalidInput(f"Unknown {field}.", details={"field": field, "allowed": list(choices.values)})
    return str(value)


def _create(scope: Scope, *, origin: str, data: dict[str, Any]) -> CodingMemoryEntry:
    entry = CodingMemoryEntry.objects.create(
        tenant=scope.tenant,
        workspace_key=check_workspace_key(data.get("workspace_key")),
        kind=_choice(data.get("kind"), CodingMemoryEntry.Kind, "kind"),
        statement=_clean(data.get("statement"), "statement", MAX_STATEMENT),
        evidence=_clean(data.get("evidence"), "evidence", MAX_EVIDENCE),
        confidence=_choice(data.get("confidence", "medium"), CodingMemoryEntry.Confidence, "confidence"),
        tags=_strings(data.get("tags"), "tags"),
        related_files=_strings(data.get("related_files"), "related_files"),
        source_run_id=str(data.get("source_run_id") or "")[:100],
        origin=origin,
        created_by=scope.actor,
    )
    record_audit(
        scope,
        action=f"coding_memory.{origin}_candidate",
        target_type="coding_memory",
        target_id=str(entry.pk),
        outcome="created",
    )
    return entry


@transaction.atomic
def coding_memory_propose_candidate(
    scope: Scope,
    *,
    workspace_key: str,
    kind: str,
    statement: str,
    evidence: str,
    confidence: str = "medium",
    tags: list[str] | None = None,
    related_files: list[str] | None = None,
    source_run_id: str | None = None,
) -> CodingMemoryEntry:
    """A candidate from a completed hand-off result; the hand-off completion calls this. Always a candidate."""
    data = {
        "workspace_key": workspace_key, "kind": kind, "statement": statement, "evidence": evidence,
        "confidence": confidence, "tags": tags, "related_files": related_files, "source_run_id": source_run_id,
    }  # fmt: skip
    return _create(scope, origin="handoff", data=data)


@transaction.atomic
def coding_memory_write(scope: Scope, *, data: dict[str, Any]) -> CodingMemoryEntry:
    """A candidate an operator wrote by hand (REST)."""
    if scope.actor is None or not scope.has_role(*WRITERS):
        raise Forbidden("Writing coding memory needs the operator, approver or admin role.")
    return _create(scope, origin="operator", data=data)


def _locked(scope: Scope, entry_id: object) -> CodingMemoryEntry:
    try:
        pk = uuid.UUID(str(entry_id))
    except ValueError:
        raise CodingMemoryNotFound() from None
    entry = CodingMemoryEntry.objects.select_for_update().filter(tenant=scope.tenant, pk=pk).first()
    if entry is None:
        raise CodingMemoryNotFound()
    return entry


@transaction.atomic
def coding_memory_request_review(scope: Scope, *, entry_id: object, note: str = "") -> CodingMemoryReview:
    if scope.actor is None or not scope.has_role(*WRITERS):
        raise Forbidden("Requesting a review needs the operator, approver or admin role.")
    entry = _locked(scope, entry_id)
    if entry.status != CodingMemoryEntry.Status.CANDIDATE:
        raise InvalidTransition("Only a candidate can be put up for review.")
    review = CodingMemoryReview.objects.create(
        entry=entry, action=CodingMemoryReview.Action.REQUEST, reviewer=scope.actor, rationale=note.strip()[:2000]
    )
    record_audit(scope, action="coding_memory.review_requested", target_type="coding_memory",
                 target_id=str(entry.pk), outcome="requested")  # fmt: skip
    return review


def _decide(scope: Scope, *, entry_id: object, rationale: str, action: str, allowed_from: set[str],
            to: str) -> CodingMemoryEntry:  # fmt: skip
    require_human_reviewer(scope)
    assert scope.actor is not None
    if not isinstance(rationale, str) or not rationale.strip():
        raise InvalidInput("A review needs a rationale.", details={"field": "rationale"})
    entry = _locked(scope, entry_id)
    if entry.status not in allowed_from:
        raise InvalidTransition(details={"status": entry.status})
    now = timezone.now()
    review = CodingMemoryReview.objects.create(
        entry=entry, action=action, reviewer=scope.actor, rationale=rationale.strip()[:2000], at=now
    )
    entry.status = to
    entry.updated_at = now
    if action == CodingMemoryReview.Action.APPLY:
        pending = entry.reviews.filter(action=CodingMemoryReview.Action.REQUEST).order_by("-at").first()
        entry.human_verified = True
        entry.reviewer = scope.actor.get_username()
        entry.review_rationale = review.rationale
        entry.reviewed_at = now
        entry.review_request = pending
    elif action == CodingMemoryReview.Action.REJECT:
        entry.human_verified = False
    entry.save()
    record_audit(scope, action=f"coding_memory.{action}", target_type="coding_memory", target_id=str(entry.pk),
                 outcome=to)  # fmt: skip
    return entry


@transaction.atomic
def coding_memory_apply(scope: Scope, *, entry_id: object, rationale: str) -> CodingMemoryEntry:
    """Activate a candidate: human verified, with reviewer, rationale and time."""
    return _decide(scope, entry_id=entry_id, rationale=rationale, action=CodingMemoryReview.Action.APPLY,
                   allowed_from={CodingMemoryEntry.Status.CANDIDATE}, to=CodingMemoryEntry.Status.ACTIVE)  # fmt: skip


@transaction.atomic
def coding_memory_reject(scope: Scope, *, entry_id: object, rationale: str) -> CodingMemoryEntry:
    return _decide(scope, entry_id=entry_id, rationale=rationale, action=CodingMemoryReview.Action.REJECT,
                   allowed_from={CodingMemoryEntry.Status.CANDIDATE}, to=CodingMemoryEntry.Status.REJECTED)  # fmt: skip


@transaction.atomic
def coding_memory_retire(scope: Scope, *, entry_id: object, rationale: str) -> CodingMemoryEntry:
    return _decide(scope, entry_id=entry_id, rationale=rationale, action=CodingMemoryReview.Action.RETIRE,
                   allowed_from={CodingMemoryEntry.Status.ACTIVE}, to=CodingMemoryEntry.Status.RETIRED)  # fmt: skip


@transaction.atomic
def coding_memory_export(scope: Scope, *, workspace_key: str, via: str) -> ExportResult:
    """Every exportable entry of the workspace as bridge records; the export is recorded, then ingested.

    Ingestion into plast-mem (when ``TESS_PLASTMEM_URL`` is set) is queued after commit and never fails
    this call.
    """
    require_human_reviewer(scope)
    assert scope.actor is not None
    key = check_workspace_key(workspace_key)
    now = timezone.now()
    entries = CodingMemoryEntry.objects.filter(
        tenant=scope.tenant, workspace_key=key, status=CodingMemoryEntry.Status.ACTIVE, human_verified=True
    ).order_by("reviewed_at", "pk")
    records = [bridge_record(entry, exported_at=now) for entry in entries if exportable(entry)]
    ingest = bool(getattr(settings, "TESS_PLASTMEM_URL", "")) and bool(records)
    export = CodingMemoryExport.objects.create(
        tenant=scope.tenant,
        workspace_key=key,
        exported_by=scope.actor,
        exported_at=now,
        via=via,
        records=records,
        record_count=len(records),
        ingestion=CodingMemoryExport.Ingestion.PENDING if ingest else CodingMemoryExport.Ingestion.NOT_CONFIGURED,
        ingestion_next_at=now + timedelta(seconds=LOST_WAKEUP_GRACE_SECONDS) if ingest else None,
    )
    record_audit(scope, action="coding_memory.exported", target_type="coding_memory_export",
                 target_id=str(export.pk), outcome="exported",
                 metadata={"record_count": len(records), "via": via})  # fmt: skip
    if ingest:
        enqueue_on_commit(ingest_coding_memory_export, str(export.pk))
    return ExportResult(export=export, records=records)
