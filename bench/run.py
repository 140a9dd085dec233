"""Performance figures, each a ratio against a baseline measured in the same run on the same machine.

``make bench`` runs every ``bench/b_*.py`` module's ``run()`` (or only those named in ``BENCH_ONLY``,
comma-separated, e.g. ``BENCH_ONLY=foundation``) against real PostgreSQL in a throwaway database, and
prints one table. Ratios, not seconds, are the figures to compare between runs and machines.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.test")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

import bench  # noqa: E402
from bench.common import ROUNDS, Row  # noqa: E402


def main() -> None:
    logging.disable(logging.WARNING)  # refused requests are part of some figures; keep the table readable
    setup_test_environment()
    call_command("migrate", verbosity=0)
    only = {name.strip() for name in os.environ.get("BENCH_ONLY", "").split(",") if name.strip()}
    rows: list[Row] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("b_")):
        if only and module.removeprefix("b_") not in only:
            continue
        rows.extend(importlib.import_module(f"bench.{module}").run())
    print(f"\nTess benchmarks on {connection.vendor} ({ROUNDS} rounds)\n")
    print(f"{'measured':<44} {'baseline':<42} {'baseline':>10} {'value':>10} {'ratio':>7}  target")
    for row in rows:
        print(
            f"{row.name:<44} {row.baseline_name:<42} {row.baseline:>8.1f}{row.unit:>2} {row.value:>8.1f}{row.unit:>2}"
            f" {row.ratio:>6.2f}x  {row.verdict}"
        )


if __name__ == "__main__":
    main()
