"""The audit feed's models now belong to ``tess_site.audit``: forget them here, in the state only.

The tables, their rows and the append-only triggers (0002) stay exactly as they are; ``audit/0001`` takes the
same tables over under their unchanged names.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("approvals_app", "0006_approval_pending_expiry")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="AuditEvent"),
                migrations.DeleteModel(name="AuditChainHead"),
            ],
            database_operations=[],
        )
    ]
