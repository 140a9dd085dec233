"""Provider heartbeats: the periodic health check of every instance, recorded, and what a stale one means.

``heartbeats_check`` asks every configured instance for its health and records the outcome
(``ProviderHeartbeat``); Celery beat runs it every ``TESS_PROVIDER_HEARTBEAT_SECONDS`` with Redis, and the
embedded pump does without. An instance whose last successful check is older than
``TESS_HEARTBEAT_STALE_SECONDS`` (or that has never passed one that long after its first) is *stale*: health
reports it unhealthy, the pump reads its sessions' agent state as ``unknown`` without asking it, and sends
to it fail fast with ``503 provider_unavailable`` naming the instance. An instance never checked is not
stale: nothing is claimed about it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .contract import ProviderUnavailable
from .models import ProviderHeartbeat


class ProviderHeartbeatStale(ProviderUnavailable):
    default_message = "The runtime provider instance has no recent heartbeat; nothing was sent."


def stale_after() -> timedelta:
    return timedelta(seconds=settings.TESS_HEARTBEAT_STALE_SECONDS)


def heartbeat_record(*, instance: str, kind: str, ok: bool, at: datetime | None = None) -> None:
    """Record one check of ``instance`` (``at``: when; now by default)."""
    now = at or timezone.now()
    with transaction.atomic():
        row, created = ProviderHeartbeat.objects.select_for_update().get_or_create(
            instance=instance,
            defaults={"kind": kind, "ok": ok, "first_checked_at": now, "checked_at": now},
        )
        if created and not ok:
            return
        row.kind, row.ok, row.checked_at = kind, ok, now
        if ok:
            row.beat_at = now
        row.save(update_fields=["kind", "ok", "checked_at", "beat_at"])


def _stale_since(row: ProviderHeartbeat, now: datetime) -> datetime | None:
    became = (row.beat_at or row.first_checked_at) + stale_after()
    return became if now >= became else None


def heartbeat_stale_since(instance: str, *, now: datetime | None = None) -> datetime | None:
    """When ``instance``'s heartbeat went stale, or None while it is fresh (or was never checked)."""
    row = ProviderHeartbeat.objects.filter(instance=instance).first()
    return None if row is None else _stale_since(row, now or timezone.now())


def heartbeat_require_fresh(instance: str) -> None:
    """Raise ``provider_unavailable`` (503) naming ``instance`` when its heartbeat is stale; call it before a
    send, so the sender learns at once rather than after the provider's own timeout."""
    row = ProviderHeartbeat.objects.filter(instance=instance).first()
    if row is None or _stale_since(row, timezone.now()) is None:
        return
    last = row.beat_at.isoformat() if row.beat_at else None
    raise ProviderHeartbeatStale(
        f"Runtime provider instance {instance} has had no successful heartbeat "
        + (f"since {row.beat_at:%Y-%m-%d %H:%M:%S} UTC" if row.beat_at else "since it was first checked")
        + "; nothing was sent. Retry once it is back.",
        details={
            "instance": instance,
            "heartbeat_at": last,
            "stale_after_seconds": settings.TESS_HEARTBEAT_STALE_SECONDS,
        },
    )


def heartbeat_report(names: list[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"last_at", "stale", "stale_after_seconds"}}`` of the recorded heartbeats of ``names``."""
    if not names:
        return {}
    now = timezone.now()
    rows = {row.instance: row for row in ProviderHeartbeat.objects.filter(instance__in=names)}
    report: dict[str, dict[str, Any]] = {}
    for name in names:
        row = rows.get(name)
        report[name] = {
            "last_at": row.beat_at.isoformat() if row is not None and row.beat_at else None,
            "checked": row is not None,
            "stale": row is not None and _stale_since(row, now) is not None,
            "stale_after_seconds": settings.TESS_HEARTBEAT_STALE_SECONDS,
        }
    return report


def heartbeats_apply(instances: dict[str, dict[str, Any]]) -> None:
    """Add each instance's recorded heartbeat to a health report's ``instances``: what the rest of Tess acts
    on, so a stale one is unhealthy whatever one look at it says now."""
    for name, recorded in heartbeat_report(sorted(instances)).items():
        instances[name]["heartbeat"] = recorded
        instances[name]["ok"] = instances[name]["ok"] and not recorded["stale"]
