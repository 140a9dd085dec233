"""manage.py tess_audit_verify [--tenant SLUG] [--repair-head]: recompute every tenant's audit hash chain."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tess_site.accounts.models import Tenant
from tess_site.audit.models import AuditChainHead
from tess_site.audit.selectors import audit_chain_verify, audit_rows_verify
from tess_site.audit.services import audit_head_repair


class Command(BaseCommand):
    help = (
        "Recompute each tenant's audit hash chain: seqs 1..N without gaps, every prev_hash linking to the "
        "row before, every hash matching its row, and the chain head matching the last row. Exits non-zero "
        "and names the first broken row of each tenant if anything does not verify."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", metavar="SLUG", help="verify only this tenant")
        parser.add_argument(
            "--repair-head",
            action="store_true",
            help="first set each chain head to its last row, where the rows verify and the head is missing or "
            "behind (audited writes answer 503 audit_unavailable until then); rows that do not verify are never "
            "repaired",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenants = Tenant.objects.order_by("slug")
        if options["tenant"]:
            tenants = tenants.filter(slug=options["tenant"])
            if not tenants.exists():
                raise CommandError(f"no tenant {options['tenant']!r}")
        broken: list[str] = []
        for tenant in tenants:
            if options["repair_head"]:
                self._repair_head(tenant)
            report = audit_chain_verify(tenant=tenant)
            if report.broken is None:
                # The head hash is printed so an operator can keep it elsewhere: a chain verifies against
                # itself, so only an outside copy shows that its newest rows were not replaced wholesale.
                self.stdout.write(
                    f"{tenant.slug}: {report.count} events verified; head #{report.last_seq} {report.last_hash}"
                )
                continue
            where = f"row id {report.broken.row_id}" if report.broken.row_id is not None else "no row"
            self.stderr.write(
                f"{tenant.slug}: BROKEN at seq {report.broken.seq} ({where}): {report.broken.problem} "
                f"({report.count} events verified before it)"
            )
            broken.append(tenant.slug)
        if broken:
            raise CommandError(f"audit chain broken in {len(broken)} tenant(s): {', '.join(broken)}")

    def _repair_head(self, tenant: Tenant) -> None:
        rows = audit_rows_verify(tenant=tenant)
        if rows.broken is not None:
            self.stderr.write(f"{tenant.slug}: rows do not verify at seq {rows.broken.seq}; head left as it is")
            return
        last_hash = rows.last_hash if rows.count else ""
        head = AuditChainHead.objects.filter(tenant_id=tenant.pk).first()
        if head is not None and (head.last_seq, head.last_hash) == (rows.last_seq, last_hash):
            return
        if head is not None and head.last_seq > rows.last_seq:
            self.stderr.write(f"{tenant.slug}: head #{head.last_seq} is past the last row; head left as it is")
            return
        audit_head_repair(tenant_id=tenant.pk, last_seq=rows.last_seq, last_hash=last_hash)
        before = f"#{head.last_seq}" if head is not None else "missing"
        self.stdout.write(f"{tenant.slug}: chain head repaired ({before} -> #{rows.last_seq})")
