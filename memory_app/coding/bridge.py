"""``CodingPlastMemBridgeRecordV1`` exactly as seed 003 draws it, and its rendering for plast-mem ingestion."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .models import CodingMemoryEntry

SCHEMA = "computer-use-mcp.coding-memory.v1"
SOURCE = "computer-use-mcp"
TRUST = "reviewed_coding_context_not_instruction_authority"


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def exportable(entry: CodingMemoryEntry) -> bool:
    """Seed 003 eligibility: active, human verified, with review metadata (reviewer, rationale, time)."""
    return (
        entry.status == CodingMemoryEntry.Status.ACTIVE
        and entry.human_verified
        and bool(entry.reviewer)
        and bool(entry.review_rationale)
        and entry.reviewed_at is not None
    )


def bridge_record(entry: CodingMemoryEntry, *, exported_at: datetime) -> dict[str, Any]:
    """The record for one exportable entry; ``ValueError`` for any other (callers filter first)."""
    if not exportable(entry):
        raise ValueError(f"coding memory entry {entry.pk} is not exportable")
    assert entry.reviewed_at is not None
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "source": SOURCE,
        "workspaceKey": entry.workspace_key,
        "memoryId": str(entry.pk),
        "kind": entry.kind,
        "statement": entry.statement,
        "evidence": entry.evidence,
        "confidence": entry.confidence,
        "tags": list(entry.tags),
        "relatedFiles": list(entry.related_files),
    }
    # Optional fields are omitted when absent, as in the seed's TypeScript (`sourceRunId?:`).
    if entry.source_run_id:
        record["sourceRunId"] = entry.source_run_id
    if entry.review_request_id:
        record["reviewRequestId"] = str(entry.review_request_id)
    record["humanVerified"] = True
    record["review"] = {
        "reviewer": entry.reviewer,
        "rationale": entry.review_rationale,
        "reviewedAt": iso(entry.reviewed_at),
    }
    record["exportedAt"] = iso(exported_at)
    record["trust"] = TRUST
    return record


def render_for_plastmem(record: dict[str, Any]) -> str:
    """One record as labelled text for a plast-mem message, its trust value stated first."""
    lines = [
        f"Reviewed coding memory ({record['trust']}):",
        f"schema: {record['schema']}",
        f"workspace: {record['workspaceKey']}",
        f"memory id: {record['memoryId']}",
        f"kind: {record['kind']}",
        f"statement: {record['statement']}",
        f"evidence: {record['evidence']}",
        f"confidence: {record['confidence']}",
        f"tags: {', '.join(record['tags'])}",
        f"related files: {', '.join(record['relatedFiles'])}",
    ]
    if "sourceRunId" in record:
        lines.append(f"source run: {record['sourceRunId']}")
    review = record["review"]
    lines.append(f"reviewed by {review['reviewer']} at {review['reviewedAt']}: {review['rationale']}")
    lines.append(f"exported at: {record['exportedAt']}")
    return "\n".join(lines)
