"""Moving the audit feed into ``tess_site.audit`` keeps every row, the chain and the append-only triggers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from tess_site.accounts.models import Tenant
from tess_site.audit.chain import GENESIS, chain_hash
from tess_site.audit.models import AuditEvent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE_MOVE = [("approvals_app", "0006_approval_pending_expiry"), ("audit", None)]


def _migrate(targets: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.fixture
def at_schema_before_move() -> Iterator[None]:
    """The database as it was before the move; migrated forward again afterwards, whatever the test did."""
    _migrate(BEFORE_MOVE)
    try:
        yield
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def _insert_chain_as_before(tenant_id: int, count: int) -> list[str]:
    """Append ``count`` rows to ``tenant_id``'s chain in the tables as the pre-move writer left them."""
    hashes, prev = [], GENESIS
    start = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO approvals_app_auditchainhead (tenant_id, last_seq, last_hash) VALUES (%s, 0, '')", [tenant_id]
        )
        for seq in range(1, count + 1):
            fields: dict[str, Any] = {
                "seq": seq,
                "actor_id": None,
                "actor_label": "system",
                "channel": "system",
                "action": "test.touch",
                "target_type": "document",
                "target_id": f"doc-{seq}",
                "outcome": "ok",
                "correlation_id": f"corr-{seq}",
                "metadata": {"n": seq},
                "created_at": start + timedelta(seconds=seq),
                "prev_hash": prev,
            }
            digest = chain_hash(tenant_id=tenant_id, **fields)
            cursor.execute(
                "INSERT INTO approvals_app_auditevent (tenant_id, seq, actor_id, actor_label, channel, action, "
                "target_type, target_id, outcome, correlation_id, metadata, created_at, prev_hash, hash) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s)",
                [
                    tenant_id,
                    *[fields[k] for k in ("seq", "actor_id", "actor_label", "channel", "action", "target_type")],
                    fields["target_id"],
                    fields["outcome"],
                    fields["correlation_id"],
                    json.dumps(fields["metadata"]),
                    fields["created_at"],
                    prev,
                    digest,
                ],
            )
            prev = digest
            hashes.append(digest)
        cursor.execute(
            "UPDATE approvals_app_auditchainhead SET last_seq = %s, last_hash = %s WHERE tenant_id = %s",
            [count, prev, tenant_id],
        )
    return hashes


def test_rows_recorded_before_the_move_still_verify_after_it(at_schema_before_move: None, capsys) -> None:
    tenant = Tenant.objects.create(slug="moved", name="Moved")
    hashes = _insert_chain_as_before(tenant.pk, 3)

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    rows = list(AuditEvent.objects.filter(tenant=tenant).order_by("seq"))
    assert [row.hash for row in rows] == hashes
    assert [row.target_id for row in rows] == ["doc-1", "doc-2", "doc-3"]
    call_command("tess_audit_verify", "--tenant", "moved")
    assert f"moved: 3 events verified; head #3 {hashes[-1]}" in capsys.readouterr().out


def test_the_feed_is_still_append_only_after_the_move(at_schema_before_move: None) -> None:
    tenant = Tenant.objects.create(slug="moved", name="Moved")
    _insert_chain_as_before(tenant.pk, 1)

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(tenant=tenant).update(outcome="forged")
    assert AuditEvent.objects.get(tenant=tenant).outcome == "ok"


def test_the_audit_permissions_move_with_their_content_types(at_schema_before_move: None) -> None:
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    # As it was before the move: the feed's content type (and so its permissions) under approvals_app.
    assert not ContentType.objects.filter(app_label="audit").exists()
    old, _ = ContentType.objects.get_or_create(app_label="approvals_app", model="auditevent")
    permission, _ = Permission.objects.get_or_create(
        content_type=old, codename="view_auditevent", defaults={"name": "Can view audit event"}
    )

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    moved = ContentType.objects.get(pk=old.pk)
    assert (moved.app_label, moved.model) == ("audit", "auditevent")
    assert Permission.objects.get(pk=permission.pk).content_type_id == old.pk
