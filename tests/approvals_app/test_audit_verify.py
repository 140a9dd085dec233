"""tess_audit_verify recomputes each tenant's hash chain and names the first row that does not verify."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db.models import QuerySet

from tess_site.audit import selectors
from tess_site.audit.chain import GENESIS, chain_hash, row_hash
from tess_site.audit.models import AuditChainHead, AuditEvent
from tests.approvals_app.conftest import tamper
from tests.conftest import AUDIT_HEAD_TABLE, AUDIT_TABLE, scope_of


def verify(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("tess_audit_verify", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def verify_fails(*args: str) -> str:
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="audit chain broken"):
        call_command("tess_audit_verify", *args, stdout=out, stderr=err)
    return err.getvalue()


@pytest.fixture
def acme_events(cast, record_events) -> list[AuditEvent]:
    return record_events(scope_of(cast.auditor, cast.acme), 5)


@pytest.mark.postgres
def test_it_verifies_a_freshly_recorded_chain_read_back_from_postgres(cast, record_events):
    # Values whose form PostgreSQL may change on the way back: timestamps (microseconds, UTC) and jsonb numbers.
    metadata = {"ratio": 0.1, "whole": 1.0, "big": 1e20, "negative_zero": -0.0, "tiny": 1.5e-7, "ids": [1, "a-b"]}
    record_events(scope_of(cast.auditor, cast.acme), 3, metadata=metadata)
    record_events(scope_of(cast.outsider, cast.globex), 2, metadata={"flag": True, "none": None})

    for event in AuditEvent.objects.order_by("tenant_id", "seq"):
        assert row_hash(event) == event.hash
    out, err = verify()

    assert "acme: 3 events verified; head #3" in out
    assert "globex: 2 events verified; head #2" in out
    assert err == ""


def test_it_verifies_a_tenant_without_events(cast):
    out, _ = verify()

    assert "acme: 0 events verified; head #0" in out


def test_the_first_row_links_to_genesis_and_each_row_to_the_one_before(acme_events):
    assert acme_events[0].prev_hash == GENESIS
    assert [e.prev_hash for e in acme_events[1:]] == [e.hash for e in acme_events[:-1]]
    assert AuditChainHead.objects.get().last_hash == acme_events[-1].hash


def test_it_names_a_row_altered_behind_the_triggers(acme_events):
    target = acme_events[2]
    tamper(f'UPDATE "{AUDIT_TABLE}" SET outcome = %s WHERE id = %s', ["denied", target.pk])

    err = verify_fails()

    assert f"acme: BROKEN at seq 3 (row id {target.pk}): stored hash does not match" in err
    assert "2 events verified before it" in err


def test_it_names_the_next_row_when_an_altered_row_was_rehashed(acme_events):
    # An intruder who recomputes the altered row's hash still breaks the link from the row after it.
    target = acme_events[2]
    forged = chain_hash(
        tenant_id=target.tenant_id,
        seq=target.seq,
        actor_id=target.actor_id,
        actor_label=target.actor_label,
        channel=target.channel,
        action=target.action,
        target_type=target.target_type,
        target_id=target.target_id,
        outcome="denied",
        correlation_id=target.correlation_id,
        metadata=target.metadata,
        created_at=target.created_at,
        prev_hash=target.prev_hash,
    )
    tamper(f'UPDATE "{AUDIT_TABLE}" SET outcome = %s, hash = %s WHERE id = %s', ["denied", forged, target.pk])

    err = verify_fails()

    assert f"acme: BROKEN at seq 4 (row id {acme_events[3].pk}): prev_hash is not the hash of seq 3" in err


def test_it_names_the_gap_left_by_a_deleted_row(acme_events):
    tamper(f'DELETE FROM "{AUDIT_TABLE}" WHERE id = %s', [acme_events[2].pk])

    err = verify_fails()

    assert f"acme: BROKEN at seq 4 (row id {acme_events[3].pk}): seq 3 missing" in err


def test_it_detects_deleted_rows_at_the_end_of_the_chain(acme_events):
    tamper(f'DELETE FROM "{AUDIT_TABLE}" WHERE id IN (%s, %s)', [acme_events[3].pk, acme_events[4].pk])

    err = verify_fails()

    assert "acme: BROKEN at seq 4 (no row): seqs 4..5 missing: the chain head is at seq 5" in err


def test_it_detects_a_chain_head_that_does_not_match_the_last_row(acme_events):
    tamper(f'UPDATE "{AUDIT_HEAD_TABLE}" SET last_hash = %s', ["f" * 64])

    err = verify_fails()

    assert f"acme: BROKEN at seq 5 (row id {acme_events[4].pk}): chain head hash" in err


def test_it_detects_rows_appended_past_the_chain_head(acme_events):
    tamper(f'UPDATE "{AUDIT_HEAD_TABLE}" SET last_seq = 3, last_hash = %s', [acme_events[2].hash])

    err = verify_fails()

    assert f"acme: BROKEN at seq 4 (row id {acme_events[3].pk}): the chain head is at seq 3" in err


def test_it_reports_every_broken_tenant_and_still_verifies_the_others(cast, acme_events, record_events):
    record_events(scope_of(cast.outsider, cast.globex), 2)
    tamper(f'UPDATE "{AUDIT_TABLE}" SET target_id = %s WHERE id = %s', ["other", acme_events[0].pk])
    out, err = StringIO(), StringIO()

    with pytest.raises(CommandError, match="broken in 1 tenant"):
        call_command("tess_audit_verify", stdout=out, stderr=err)

    assert "acme: BROKEN at seq 1" in err.getvalue()
    assert "globex: 2 events verified" in out.getvalue()


def test_it_verifies_only_the_named_tenant(cast, acme_events, record_events):
    record_events(scope_of(cast.outsider, cast.globex), 2)
    tamper(f'UPDATE "{AUDIT_TABLE}" SET outcome = %s WHERE id = %s', ["denied", acme_events[0].pk])

    out, err = verify("--tenant", "globex")

    assert (
        out.strip() == f"globex: 2 events verified; head #2 {AuditChainHead.objects.get(tenant=cast.globex).last_hash}"
    )
    assert err == ""


def test_it_streams_the_chain_in_chunks_instead_of_loading_it(acme_events, monkeypatch) -> None:
    chunk_sizes: list[int | None] = []
    original = QuerySet.iterator

    def spy(self: QuerySet[Any], chunk_size: int | None = None) -> Iterator[Any]:
        chunk_sizes.append(chunk_size)
        return original(self, chunk_size=chunk_size)

    monkeypatch.setattr(selectors, "VERIFY_CHUNK", 2)
    monkeypatch.setattr(QuerySet, "iterator", spy)

    out, _ = verify("--tenant", "acme")

    assert chunk_sizes == [2]
    assert "acme: 5 events verified" in out


def test_it_refuses_an_unknown_tenant(cast):
    with pytest.raises(CommandError, match="no tenant 'nope'"):
        verify("--tenant", "nope")


def test_repair_head_restores_a_missing_head_from_verified_rows(cast, acme_events):
    tamper(f'DELETE FROM "{AUDIT_HEAD_TABLE}"')

    out, err = verify("--repair-head")

    assert "acme: chain head repaired (missing -> #5)" in out and err == ""
    assert AuditChainHead.objects.get(tenant=cast.acme).last_hash == acme_events[-1].hash
    assert "acme: 5 events verified; head #5" in out


def test_repair_head_brings_a_head_that_fell_behind_up_to_the_last_row(cast, acme_events, record_events):
    tamper(f'UPDATE "{AUDIT_HEAD_TABLE}" SET last_seq = 2, last_hash = %s', [acme_events[1].hash])

    out, _ = verify("--repair-head")

    assert "acme: chain head repaired (#2 -> #5)" in out
    assert record_events(scope_of(cast.auditor, cast.acme), 1)[0].seq == 6  # audited writes work again


def test_repair_head_never_repairs_over_rows_that_do_not_verify(cast, acme_events):
    tamper(f'UPDATE "{AUDIT_TABLE}" SET outcome = %s WHERE id = %s', ["denied", acme_events[1].pk])
    tamper(f'DELETE FROM "{AUDIT_HEAD_TABLE}"')

    out = StringIO()
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("tess_audit_verify", "--repair-head", stdout=out, stderr=err)

    assert "acme: rows do not verify at seq 2; head left as it is" in err.getvalue()
    assert not AuditChainHead.objects.filter(tenant=cast.acme).exists()
