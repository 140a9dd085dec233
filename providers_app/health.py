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
from tess_site.scope import Scope

from .contract import ProviderError
from .heartbeat import heartbeat_record, heartbeats_apply
from .registry import configured_instances, get_provider, instances_for_tenant

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


def provider_health_report(names: list[str] | None = None) -> dict[str, Any]:
    """``{"ok": bool, "instances": {name: {"ok", "kind", "detail", "heartbeat_at"}}}``; never raises.

    Covers ``names``, or every configured instance. ``ok`` is true when every one of them is healthy (and when
    there are none).
    """
    chosen = sorted(configured_instances()) if names is None else sorted(names)
    instances = {name: instance_health(name) for name in chosen}
    for name, entry in instances.items():
        beat = datetime.fromisoformat(entry["heartbeat_at"]) if entry["heartbeat_at"] else None
        record_provider_health(instance=name, kind=entry["kind"], ok=entry["ok"], heartbeat_at=beat)
    heartbeats_apply(instances)
    return {"ok": all(entry["ok"] for entry in instances.values()), "instances": instances}


def _member_detail(detail: dict[str, Any]) -> dict[str, Any]:
    """A provider's health detail without what only the installation's operator should see: paths, addresses,
    user ids and process ids. States (booleans), counts and the error code remain."""
    return {
        key: value
        for key, value in detail.items()
        if key == "error" or isinstance(value, bool) or (isinstance(value, int) and "pid" not in key)
    }


def provider_health_for(scope: Scope) -> dict[str, Any]:
    """The provider health a member of ``scope``'s tenant sees: the instances their tenant may use, with
    ``_member_detail``. A superuser sees every instance in full, as ``/metrics`` does."""
    if scope.actor is not None and scope.actor.is_superuser:
        return provider_health_report()
    report = provider_health_report(instances_for_tenant(scope.tenant.slug))
    for entry in report["instances"].values():
        entry["detail"] = _member_detail(entry["detail"])
    return report


def heartbeats_check() -> int:
    """Ask every configured instance for its health and record each outcome as its heartbeat
    (``ProviderHeartbeat``; the ``tess_provider_up`` and ``tess_provider_heartbeat_timestamp_seconds``
    gauges too). Returns how many answered healthy."""
    names = sorted(configured_instances())
    looks = {name: instance_health(name) for name in names}
    for name, entry in looks.items():
        beat = datetime.fromisoformat(entry["heartbeat_at"]) if entry["heartbeat_at"] else None
        record_provider_health(instance=name, kind=entry["kind"], ok=entry["ok"], heartbeat_at=beat)
        heartbeat_record(instance=name, kind=entry["kind"], ok=entry["ok"])
    return sum(1 for entry in looks.values() if entry["ok"])


@shared_task(name="providers_app.health.check_provider_heartbeats", ignore_result=True)
def check_provider_heartbeats() -> int:
    """Periodic (Celery beat every ``TESS_PROVIDER_HEARTBEAT_SECONDS``; the embedded pump runs
    ``heartbeats_check`` itself): every instance's heartbeat. Returns how many are up."""
    return heartbeats_check()
