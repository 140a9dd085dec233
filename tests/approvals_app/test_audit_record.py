"""record_audit: the one way into the feed. It keeps free text and secrets out and numbers the chain."""

from __future__ import annotations

import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from tess_site.audit.chain import UnsafeMetadata
from tess_site.audit.models import AuditChainHead, AuditEvent
from tess_site.audit.services import record_audit
from tests.conftest import scope_of


@pytest.fixture
def scope(cast):
    return scope_of(cast.auditor, cast.acme)


def record(scope, **fields):
    fields.setdefault("action", "test.touch")
    fields.setdefault("target_type", "document")
    fields.setdefault("outcome", "ok")
    return record_audit(scope, **fields)


@pytest.mark.parametrize(
    "metadata",
    [
        {"reason": "the operator said delete everything"},
        {"note": "hunter2 is my password"},
        {"reason": "line\nbreak"},
        {"ids": ["fine", "not fine"]},
        {"long": "x" * 129},
    ],
    ids=["sentence", "secret-ish-sentence", "newline", "sentence-in-list", "overlong"],
)
def test_it_refuses_free_text_in_metadata(scope, metadata):
    with pytest.raises(UnsafeMetadata):
        record(scope, metadata=metadata)
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    "metadata",
    [{"extra": {"token": "abc"}}, {"ids": [["nested"]]}, {"ids": [{"a": 1}]}, {"ids": list(range(51))}],
    ids=["dict", "list-in-list", "dict-in-list", "long-list"],
)
def test_it_refuses_nested_or_large_metadata(scope, metadata):
    with pytest.raises(UnsafeMetadata):
        record(scope, metadata=metadata)


@pytest.mark.parametrize(
    "metadata",
    [{"Bad Key": 1}, {"CamelCase": 1}, {"1st": 1}, {"": 1}, {"dash-key": 1}, {1: 1}, {f"k{i}": i for i in range(33)}],
    ids=["space", "capitals", "leading-digit", "empty", "dash", "not-a-string", "too-many-keys"],
)
def test_it_refuses_metadata_keys_that_are_not_identifiers(scope, metadata):
    with pytest.raises(UnsafeMetadata):
        record(scope, metadata=metadata)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_it_refuses_numbers_json_cannot_hold(scope, number):
    with pytest.raises(UnsafeMetadata):
        record(scope, metadata={"value": number})


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "Token Issue"},
        {"action": "token issue"},
        {"action": ""},
        {"action": "token.issue; drop table"},
        {"action": "a" * 65},
        {"target_type": "Document"},
        {"outcome": "not ok"},
        {"target_id": "x" * 65},
    ],
    ids=["capitals", "space", "empty", "injection", "overlong", "target-type", "outcome", "target-id"],
)
def test_it_refuses_names_that_are_not_dotted_identifiers(scope, fields):
    with pytest.raises(ValueError):
        record(scope, **fields)
    assert not AuditEvent.objects.exists()
    assert not AuditChainHead.objects.exists()


def test_it_accepts_identifiers_numbers_flags_and_short_lists(scope):
    metadata = {
        "session_id": "sess_01HZX",
        "provider": "anthropic/claude-3.5",
        "email": "ops@example.com",
        "attempts": 3,
        "duration_s": 1.25,
        "dry_run": False,
        "approved": True,
        "parent": None,
        "ids": [1, 2, "run-3"],
    }

    event = record(scope, action="session.terminate", target_type="session", target_id="42", metadata=metadata)

    assert AuditEvent.objects.get(pk=event.pk).metadata == metadata


def test_it_numbers_each_tenants_chain_separately(cast):
    acme = [record(scope_of(cast.auditor, cast.acme)) for _ in range(3)]
    globex = [record(scope_of(cast.outsider, cast.globex)) for _ in range(2)]

    assert [e.seq for e in acme] == [1, 2, 3]
    assert [e.seq for e in globex] == [1, 2]


def test_it_records_who_acted_and_under_which_correlation_id(cast):
    event = record(scope_of(cast.owner, cast.acme, correlation_id="corr-123"))

    assert (event.actor_id, event.actor_label, event.channel) == (cast.owner.pk, "owner", "web")
    assert event.correlation_id == "corr-123"


THREADS = 8
EVENTS_PER_THREAD = 6


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_consecutive_seqs_and_an_unbroken_chain_on_postgres(cast) -> None:
    scopes = [scope_of(cast.auditor, cast.acme, correlation_id=f"thread-{n}") for n in range(THREADS)]
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def write(scope) -> None:
        try:
            start.wait()
            for i in range(EVENTS_PER_THREAD):
                record(scope, target_id=str(i), metadata={"i": i})
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()  # each thread has its own connection; leave none open for the flush

    threads = [threading.Thread(target=write, args=(scope,)) for scope in scopes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    total = THREADS * EVENTS_PER_THREAD
    seqs = list(AuditEvent.objects.filter(tenant=cast.acme).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, total + 1))
    assert AuditChainHead.objects.get(tenant=cast.acme).last_seq == total
    out = StringIO()
    call_command("tess_audit_verify", "--tenant", "acme", stdout=out)
    assert f"acme: {total} events verified" in out.getvalue()
