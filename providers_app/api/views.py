"""The capability inventory: every runtime provider instance your tenant may use, what it supports, and
whether it is alive (the drawer's session picker shows this beside each session)."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView

from ..contract import ProviderError
from ..heartbeat import heartbeat_report
from ..registry import configured_instances, get_provider, instances_for_tenant

# Health asks the runtime (a tmux call, an HTTP round trip); the picker polls, so answers are reused briefly.
HEALTH_CACHE_SECONDS = 5


def _instance(name: str) -> dict[str, Any]:
    kind = str(configured_instances()[name].get("kind", ""))
    cached: dict[str, Any] | None = cache.get(f"tess:provider-inventory:{name}")
    if cached is not None:
        return cached
    try:
        provider = get_provider(name)
        capabilities = provider.capabilities()
        health = provider.health()
        entry = {
            "name": name,
            "kind": kind,
            "operations": sorted(op.value for op in capabilities.operations),
            "attach_modes": sorted(mode.value for mode in capabilities.attach_modes),
            "checkpoints": capabilities.checkpoints,
            "health": {
                "ok": health.ok,
                "heartbeat_at": health.heartbeat_at.isoformat() if health.heartbeat_at else None,
            },
        }
    except ProviderError as exc:
        entry = {
            "name": name,
            "kind": kind,
            "operations": [],
            "attach_modes": [],
            "checkpoints": False,
            "health": {"ok": False, "heartbeat_at": None, "error": exc.code},
        }
    cache.set(f"tess:provider-inventory:{name}", entry, HEALTH_CACHE_SECONDS)
    return entry


class ProviderInventoryView(ScopedAPIView):
    """Runtime provider instances available to your tenant: kind, supported operations, health."""

    @extend_schema(
        responses=inline_serializer(
            name="ProviderInventory",
            fields={
                "results": inline_serializer(
                    name="ProviderInstance",
                    fields={
                        "name": serializers.CharField(),
                        "kind": serializers.CharField(),
                        "operations": serializers.ListField(child=serializers.CharField()),
                        "attach_modes": serializers.ListField(child=serializers.CharField()),
                        "checkpoints": serializers.BooleanField(
                            help_text="whether its stream marks where the runtime compacted its context"
                        ),
                        "health": serializers.DictField(),
                    },
                    many=True,
                )
            },
        )
    )
    def get(self, request: Request) -> Response:
        names = instances_for_tenant(self.scope.tenant.slug)
        beats = heartbeat_report(names)
        results = []
        for name in names:
            entry = _instance(name)
            # The recorded heartbeat is read fresh (never cached): a stale one is down whatever one look said.
            stale = beats[name]["stale"]
            results.append(
                {**entry, "health": {**entry["health"], "ok": entry["health"]["ok"] and not stale, "stale": stale}}
            )
        return Response({"results": results})
