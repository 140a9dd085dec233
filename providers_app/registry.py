"""Runtime providers by kind, and their configured, named instances.

``register_runtime_provider(kind, factory)`` is called at start-up (``AppConfig.ready``) by whoever
implements a kind. Instances come from settings ``TESS_RUNTIME_PROVIDERS`` (name → config with a
``kind``); two instances of one kind with different names live side by side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from .contract import AgentRuntimeProvider, RuntimeNotFound

ProviderFactory = Callable[..., AgentRuntimeProvider]  # factory(name=..., config=...)

_factories: dict[str, ProviderFactory] = {}
_instances: dict[str, AgentRuntimeProvider] = {}
_lock = threading.Lock()


def register_runtime_provider(kind: str, factory: ProviderFactory) -> None:
    _factories[kind] = factory


def registered_kinds() -> list[str]:
    return sorted(_factories)


def configured_instances() -> dict[str, dict[str, Any]]:
    return dict(getattr(settings, "TESS_RUNTIME_PROVIDERS", {}) or {})


def instances_for_tenant(slug: str) -> list[str]:
    """Names of the instances a tenant may use: an instance with ``tenants`` in its config is limited to them."""
    return [
        name
        for name, config in sorted(configured_instances().items())
        if config.get("tenants") is None or slug in config["tenants"]
    ]


def get_provider(name: str) -> AgentRuntimeProvider:
    """The configured instance ``name``; ``RuntimeNotFound`` for an unknown name (never a default)."""
    with _lock:
        provider = _instances.get(name)
        if provider is not None:
            return provider
        config = configured_instances().get(name)
        if config is None:
            raise RuntimeNotFound(f"No runtime provider instance named {name!r}.")
        factory = _factories.get(config.get("kind", ""))
        if factory is None:
            raise RuntimeNotFound(f"Provider instance {name!r} has unknown kind {config.get('kind')!r}.")
        provider = factory(name=name, config=config)
        _instances[name] = provider
        return provider


def all_providers() -> list[AgentRuntimeProvider]:
    return [get_provider(name) for name in sorted(configured_instances())]


def reset_instances() -> None:
    """Forget built instances (tests that change TESS_RUNTIME_PROVIDERS call this)."""
    with _lock:
        _instances.clear()
