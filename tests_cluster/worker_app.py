"""What ``celery -A tests_cluster.worker_app worker`` runs: the product's Celery app, for a cluster worker.

One test-only addition: while the file named by ``TESS_TEST_SEND_HOLD`` exists, the tmux provider's
``send_message`` writes this worker's pid to ``<hold>.entered`` and waits before typing anything, so a test
can kill exactly the worker that holds the lease, in the middle of a send.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests_cluster.settings")

import django

django.setup()

from providers_app.registry import register_runtime_provider  # noqa: E402
from providers_app.tmux import TmuxProvider  # noqa: E402
from tess_site.celery import app  # noqa: E402

app.conf.task_always_eager = False


class HeldTmuxProvider(TmuxProvider):
    def send_message(self, ref: Any, message: str, idempotency_key: str, scope: Any) -> Any:
        hold = Path(os.environ.get("TESS_TEST_SEND_HOLD", "/nonexistent/hold"))
        if hold.exists():
            Path(f"{hold}.entered").write_text(str(os.getpid()))
            while hold.exists():
                time.sleep(0.1)
        return super().send_message(ref, message, idempotency_key, scope)


register_runtime_provider("tmux", HeldTmuxProvider)

__all__ = ["app"]
