"""manage.py tess_tenant create SLUG [--name NAME] | list"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tess_site.accounts import services
from tess_site.accounts.models import Tenant
from tess_site.errors import TessError


class Command(BaseCommand):
    help = "Create or list tenants."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a tenant")
        create.add_argument("slug")
        create.add_argument("--name")
        sub.add_parser("list", help="list tenants")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "create":
            try:
                tenant = services.tenant_create(slug=options["slug"], name=options.get("name"))
            except (TessError, ValidationError) as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"created tenant {tenant.slug}")
        else:
            for tenant in Tenant.objects.order_by("slug"):
                self.stdout.write(f"{tenant.slug}\t{tenant.name}")
