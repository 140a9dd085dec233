"""manage.py tess_memory_erase --username U: operator-subject erasure of every note, in every tenant."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_app.services import memory_erase_operator
from tess_site.errors import TessError


class Command(BaseCommand):
    help = (
        "Erase an operator's memory (current and superseded rows, every tenant; the stream turns and summaries "
        "carrying it redacted) and print the exact counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user {options['username']!r}")
        try:
            counts = memory_erase_operator(user=user, correlation_id=f"erase-{uuid.uuid4().hex}")
        except TessError as exc:
            raise CommandError(exc.message) from exc
        for tenant, outcome in counts.items():
            self.stdout.write(f"{tenant}\t{outcome.deleted_count}\t{outcome.redacted_count}")
        self.stdout.write(f"deleted {sum(o.deleted_count for o in counts.values())} rows")
        self.stdout.write(f"redacted {sum(o.redacted_count for o in counts.values())} stream items and summaries")
