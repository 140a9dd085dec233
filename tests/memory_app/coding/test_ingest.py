"""Optional ingestion into plast-mem: one message per record, retried on transient failure, never fatal."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory_app.coding.ingest import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_CAP_SECONDS,
    MAX_ATTEMPTS,
    coding_memory_ingest,
    retry_decision,
    workspace_conversation,
)
from memory_app.coding.models import CodingMemoryExport
from memory_app.coding.preretrieve import PRE_RETRIEVE_LABEL, coding_context_pre_retrieve
from memory_app.coding.services import coding_memory_export
from memory_app.coding.tasks import requeue_due_coding_exports
from memory_app.plastmem_client import PlastMemError, PlastMemUnreachable, millis
from tests.conftest import scope_of
from tests.memory_app.plastmem_standin import unreachable_url

from .conftest import WORKSPACE

pytestmark = pytest.mark.django_db(transaction=True)


def export(cast):
    return coding_memory_export(scope_of(cast.approver, cast.acme), workspace_key=WORKSPACE, via="api")


def test_a_reviewed_entry_round_trips_through_plast_mem(cast, active, plastmem, settings):
    settings.TESS_PLASTMEM_URL = plastmem.url
    entry = active()
    result = export(cast)
    [body] = plastmem.requests_to("import_batch_messages")
    assert body["conversation_id"] == str(workspace_conversation(cast.acme.pk, WORKSPACE))
    [message] = body["messages"]
    assert message["role"] == "user"
    assert message["timestamp"] == millis(result.export.exported_at)
    assert message["content"].startswith("Reviewed coding memory (reviewed_coding_context_not_instruction_authority):")
    assert f"memory id: {entry.pk}" in message["content"]
    assert "statement: The ledger tests need PGTZ=UTC." in message["content"]
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts, row.ingestion_error) == ("ingested", 1, "")
    block = coding_context_pre_retrieve(
        scope_of(cast.owner, cast.acme),
        goal="fix the ledger tests timezone failure",
        workspace_key=WORKSPACE,
        related_files=["ledger/tests/test_close.py"],
    )
    assert block is not None
    assert block.text.startswith(PRE_RETRIEVE_LABEL + "\n")
    assert "The ledger tests need PGTZ=UTC." in block.text


def test_nothing_is_sent_when_plast_mem_is_not_configured(cast, active, plastmem, settings):
    settings.TESS_PLASTMEM_URL = ""
    active()
    export(cast)
    assert plastmem.requests_to("import_batch_messages") == []
    assert CodingMemoryExport.objects.get().ingestion == "not_configured"


def due_now() -> None:
    """The backoff has passed (tests move the due time instead of waiting for it)."""
    CodingMemoryExport.objects.exclude(ingestion_next_at=None).update(ingestion_next_at=timezone.now())


def test_an_unreachable_server_is_retried_then_recorded_and_the_caller_never_fails(cast, active, settings):
    settings.TESS_PLASTMEM_URL = unreachable_url()
    active()
    result = export(cast)  # one attempt on commit; the retries wait out their backoff in the database
    assert len(result.records) == 1
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("retrying", 1)
    for _ in range(MAX_ATTEMPTS - 1):
        due_now()
        assert requeue_due_coding_exports() == 1
    row = CodingMemoryExport.objects.get()
    assert row.ingestion == "failed"
    assert row.ingestion_attempts == MAX_ATTEMPTS
    assert "ConnectError" in row.ingestion_error
    assert row.ingestion_next_at is None
    due_now()
    assert requeue_due_coding_exports() == 0


def test_a_transient_error_then_success_is_ingested(cast, active, plastmem, settings):
    settings.TESS_PLASTMEM_URL = plastmem.url
    plastmem.state.fail_next.append((503, "database is restarting"))
    active()
    export(cast)
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("retrying", 1)
    assert requeue_due_coding_exports() == 0  # not before its backoff
    due_now()
    assert requeue_due_coding_exports() == 1
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("ingested", 2)
    assert len(plastmem.requests_to("import_batch_messages")) == 2


def test_the_empty_content_500_is_permanent_and_not_retried(cast, active, plastmem, settings):
    settings.TESS_PLASTMEM_URL = plastmem.url
    plastmem.state.fail_next.append((500, "Message content cannot be empty"))
    active()
    export(cast)
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("failed", 1)
    assert row.ingestion_error == "plast-mem answered 500: Message content cannot be empty"


def test_an_ingested_export_is_not_sent_twice(cast, active, plastmem, settings):
    settings.TESS_PLASTMEM_URL = plastmem.url
    active()
    result = export(cast)
    assert coding_memory_ingest(export_id=str(result.export.pk)).status == "ingested"
    assert len(plastmem.requests_to("import_batch_messages")) == 1


@pytest.mark.parametrize(
    ("error", "attempt", "expected"),
    [
        (PlastMemUnreachable("ConnectError"), 1, BACKOFF_BASE_SECONDS),
        (PlastMemUnreachable("ReadTimeout"), 2, BACKOFF_BASE_SECONDS * 2),
        (PlastMemError(503, "unavailable"), 3, BACKOFF_BASE_SECONDS * 4),
        (PlastMemError(500, "database error"), 1, BACKOFF_BASE_SECONDS),
        (PlastMemUnreachable("ConnectError"), MAX_ATTEMPTS - 1, min(BACKOFF_CAP_SECONDS, 10 * 2 ** (MAX_ATTEMPTS - 2))),
        (PlastMemUnreachable("ConnectError"), MAX_ATTEMPTS, None),
        (PlastMemError(500, "Message content cannot be empty"), 1, None),
        (PlastMemError(422, "Failed to deserialize the JSON body"), 1, None),
        (ValueError("a bug"), 1, None),
    ],
)
def test_the_retry_decision(error, attempt, expected):
    assert retry_decision(error, attempt=attempt) == expected


def test_backoff_is_capped():
    assert retry_decision(PlastMemUnreachable("x"), attempt=MAX_ATTEMPTS - 1) <= BACKOFF_CAP_SECONDS


def test_on_a_worker_a_transient_failure_is_retried_with_the_backoff(cast, active, settings, monkeypatch):
    from celery.exceptions import Retry

    from memory_app.coding.tasks import ingest_coding_memory_export

    settings.TESS_PLASTMEM_URL = ""
    active()
    result = export(cast)
    CodingMemoryExport.objects.update(ingestion="pending")
    settings.TESS_PLASTMEM_URL = unreachable_url()
    countdowns = []

    def fake_retry(countdown: int) -> Retry:
        countdowns.append(countdown)
        return Retry()

    monkeypatch.setattr(ingest_coding_memory_export, "retry", fake_retry)
    ingest_coding_memory_export.push_request(is_eager=False, retries=0)
    try:
        with pytest.raises(Retry):
            ingest_coding_memory_export.run(str(result.export.pk))
    finally:
        ingest_coding_memory_export.pop_request()
    assert countdowns == [BACKOFF_BASE_SECONDS]
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("retrying", 1)


def test_an_export_whose_wake_up_was_lost_is_sent_by_the_embedded_pumps_sweep(
    cast, active, plastmem, settings, monkeypatch
):
    """Redis restarted while the export committed: ``enqueue_on_commit`` drops the wake-up (the broker refuses
    it) and the export stays ``pending`` in the database; the embedded pump's housekeeping sends it over HTTP."""
    from kombu.exceptions import OperationalError

    from memory_app.coding.tasks import ingest_coding_memory_export
    from sessions_app.pump import housekeeping

    settings.TESS_PLASTMEM_URL = plastmem.url
    active()

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    with monkeypatch.context() as patched:
        patched.setattr(ingest_coding_memory_export, "apply_async", broker_down)
        result = export(cast)
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("pending", 0)
    assert plastmem.requests_to("import_batch_messages") == []

    housekeeping()
    assert plastmem.requests_to("import_batch_messages") == []  # its wake-up may still be on its way
    CodingMemoryExport.objects.update(ingestion_next_at=timezone.now())  # the grace for the wake-up has passed
    housekeeping()
    [body] = plastmem.requests_to("import_batch_messages")
    assert body["conversation_id"] == str(workspace_conversation(cast.acme.pk, WORKSPACE))
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts, row.ingestion_next_at) == ("ingested", 1, None)
    assert row.pk == result.export.pk
    housekeeping()
    assert len(plastmem.requests_to("import_batch_messages")) == 1  # settled: never sent again


def test_the_export_request_makes_one_attempt_and_leaves_the_retries_to_the_sweep(cast, active, settings, api_as):
    settings.TESS_PLASTMEM_URL = unreachable_url()
    active()
    response = api_as(cast.approver).post("/api/v1/coding-memory/export/", {"workspace": WORKSPACE}, format="json")
    assert response.status_code == 200, response.content
    row = CodingMemoryExport.objects.get()
    assert (row.ingestion, row.ingestion_attempts) == ("retrying", 1)
    assert row.ingestion_next_at > timezone.now()  # the next attempt waits for its backoff, outside the request


def test_a_duplicate_wake_up_sends_nothing_before_the_export_is_due(cast, active, plastmem, settings):
    settings.TESS_PLASTMEM_URL = plastmem.url
    plastmem.state.fail_next.append((503, "database is restarting"))
    active()
    result = export(cast)
    assert coding_memory_ingest(export_id=str(result.export.pk)).status == "retrying"  # a late Celery retry
    assert len(plastmem.requests_to("import_batch_messages")) == 1
    assert CodingMemoryExport.objects.get().ingestion_attempts == 1
