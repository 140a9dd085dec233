"""A completed Mos hand-off whose result carries reusable project facts proposes coding-memory candidates for
human review (seed 003); nothing a hand-off sends is ever active or human-verified without a reviewer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from approvals_app.handoff_adapters import SIGNATURE_HEADER, sign
from approvals_app.handoffs import handoff_create
from memory_app.coding.models import CodingMemoryEntry
from memory_app.coding.services import coding_memory_apply
from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of

from .conftest import WORKSPACE

pytestmark = pytest.mark.django_db

SECRET = "mos-shared-secret-for-tests-0123456789"

FACT = {
    "workspaceKey": WORKSPACE,
    "kind": "pitfall",
    "statement": "The ledger tests need PGTZ=UTC.",
    "evidence": "run 881 failed with a timezone diff until PGTZ was set",
    "confidence": "high",
    "tags": ["tests", "timezone"],
    "relatedFiles": ["ledger/tests/test_close.py"],
    "sourceRunId": "run-881",
}


@pytest.fixture
def mos(settings: Any) -> None:
    settings.TESS_MOS_ADAPTER = "none"
    settings.TESS_MOS_WEBHOOK_SECRET = SECRET


def deliver(handoff_id: object, status: str, result: Any) -> Any:
    body = json.dumps({"status": status, "result": result}).encode()
    return APIClient().post(
        f"/api/v1/handoffs/{handoff_id}/result/",
        body,
        content_type="application/json",
        headers={SIGNATURE_HEADER: sign(SECRET, body)},
    )


def test_a_completed_handoff_result_proposes_its_facts_as_candidates_for_review(cast, mos):
    handoff = handoff_create(
        scope_of(cast.owner, cast.acme), session_id=None, summary="fix the ledger tests", payload={}
    )
    acknowledged = deliver(handoff.pk, "acknowledged", {"coding_memory_candidates": [FACT]})
    assert acknowledged.status_code == 200
    assert not CodingMemoryEntry.objects.exists()  # only a completed result proposes anything

    fact_without_run = {key: value for key, value in FACT.items() if key != "sourceRunId"}
    fact_without_run["statement"] = "Run migrations with --plan first."
    result = {"summary": "fixed", "coding_memory_candidates": [FACT, fact_without_run]}
    assert deliver(handoff.pk, "completed", result).status_code == 200

    entries = {e.statement: e for e in CodingMemoryEntry.objects.all()}
    assert set(entries) == {FACT["statement"], "Run migrations with --plan first."}
    first = entries[FACT["statement"]]
    assert (first.status, first.human_verified, first.origin) == ("candidate", False, "handoff")
    assert (first.tenant, first.created_by, first.workspace_key) == (cast.acme, cast.owner, WORKSPACE)
    assert (first.kind, first.confidence, first.tags) == ("pitfall", "high", ["tests", "timezone"])
    assert (first.related_files, first.source_run_id) == (["ledger/tests/test_close.py"], "run-881")
    assert entries["Run migrations with --plan first."].source_run_id == f"handoff:{handoff.pk}"

    # Active only once a human approver reviewed it.
    reviewed = coding_memory_apply(scope_of(cast.approver, cast.acme), entry_id=first.pk, rationale="checked run 881")
    assert (reviewed.status, reviewed.human_verified) == ("active", True)


def test_a_result_cannot_make_a_candidate_active_and_a_malformed_one_is_skipped(cast, mos):
    handoff = handoff_create(
        scope_of(cast.owner, cast.acme), session_id=None, summary="fix the ledger tests", payload={}
    )
    sneaky = {**FACT, "status": "active", "humanVerified": True}
    result = {"coding_memory_candidates": [sneaky, {"kind": "fact"}, "not an object"]}
    response = deliver(handoff.pk, "completed", result)
    assert response.status_code == 200 and response.json()["status"] == "completed"  # the result stands

    [entry] = CodingMemoryEntry.objects.all()
    assert (entry.status, entry.human_verified) == ("candidate", False)
    refused = AuditEvent.objects.filter(action="coding_memory.handoff_candidate", outcome="refused")
    assert sorted(e.metadata["index"] for e in refused) == [1, 2]


def test_a_failed_handoff_proposes_nothing(cast, mos):
    handoff = handoff_create(
        scope_of(cast.owner, cast.acme), session_id=None, summary="fix the ledger tests", payload={}
    )
    assert deliver(handoff.pk, "failed", {"coding_memory_candidates": [FACT]}).status_code == 200
    assert not CodingMemoryEntry.objects.exists()
