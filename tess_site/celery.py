"""The Celery app. Without ``REDIS_URL`` tasks run in-process (eager), so the embedded default needs no worker."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

from .context import new_correlation_id, reset_correlation_id, set_correlation_id

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.dev")

app = Celery("tess")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_tokens: dict[str, object] = {}


@task_prerun.connect
def _bind_correlation_id(task_id: str | None = None, task: object = None, **kwargs: object) -> None:
    """Every log line of a task carries the correlation id it was queued with."""
    request = getattr(task, "request", None)
    # Custom headers arrive as request attributes (message protocol 2) or in request.headers (eager runs).
    headers = getattr(request, "headers", None)
    correlation_id = getattr(request, "correlation_id", None) or (
        headers.get("correlation_id") if isinstance(headers, dict) else None
    )
    if task_id is not None:
        _tokens[task_id] = set_correlation_id(correlation_id or new_correlation_id())


@task_postrun.connect
def _unbind_correlation_id(task_id: str | None = None, **kwargs: object) -> None:
    token = _tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        reset_correlation_id(token)
