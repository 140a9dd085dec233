"""Health of every configured runtime provider instance, for ``/api/v1/health/``.

``tess_site`` may not import this app; the health view reaches it through a check registered at start-up
(see the README section on runtime providers). Nothing here reports a credential: providers put only
kinds, states, counts and times in their health detail.
"""

from __future__ import annotations

import logging
from typing import Any

from .contract import ProviderError
from .registry import configured_instances, get_provider

logger = logging.getLogger(__name__)


def provider_health_report() -> dict[str, Any]:
    """``{"ok": bool, "instances": {name: {"ok", "kind", "detail", "heartbeat_at"}}}``; never raises.

    ``ok`` is true when every configured instance is healthy (and when none is configured). A
    misconfigured instance is reported unhealthy with the error's code, not raised.
    """
    instances: dict[str, Any] = {}
    for name, config in sorted(configured_instances().items()):
        kind = str(config.get("kind", ""))
        try:
            health = get_provider(name).health()
        except ProviderError as exc:
            instances[name] = {"ok": False, "kind": kind, "detail": {"error": exc.code}, "heartbeat_at": None}
            continue
        except Exception as exc:  # a broken provider is a report, not a crash of the health page
            logger.warning("runtime provider %s: health failed with %s", name, type(exc).__name__)
            instances[name] = {"ok": False, "kind": kind, "detail": {"error": type(exc).__name__}, "heartbeat_at": None}
            continue
        instances[name] = {
            "ok": health.ok,
            "kind": health.kind,
            "detail": health.detail,
            "heartbeat_at": health.heartbeat_at.isoformat() if health.heartbeat_at else None,
        }
    return {"ok": all(entry["ok"] for entry in instances.values()), "instances": instances}
