"""manage.py tess_preflight [--wait SECONDS]: check that the database, Redis and the metrics directory answer.

Exit status 0 when everything answers; otherwise 1, after printing one line per dependency, so a systemd
``ExecStartPre`` refuses to start the unit and the journal names what is missing.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tess_site.preflight import Outcome, run_checks

RETRY_SECONDS = 2.0


class Command(BaseCommand):
    help = "Check that the database (migrated), Redis and the metrics directory answer; exit 1 naming what does not."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--wait", type=float, default=0.0, help="keep trying this many seconds (a database still starting)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        deadline = time.monotonic() + max(0.0, options["wait"])
        while True:
            outcomes = run_checks()
            failed = [outcome for outcome in outcomes if not outcome.ok]
            if not failed or time.monotonic() + RETRY_SECONDS > deadline:
                break
            self.stderr.write("preflight: waiting for " + ", ".join(outcome.name for outcome in failed))
            time.sleep(RETRY_SECONDS)
        for outcome in outcomes:
            self.stdout.write(_line(outcome))
        if failed:
            raise CommandError("Tess cannot start; missing: " + ", ".join(outcome.name for outcome in failed))


def _line(outcome: Outcome) -> str:
    return f"{'ok' if outcome.ok else 'MISSING':<8} {outcome.name}: {outcome.detail}"
