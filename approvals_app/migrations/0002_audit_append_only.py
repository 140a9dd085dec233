"""On PostgreSQL, make the audit feed append-only at the database: UPDATE, DELETE and TRUNCATE raise.

SQLite (the embedded default) has no TRUNCATE and is a single-user store; the hash chain and
``tess_audit_verify`` still detect tampering there.
"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION tess_audit_reject_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit feed is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER approvals_app_auditevent_no_update_delete
    BEFORE UPDATE OR DELETE ON approvals_app_auditevent
    FOR EACH ROW EXECUTE FUNCTION tess_audit_reject_change();

CREATE TRIGGER approvals_app_auditevent_no_truncate
    BEFORE TRUNCATE ON approvals_app_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION tess_audit_reject_change();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS approvals_app_auditevent_no_truncate ON approvals_app_auditevent;
DROP TRIGGER IF EXISTS approvals_app_auditevent_no_update_delete ON approvals_app_auditevent;
DROP FUNCTION IF EXISTS tess_audit_reject_change();
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("approvals_app", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
