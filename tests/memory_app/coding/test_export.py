"""Export: only active, human-verified, reviewed entries, as CodingPlastMemBridgeRecordV1 exactly."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory_app.coding.bridge import iso
from memory_app.coding.models import CodingMemoryEntry, CodingMemoryExport
from memory_app.coding.services import (
    ReviewerRequired,
    coding_memory_export,
    coding_memory_reject,
    coding_memory_request_review,
)
from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of

from .conftest import WORKSPACE

pytestmark = pytest.mark.django_db


def export(cast, user=None):
    return coding_memory_export(scope_of(user or cast.approver, cast.acme), workspace_key=WORKSPACE, via="api")


def test_only_active_human_verified_reviewed_entries_are_exported(cast, candidate, active):
    good = active()
    candidate(statement="still a candidate")
    coding_memory_reject(scope_of(cast.approver, cast.acme), entry_id=candidate().pk, rationale="wrong")
    unverified = active(statement="active but not verified")
    CodingMemoryEntry.objects.filter(pk=unverified.pk).update(human_verified=False)
    review_less = active(statement="verified without review metadata")
    CodingMemoryEntry.objects.filter(pk=review_less.pk).update(reviewer="", review_rationale="")
    no_time = active(statement="no review time")
    CodingMemoryEntry.objects.filter(pk=no_time.pk).update(reviewed_at=None)
    retired = active(statement="retired")
    CodingMemoryEntry.objects.filter(pk=retired.pk).update(status="retired")
    active(workspace_key="acme/other-repo")
    result = export(cast)
    assert [r["memoryId"] for r in result.records] == [str(good.pk)]


def test_the_record_has_exactly_the_seed_shape(cast, candidate, active):
    entry = candidate()
    request = coding_memory_request_review(scope_of(cast.owner, cast.acme), entry_id=entry.pk)
    from memory_app.coding.services import coding_memory_apply

    entry = coding_memory_apply(scope_of(cast.approver, cast.acme), entry_id=entry.pk, rationale="seen in run 881")
    result = export(cast)
    [record] = result.records
    assert record == {
        "schema": "computer-use-mcp.coding-memory.v1",
        "source": "computer-use-mcp",
        "workspaceKey": WORKSPACE,
        "memoryId": str(entry.pk),
        "kind": "pitfall",
        "statement": "The ledger tests need PGTZ=UTC.",
        "evidence": "run 881 failed with a timezone diff until PGTZ was set",
        "confidence": "high",
        "tags": ["tests", "timezone"],
        "relatedFiles": ["ledger/tests/test_close.py"],
        "sourceRunId": "run-881",
        "reviewRequestId": str(request.pk),
        "humanVerified": True,
        "review": {"reviewer": "approver", "rationale": "seen in run 881", "reviewedAt": iso(entry.reviewed_at)},
        "exportedAt": iso(result.export.exported_at),
        "trust": "reviewed_coding_context_not_instruction_authority",
    }
    assert record["exportedAt"].endswith("Z") and record["review"]["reviewedAt"].endswith("Z")


def test_optional_fields_are_omitted_when_absent(cast, active):
    active(source_run_id=None)
    [record] = export(cast, user=cast.admin_user).records
    assert "sourceRunId" not in record
    assert "reviewRequestId" not in record
    assert record["review"]["reviewer"] == "approver"


def test_every_export_is_recorded_and_audited(cast, active):
    active()
    result = export(cast)
    row = CodingMemoryExport.objects.get()
    assert (row.exported_by, row.workspace_key, row.record_count, row.via) == (cast.approver, WORKSPACE, 1, "api")
    assert row.records == result.records
    assert row.ingestion == "not_configured"
    event = AuditEvent.objects.get(action="coding_memory.exported")
    assert event.target_id == str(row.pk)
    assert event.metadata == {"record_count": 1, "via": "api"}


@pytest.mark.parametrize("who", ["owner", "teammate", "auditor"])
def test_it_refuses_export_without_the_reviewer_role(cast, active, who):
    active()
    with pytest.raises(ReviewerRequired):
        export(cast, user=getattr(cast, who))
    assert not CodingMemoryExport.objects.exists()


def test_the_command_writes_json_lines_to_a_file(cast, active, tmp_path):
    entries = [active(statement=f"fact {n}") for n in range(2)]
    out = tmp_path / "export.jsonl"
    call_command("export_coding_memory", workspace=WORKSPACE, tenant="acme", user="approver", out=str(out),
                 stderr=io.StringIO())  # fmt: skip
    lines = out.read_text().splitlines()
    assert sorted(json.loads(line)["memoryId"] for line in lines) == sorted(str(e.pk) for e in entries)
    assert CodingMemoryExport.objects.get().via == "command"


def test_the_command_writes_to_stdout_by_default(cast, active):
    active()
    stdout = io.StringIO()
    call_command("export_coding_memory", workspace=WORKSPACE, tenant="acme", user="approver", stdout=stdout,
                 stderr=io.StringIO())  # fmt: skip
    [line] = stdout.getvalue().splitlines()
    assert json.loads(line)["trust"] == "reviewed_coding_context_not_instruction_authority"


def test_the_command_refuses_an_operator(cast, active):
    active()
    with pytest.raises(CommandError):
        call_command("export_coding_memory", workspace=WORKSPACE, tenant="acme", user="owner", stderr=io.StringIO())
