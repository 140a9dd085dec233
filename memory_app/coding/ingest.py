"""Optional ingestion of exported records into plast-mem's ``import_batch_messages`` (seed 003 slice 3).

One message per record: role ``user``, content the record rendered as labelled text with its trust value,
timestamp ``exportedAt`` in milliseconds, ``conversation_id`` folded from the tenant and workspace.
Failures are recorded on the export and never raised to whoever exported.

Each wake-up makes at most one attempt. The export row is the work: its ``ingestion_next_at`` says when
the next attempt is due, and the periodic sweep (``coding_memory_requeue_due``: Celery beat with Redis, the
embedded pump's housekeeping without) wakes every export that is due, so retries wait out their backoff
outside the request that exported, and an export whose wake-up was lost (a Redis restart) is still sent.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..plastmem_client import PlastMemClient, PlastMemError, PlastMemUnreachable, conversation_id, millis
from .bridge import render_for_plastmem
from .models import CodingMemoryExport

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_BASE_SECONDS = 10
BACKOFF_CAP_SECONDS = 600
# A first wake-up is queued on commit; only if it has not run this long after the export does the sweep send it.
LOST_WAKEUP_GRACE_SECONDS = 60
REQUEUE_BATCH = 100


@dataclass(frozen=True)
class IngestOutcome:
    status: str  # one of CodingMemoryExport.Ingestion
    retry_in: int | None = None  # seconds, when the caller should try again


def workspace_conversation(tenant_id: int, workspace_key: str) -> uuid.UUID:
    """The plast-mem conversation of one tenant's workspace (tenants never share one)."""
    return conversation_id("coding-memory", str(tenant_id), workspace_key)


def retry_decision(error: Exception, *, attempt: int) -> int | None:
    """Seconds to wait before attempt ``attempt + 1``, or ``None`` when retrying cannot help or is used up.

    Transient: no answer (refused, timeout) and 5xx answers. Permanent: 4xx answers and the 500 plast-mem
    gives for an empty content. Backoff doubles from ``BACKOFF_BASE_SECONDS`` up to ``BACKOFF_CAP_SECONDS``.
    """
    if attempt >= MAX_ATTEMPTS:
        return None
    if isinstance(error, PlastMemError) and error.permanent:
        return None
    if not isinstance(error, PlastMemError | PlastMemUnreachable):
        return None
    return int(min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1)))


def _messages(records: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        {
            "role": "user",
            "content": render_for_plastmem(record),
            "timestamp": millis(datetime.fromisoformat(str(record["exportedAt"]).replace("Z", "+00:00"))),
        }
        for record in records
    ]


def coding_memory_ingest(*, export_id: str) -> IngestOutcome:
    """Send one export to plast-mem and record how it went. Idempotent for an export already ingested."""
    url = getattr(settings, "TESS_PLASTMEM_URL", "") or ""
    timeout = float(getattr(settings, "TESS_PLASTMEM_TIMEOUT", 5))
    with transaction.atomic():
        export = CodingMemoryExport.objects.select_for_update().filter(pk=export_id).first()
        if export is None or export.ingestion in (
            CodingMemoryExport.Ingestion.INGESTED,
            CodingMemoryExport.Ingestion.FAILED,
            CodingMemoryExport.Ingestion.NOT_CONFIGURED,
        ):
            return IngestOutcome(status=export.ingestion if export else "missing")
        now = timezone.now()
        if export.ingestion_attempts and export.ingestion_next_at is not None and export.ingestion_next_at > now:
            # Not due (a backoff, or another attempt in flight): a duplicate wake-up sends nothing.
            return IngestOutcome(status=export.ingestion)
        if not url:
            export.ingestion = CodingMemoryExport.Ingestion.NOT_CONFIGURED
            export.ingestion_next_at = None
            export.save(update_fields=["ingestion", "ingestion_next_at"])
            return IngestOutcome(status=export.ingestion)
        export.ingestion_attempts += 1
        # While this attempt is in flight the sweep leaves the export alone; if the process dies, it is due again.
        export.ingestion_next_at = now + timedelta(seconds=2 * timeout + 30)
        export.save(update_fields=["ingestion_attempts", "ingestion_next_at"])
        attempt, records = export.ingestion_attempts, list(export.records)
        conversation = workspace_conversation(export.tenant_id, export.workspace_key)
    client = PlastMemClient(base_url=url, timeout=timeout)
    try:
        client.import_batch_messages(conversation, _messages(records))
    except (PlastMemError, PlastMemUnreachable) as exc:
        retry_in = retry_decision(exc, attempt=attempt)
        status = CodingMemoryExport.Ingestion.RETRYING if retry_in else CodingMemoryExport.Ingestion.FAILED
        next_at = timezone.now() + timedelta(seconds=retry_in) if retry_in else None
        CodingMemoryExport.objects.filter(pk=export_id).update(
            ingestion=status, ingestion_error=str(exc)[:300], ingestion_next_at=next_at
        )
        logger.warning("plast-mem ingestion of export %s failed (attempt %d): %s", export_id, attempt, exc)
        return IngestOutcome(status=status, retry_in=retry_in)
    CodingMemoryExport.objects.filter(pk=export_id).update(
        ingestion=CodingMemoryExport.Ingestion.INGESTED,
        ingestion_error="",
        ingested_at=timezone.now(),
        ingestion_next_at=None,
    )
    return IngestOutcome(status=CodingMemoryExport.Ingestion.INGESTED)


def coding_memory_requeue_due(wake: Callable[[str], object]) -> int:
    """Wake every export still to be ingested whose next attempt is due; returns how many (periodic).

    Due: past its backoff, past an attempt that should have finished, or past the grace its first wake-up
    had (rows from before ``ingestion_next_at`` existed count from ``exported_at``). Waking one twice is
    harmless: ``coding_memory_ingest`` sends only what is due.
    """
    now = timezone.now()
    unsettled = (CodingMemoryExport.Ingestion.PENDING, CodingMemoryExport.Ingestion.RETRYING)
    lost = now - timedelta(seconds=LOST_WAKEUP_GRACE_SECONDS)
    due = list(
        CodingMemoryExport.objects.filter(ingestion__in=unsettled)
        .filter(Q(ingestion_next_at__lte=now) | Q(ingestion_next_at__isnull=True, exported_at__lte=lost))
        .order_by("exported_at")
        .values_list("pk", flat=True)[:REQUEUE_BATCH]
    )
    for pk in due:
        wake(str(pk))
    return len(due)
