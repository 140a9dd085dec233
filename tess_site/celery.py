"""The Celery app. Without ``REDIS_URL`` tasks run in-process (eager), so the embedded default needs no worker."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun

from .context import accept_correlation_id, reset_correlation_id, set_correlation_id
from .metrics import connect_celery_signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.dev")


class _CelerySettingsOnly:
    """Django's ``CELERY_*`` settings and nothing else.

    Celery keeps its whole configuration source in ``app.conf``, and a worker hands it to anyone on the
    broker who asks (``celery inspect conf``); Celery masks names like KEY and PASSWORD but not URLs with
    credentials in them (``REDIS_URL``, ``CACHES``). So the app is never shown the rest of the settings.
    """

    def __getattr__(self, name: str) -> object:
        if not name.startswith("CELERY_"):
            raise AttributeError(name)
        from django.conf import settings

        return getattr(settings, name)

    def __dir__(self) -> list[str]:
        from django.conf import settings

        return [name for name in dir(settings) if name.startswith("CELERY_")]


app = Celery("tess")
app.config_from_object(_CelerySettingsOnly(), namespace="CELERY")
app.autodiscover_tasks()
connect_celery_signals()  # tess_celery_tasks_total and the task duration histogram

# Not "correlation_id": Celery gives every message a correlation_id property of its own (the task id),
# and on the worker it would shadow a header of that name.
CORRELATION_HEADER = "tess_correlation_id"

_tokens: dict[str, object] = {}


@setup_logging.connect
def _keep_django_logging(**kwargs: object) -> None:
    """Leave logging to Django's ``LOGGING``: with no receiver here, a worker replaces the root handlers with
    its own, and its lines lose the correlation id and the credential redaction (``TESS_LOG_LEVEL`` and
    ``TESS_LOG_FORMAT`` apply to workers too; ``--loglevel`` does not)."""


@task_prerun.connect
def _bind_correlation_id(task_id: str | None = None, task: object = None, **kwargs: object) -> None:
    """Every log line of a task carries the correlation id it was queued with."""
    request = getattr(task, "request", None)
    # Custom headers arrive as request attributes (message protocol 2) or in request.headers (eager runs).
    headers = getattr(request, "headers", None)
    correlation_id = getattr(request, CORRELATION_HEADER, None) or (
        headers.get(CORRELATION_HEADER) if isinstance(headers, dict) else None
    )
    if task_id is not None:
        # Work queued outside any request carries "-": it gets an id of its own.
        _tokens[task_id] = set_correlation_id(accept_correlation_id(correlation_id))


@task_postrun.connect
def _unbind_correlation_id(task_id: str | None = None, **kwargs: object) -> None:
    token = _tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        reset_correlation_id(token)
