"""The one table of runtime providers: each configured instance's heartbeat, shared by every process."""

from __future__ import annotations

from django.db import models


class ProviderHeartbeat(models.Model):
    """The latest periodic health check of one runtime provider instance (``providers_app.heartbeat``).

    Written by the heartbeat check (Celery beat with Redis, the embedded pump without); read by health, the
    pump (agent state) and sends, which treat an instance whose last successful check is older than
    ``TESS_HEARTBEAT_STALE_SECONDS`` as unavailable. ``beat_at`` is that last success (null: none yet).
    """

    instance = models.CharField(max_length=64, primary_key=True)
    kind = models.CharField(max_length=32, blank=True)
    ok = models.BooleanField(help_text="whether the latest check succeeded")
    first_checked_at = models.DateTimeField()
    checked_at = models.DateTimeField(help_text="the latest check")
    beat_at = models.DateTimeField(null=True, blank=True, help_text="the latest successful check")

    def __str__(self) -> str:
        return f"{self.instance} ({'up' if self.ok else 'down'})"
