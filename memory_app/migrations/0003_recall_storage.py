"""Operator-memory storage for recall on every turn (seed 002; bench/b_memory.py).

Recall advances ``last_used_at`` of the rows it selects. Free room on every page (fillfactor) lets that
update be a HOT update: the new row version stays on the same page and no index entry is written, so a
recall touches the same few pages at a thousand operators as at a hundred thousand. The two dropped
indexes duplicated others (the unique constraints lead with ``(tenant, operator)``; the ``operator``
foreign-key index serves erasure) and each one cost every non-HOT write.
"""

import django.db.models.deletion
from django.db import migrations, models

FILLFACTOR = 70  # room for one recall's new row versions of an operator's page; pruned on the next visit


def set_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE memory_app_operatormemory SET (fillfactor = {FILLFACTOR})")


def reset_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE memory_app_operatormemory RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("memory_app", "0002_plugin_and_coding_memory"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="operatormemory", name="memory_recall"),
        migrations.AlterField(
            model_name="operatormemory",
            name="tenant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="accounts.tenant",
            ),
        ),
        migrations.RunPython(set_fillfactor, reset_fillfactor),
    ]
