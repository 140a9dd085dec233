"""manage.py tess_demo [--reset-passwords]: the demo tenant and its operator, approver and auditor.

Idempotent: run it any number of times. Generated passwords are printed only when an account is
created (or with --reset-passwords), because only their hashes are kept.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from tess_site.accounts import services
from tess_site.accounts.models import Tenant
from tess_site.scope import Role

DEMO_TENANT = "demo"
DEMO_MAIL_DOMAIN = "demo.tess.invalid"  # reserved: mail to it can never reach anyone
DEMO_USERS = [("operator", Role.OPERATOR), ("approver", Role.APPROVER), ("auditor", Role.AUDITOR)]


class Command(BaseCommand):
    help = "Create the demo tenant and accounts (idempotent); print generated passwords once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reset-passwords", action="store_true", help="set and print new passwords")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=DEMO_TENANT).first() or services.tenant_create(
            slug=DEMO_TENANT, name="Demo"
        )
        lines = []
        for username, role in DEMO_USERS:
            user, created = services.user_ensure(username=username)
            services.membership_grant(tenant=tenant, user=user, role=role)
            if not user.email:
                # Approval links go by e-mail; the console backend of ``make run`` prints them.
                user.email = f"{username}@{DEMO_MAIL_DOMAIN}"
                user.save(update_fields=["email"])
            if created or options["reset_passwords"]:
                password = secrets.token_urlsafe(12)
                user.set_password(password)
                user.save(update_fields=["password"])
                lines.append(f"  {username:<9} {password:<18} ({role.value})")
            else:
                lines.append(f"  {username:<9} {'(unchanged)':<18} ({role.value})")
        self.stdout.write(f"Demo tenant '{tenant.slug}' — sign in at /admin/ with:")
        self.stdout.write("\n".join(lines))
        if any("(unchanged)" in line for line in lines):
            self.stdout.write("Forgot a password? manage.py tess_demo --reset-passwords")
