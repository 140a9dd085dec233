"""What the base connects at start-up that belongs to no app (called from ``TessSiteConfig.ready``)."""

from __future__ import annotations

from django.core.signals import request_finished

from .context import clear_correlation_id


def connect() -> None:
    request_finished.connect(clear_correlation_id, dispatch_uid="tess-clear-correlation-id")
