"""What ``celery -A tests.tess_site.worker_app worker`` runs: the product's Celery app, for a real worker.

Two test-only additions: tasks are not run eagerly (this process *is* the worker), and the test table of
leased work (``Chore``) is registered, so the product's sweeper task has something observable to sweep.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.test")

import django

django.setup()

from tess_site.celery import app  # noqa: E402
from tess_site.leases import register_leased_work  # noqa: E402
from tests.testapp.models import Chore  # noqa: E402

logger = logging.getLogger(__name__)

app.conf.task_always_eager = False


def _wake_chore(pk: object) -> None:
    logger.info("chore %s is pending again", pk)


register_leased_work(Chore, _wake_chore)

__all__ = ["app"]
