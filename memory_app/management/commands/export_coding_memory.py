"""Export a workspace's reviewed coding memory as JSON Lines of ``CodingPlastMemBridgeRecordV1``.

    manage.py export_coding_memory --workspace acme/payments-api --tenant acme --user alice [--out PATH|-]

The export is made as ``--user``, who must be an approver or admin of ``--tenant`` (the export records who
made it, and the same rule holds as for the API). ``--out -`` (the default) writes to standard output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_app.coding.services import coding_memory_export
from tess_site.accounts.models import Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.context import get_correlation_id
from tess_site.errors import TessError
from tess_site.scope import Channel, Scope


class Command(BaseCommand):
    help = "Export active, human-verified coding memory of a workspace as JSON Lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="workspace key, e.g. acme/payments-api")
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--user", required=True, help="an approver or admin of the tenant, recorded as exporter")
        parser.add_argument("--out", default="-", help="file to write, or - for standard output")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if tenant is None or user is None:
            raise CommandError("Unknown tenant or user.")
        scope = Scope(
            tenant=tenant,
            actor=user,
            channel=Channel.CLI,
            correlation_id=get_correlation_id() or "export-coding-memory",
            roles=roles_for(user=user, tenant=tenant),
        )
        try:
            result = coding_memory_export(scope, workspace_key=options["workspace"], via="command")
        except TessError as exc:
            raise CommandError(exc.message) from exc
        lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in result.records)
        if options["out"] == "-":
            self.stdout.write(lines, ending="")
        else:
            Path(options["out"]).write_text(lines, encoding="utf-8")
        self.stderr.write(f"exported {len(result.records)} records (export {result.export.pk})")
