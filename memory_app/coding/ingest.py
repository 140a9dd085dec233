"""Optional ingestion of exported records into plast-mem's ``import_batch_messages`` (seed 003 slice 3).

One message per record: role ``user``, content the record rendered as labelled text with its trust value,
timestamp ``exportedAt`` in milliseconds, ``conversation_id`` folded from the tenant and workspace.
Failures are recorded on the export and never raised to whoever exported.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..plastmem_client import PlastMemClient, PlastMemError, PlastMemUnreachable, conversation_id, millis
from .bridge import render_for_plastmem
from .models import CodingMemoryExport

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_BASE_SECONDS = 10
BACKOFF_CAP_SECONDS = 600


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
    with transaction.atomic():
        export = CodingMemoryExport.objects.select_for_update().filter(pk=export_id).first()
        if export is None or export.ingestion in (
            CodingMemoryExport.Ingestion.INGESTED,
            CodingMemoryExport.Ingestion.FAILED,
            CodingMemoryExport.Ingestion.NOT_CONFIGURED,
        ):
            return IngestOutcome(status=export.ingestion if export else "missing")
        if not url:
            export.ingestion = CodingMemoryExport.Ingestion.NOT_CONFIGURED
            export.save(update_fields=["ingestion"])
            return IngestOutcome(status=export.ingestion)
        export.ingestion_attempts += 1
        export.save(update_fields=["ingestion_attempts"])
        attempt, records = export.ingestion_attempts, list(export.records)
        conversation = workspace_conversation(export.tenant_id, export.workspace_key)
    client = PlastMemClient(base_url=url, timeout=float(getattr(settings, "TESS_PLASTMEM_TIMEOUT", 5)))
    try:
        client.import_batch_messages(conversation, _messages(records))
    except (PlastMemError, PlastMemUnreachable) as exc:
        retry_in = retry_decision(exc, attempt=attempt)
        status = CodingMemoryExport.Ingestion.RETRYING if retry_in else CodingMemoryExport.Ingestion.FAILED
        CodingMemoryExport.objects.filter(pk=export_id).update(ingestion=status, ingestion_error=str(exc)[:300])
        logger.warning("plast-mem ingestion of export %s failed (attempt %d): %s", export_id, attempt, exc)
        return IngestOutcome(status=status, retry_in=retry_in)
    CodingMemoryExport.objects.filter(pk=export_id).update(
        ingestion=CodingMemoryExport.Ingestion.INGESTED, ingestion_error="", ingested_at=timezone.now()
    )
    return IngestOutcome(status=CodingMemoryExport.Ingestion.INGESTED)
