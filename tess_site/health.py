"""Health: ``/healthz`` for liveness, ``/api/v1/health/`` for an authenticated look at every dependency.

Nothing here ever prints a URL, password or key: dependencies are reported by kind and state only,
and the model is reported by adapter name, model name, reasoning level and tool policy.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from .accounts.api_base import ScopedAPIView
from .scope import Scope
from .tool_policy import tool_policy_report

CHECK_TIMEOUT_SECONDS = 2.0


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness only: the process answers. No authentication, no dependency checks."""
    return JsonResponse({"status": "ok"})


HealthCheck = Callable[[Scope], dict[str, Any]]
_registered_checks: dict[str, HealthCheck] = {}


def register_health_check(name: str, check: HealthCheck) -> None:
    """Called from ``AppConfig.ready()`` by apps with dependencies of their own (runtime providers).

    A check is given the caller's Scope and reports only what that caller may see (never credentials; for a
    tenant member, nothing of other tenants); it may set ``ok`` itself, and raises when it cannot tell.
    """
    _registered_checks[name] = check


def _timed(check: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = check()
        result: dict[str, Any] = {"ok": True, **(detail or {})}
    except Exception as exc:  # a failing dependency is a report, not a crash
        result = {"ok": False, "error": type(exc).__name__}
    result["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


def check_database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"vendor": connection.vendor}


def check_redis() -> dict[str, Any]:
    if not settings.REDIS_URL:
        return {"mode": "not configured (embedded)"}
    import redis

    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=CHECK_TIMEOUT_SECONDS, socket_connect_timeout=CHECK_TIMEOUT_SECONDS
    )
    try:
        client.ping()
    finally:
        client.close()
    return {"mode": "redis"}


def check_channel_layer() -> dict[str, Any]:
    """Send a message to a private channel and read it back."""
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer")

    async def round_trip() -> None:
        channel = await layer.new_channel("health.")
        nonce = uuid.uuid4().hex
        await layer.send(channel, {"type": "health.ping", "nonce": nonce})
        message = await layer.receive(channel)
        if message.get("nonce") != nonce:
            raise RuntimeError("channel layer returned another message")

    async def bounded() -> None:
        # The whole round trip, not only the receive: a send to a Redis that never answers waits too.
        await asyncio.wait_for(round_trip(), CHECK_TIMEOUT_SECONDS)

    async_to_sync(bounded)()
    return {"backend": type(layer).__name__}


def check_celery() -> dict[str, Any]:
    from .celery import app

    if app.conf.task_always_eager:
        return {"mode": "in-process"}
    # A connection of its own with every step bounded: through the shared pool, a broker that accepts
    # connections but never answers (a wedged Redis, a half-open route) would hang the report for good.
    bounded = {"socket_timeout": CHECK_TIMEOUT_SECONDS, "socket_connect_timeout": CHECK_TIMEOUT_SECONDS}
    with app.connection_for_write(connect_timeout=CHECK_TIMEOUT_SECONDS, transport_options=bounded) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=int(CHECK_TIMEOUT_SECONDS))
        replies = app.control.ping(timeout=CHECK_TIMEOUT_SECONDS, connection=conn)
    if not replies:
        raise RuntimeError("no worker answered")
    return {"mode": "workers", "workers": len(replies)}


NO_MODEL_NOTICE = (
    "No model is configured: replies are composed by the deterministic adapter "
    "(TESS_MODEL_ADAPTER=deterministic), without a language model."
)


def model_report() -> dict[str, Any]:
    """The effective model. The deterministic adapter is no model, and the report says so in plain words
    (seed 001: production runs without a model only when that was chosen explicitly, never silently)."""
    configured = settings.TESS_MODEL_ADAPTER != "deterministic"
    return {
        "adapter": settings.TESS_MODEL_ADAPTER,
        "model": settings.TESS_MODEL if configured else None,
        "model_configured": configured,
        "notice": "" if configured else NO_MODEL_NOTICE,
        "reasoning_level": settings.TESS_REASONING_LEVEL,
        "tool_policy": settings.TESS_TOOL_POLICY,
        # What the catalog and the gateway enforce: the authorities a tool may need under this policy.
        "tool_policy_enforced": tool_policy_report(),
        "credentials_configured": bool(settings.TESS_MODEL_API_KEY),
    }


class HealthView(ScopedAPIView):
    """Authenticated health: every dependency, and the effective model and policy."""

    @extend_schema(
        responses={
            200: OpenApiResponse(description="all healthy"),
            503: OpenApiResponse(description="a dependency is down"),
        }
    )
    def get(self, request: Request) -> Response:
        checks = {
            "database": _timed(check_database),
            "redis": _timed(check_redis),
            "channel_layer": _timed(check_channel_layer),
            "celery": _timed(check_celery),
            **{name: _timed(partial(check, self.scope)) for name, check in sorted(_registered_checks.items())},
        }
        healthy = all(check["ok"] for check in checks.values())
        body = {"status": "ok" if healthy else "degraded", "checks": checks, "model": model_report()}
        return Response(body, status=200 if healthy else 503)
