"""Health of every configured runtime provider instance, for ``/api/v1/health/``.

``tess_site`` may not import this app; the health view reaches it through a check registered at start-up
(see the README section on runtime providers). Nothing here reports a credential: providers put only
kinds, states, counts and times in their health detail.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from celery import shared_task

from tess_site.metrics import record_provider_health

from .contract import ProviderError
from .registry import configured_instances, get_provider

logger = logging.getLogger(__name__)


def instance_health(name: str) -> dict[str, Any]:
    """``{"ok", "kind", "detail", "heartbeat_at"}`` of one configured instance; never raises.

    A misconfigured or broken instance is reported unhealthy with the error's code, not raised.
    """
    kind = str(configured_instances().get(name, {}).get("kind", ""))
    try:
        health = get_provider(name).health()
    except ProviderError as exc:
        return {"ok": False, "kind": kind, "detail": {"error": exc.code}, "heartbeat_at": None}
    except Exception as exc:  # a broken provider is a report, not a crash of the health page
        logger.warning("runtime provider %s: health failed with %s", name, type(exc).__name__)
        return {"ok": False, "kind": kind, "detail": {"error": type(exc).__name__}, "heartbeat_at": None}
    return {
        "ok": health.ok,
        "kind": health.kind,
        "detail": health.detail,
        "heartbeat_at": health.heartbeat_at.isoformat() if health.heartbeat_at else None,
    }


def provider_health_report() -> dict[str, Any]:
    """``{"ok": bool, "instances": {name: {"ok", "kind", "detail", "heartbeat_at"}}}``; never raises.

    ``ok`` is true when every configured instance is healthy (and when none is configured).
    """
    instances = {name: instance_health(name) for name in sorted(configured_instances())}
    for name, entry in instances.items():
        beat = datetime.fromisoformat(entry["heartbeat_at"]) if entry["heartbeat_at"] else None
        record_provider_health(instance=name, kind=entry["kind"], ok=entry["ok"], heartbeat_at=beat)
    return {"ok": all(entry["ok"] for entry in instances.values()), "instances": instances}


@shared_task(name="providers_app.health.check_provider_heartbeats", ignore_result=True)
def check_provider_heartbeats() -> int:
    """Periodic (Celery beat, ``TESS_PROVIDER_HEARTBEAT_SECONDS``): ask every instance for its health, which
    records ``tess_provider_up`` and ``tess_provider_heartbeat_timestamp_seconds``. Returns how many are up."""
    report = provider_health_report()
    return sum(1 for entry in report["instances"].values() if entry["ok"])
