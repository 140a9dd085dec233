"""Take over the audit tables from ``approvals_app`` (state only: no table is created, renamed or copied).

On a fresh database ``approvals_app`` 0001 and 0002 created the tables and their append-only triggers; on an
existing one they already hold the feed. Either way this migration only records the models under their new
app, and moves their content types (and so the permissions on them) to that app.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MOVED = ("auditevent", "auditchainhead")


def move_content_types(apps, schema_editor, *, source: str, target: str):  # type: ignore[no-untyped-def]
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    taken = set(content_type.objects.using(db).filter(app_label=target, model__in=MOVED).values_list("model", flat=True))
    content_type.objects.using(db).filter(app_label=source, model__in=set(MOVED) - taken).update(app_label=target)


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    move_content_types(apps, schema_editor, source="approvals_app", target="audit")


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    move_content_types(apps, schema_editor, source="audit", target="approvals_app")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("accounts", "0001_initial"),
        ("approvals_app", "0007_audit_moved"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditChainHead",
                    fields=[
                        (
                            "tenant",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.PROTECT,
                                primary_key=True,
                                related_name="audit_head",
                                serialize=False,
                                to="accounts.tenant",
                            ),
                        ),
                        ("last_seq", models.BigIntegerField(default=0)),
                        ("last_hash", models.CharField(default="", max_length=64)),
                    ],
                    options={"db_table": "approvals_app_auditchainhead"},
                ),
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("seq", models.BigIntegerField()),
                        ("actor_label", models.CharField(max_length=150)),
                        ("channel", models.CharField(max_length=16)),
                        ("action", models.CharField(max_length=64)),
                        ("target_type", models.CharField(max_length=64)),
                        ("target_id", models.CharField(blank=True, max_length=64)),
                        ("outcome", models.CharField(max_length=32)),
                        ("correlation_id", models.CharField(max_length=128)),
                        ("metadata", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("prev_hash", models.CharField(max_length=64)),
                        ("hash", models.CharField(max_length=64)),
                        (
                            "actor",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "tenant",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="audit_events",
                                to="accounts.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "approvals_app_auditevent",
                        "ordering": ["tenant_id", "seq"],
                        "indexes": [
                            models.Index(fields=["tenant", "-seq"], name="approvals_a_tenant__eba290_idx"),
                            models.Index(fields=["correlation_id"], name="approvals_a_correla_04453e_idx"),
                        ],
                        "constraints": [
                            models.UniqueConstraint(fields=("tenant", "seq"), name="audit_seq_unique_per_tenant")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
