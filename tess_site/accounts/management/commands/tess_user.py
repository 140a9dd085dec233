"""manage.py tess_user add --tenant SLUG --username NAME --role ROLE [--role ROLE …] [--password] [--token]"""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tess_site.accounts import services
from tess_site.accounts.models import Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.context import new_correlation_id
from tess_site.scope import Channel, Role, Scope


class Command(BaseCommand):
    help = "Add a user to a tenant with roles; optionally set a password and print a new token (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="add (or extend) a user in a tenant")
        add.add_argument("--tenant", required=True, help="tenant slug")
        add.add_argument("--username", required=True)
        add.add_argument("--role", action="append", required=True, choices=[r.value for r in Role])
        add.add_argument("--password", action="store_true", help="prompt for a password")
        add.add_argument("--token", action="store_true", help="print a new personal token once")
        add.add_argument("--token-days", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {options['tenant']!r}; create it with: manage.py tess_tenant create SLUG")
        password = getpass.getpass("Password: ") if options["password"] else None
        user, created = services.user_ensure(username=options["username"], password=password)
        if password and not created:
            user.set_password(password)
            user.save(update_fields=["password"])
        for role in options["role"]:
            services.membership_grant(tenant=tenant, user=user, role=Role(role))
        roles = roles_for(user=user, tenant=tenant)
        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} {user.username} in {tenant.slug}: {', '.join(sorted(roles))}")
        if options["token"]:
            scope = Scope(
                tenant=tenant, actor=user, channel=Channel.SYSTEM, correlation_id=new_correlation_id(), roles=roles
            )
            issued = services.token_issue(scope=scope, name="provisioned", days=options["token_days"])
            self.stdout.write(f"token (shown once, store it now): {issued.plaintext}")
