"""On PostgreSQL, protect each tenant's audit chain head as the rows are protected.

The head may be created empty and may advance by exactly one seq, as ``record_audit`` does; DELETE, TRUNCATE
and any other change raise. ``tess_audit_verify --repair-head`` (after verifying the rows) sets
``tess.audit_head_repair`` for its own transaction to restore a head that is missing or behind.
"""

from django.db import migrations

HEAD = "approvals_app_auditchainhead"

FORWARD = f"""
CREATE OR REPLACE FUNCTION tess_audit_head_guard() RETURNS trigger AS $$
BEGIN
    IF current_setting('tess.audit_head_repair', true) = 'on' THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' AND NEW.last_seq = 0 AND NEW.last_hash = '' THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.tenant_id = OLD.tenant_id AND NEW.last_seq = OLD.last_seq + 1 THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the audit chain head only advances one event at a time: % on % is not allowed',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER {HEAD}_guard
    BEFORE INSERT OR UPDATE OR DELETE ON {HEAD}
    FOR EACH ROW EXECUTE FUNCTION tess_audit_head_guard();

CREATE TRIGGER {HEAD}_no_truncate
    BEFORE TRUNCATE ON {HEAD}
    FOR EACH STATEMENT EXECUTE FUNCTION tess_audit_head_guard();
"""

BACKWARD = f"""
DROP TRIGGER IF EXISTS {HEAD}_no_truncate ON {HEAD};
DROP TRIGGER IF EXISTS {HEAD}_guard ON {HEAD};
DROP FUNCTION IF EXISTS tess_audit_head_guard();
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
