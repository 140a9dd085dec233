"""Adapter kinds and the configured plugin.

``register_operator_memory_adapter(kind, factory)`` is called at start-up for each kind (``orm`` and
``plastmem`` in ``MemoryConfig.ready``). ``create_operator_memory_plugin(config)`` builds a plugin from one
named instance's config (``{"name", "kind", ...kind options, "startup", "project_files"}``);
``operator_memory_plugin()`` is the instance ``TESS_MEMORY_PLUGIN`` makes active. Callers get a plugin and
pass it their Scope: they never pick an adapter or a namespace. Capture observers are in ``observers``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from tess_site.errors import InvalidInput

from .contract import OperatorMemoryAdapter
from .plugin import OperatorMemoryPlugin

logger = logging.getLogger(__name__)

AdapterFactory = Callable[..., OperatorMemoryAdapter]  # factory(name=..., config=...)

_factories: dict[str, AdapterFactory] = {}
_plugins: dict[str, OperatorMemoryPlugin] = {}
_lock = threading.Lock()


class UnknownAdapterKind(InvalidInput):
    code = "memory_adapter_unknown"
    default_message = "The configured operational memory adapter kind is not registered."


def register_operator_memory_adapter(kind: str, factory: AdapterFactory) -> None:
    _factories[kind] = factory


def registered_adapter_kinds() -> list[str]:
    return sorted(_factories)


def create_operator_memory_plugin(config: dict[str, Any]) -> OperatorMemoryPlugin:
    """A plugin over a fresh adapter for one named instance's config; ``UnknownAdapterKind`` if unregistered."""
    name = str(config.get("name") or "")
    kind = str(config.get("kind") or "")
    if not name:
        raise InvalidInput("An operational memory instance needs a name.")
    factory = _factories.get(kind)
    if factory is None:
        raise UnknownAdapterKind(details={"kind": kind, "registered": registered_adapter_kinds()})
    return OperatorMemoryPlugin(adapter=factory(name=name, config=config), config=config)


def plugin_settings() -> dict[str, Any]:
    return dict(getattr(settings, "TESS_MEMORY_PLUGIN", {}) or {})


def operator_memory_plugin() -> OperatorMemoryPlugin:
    """The active configured instance (``TESS_MEMORY_PLUGIN["active"]``), built once per process."""
    conf = plugin_settings()
    active = str(conf.get("active") or "default")
    instances: dict[str, dict[str, Any]] = conf.get("instances") or {"default": {"kind": "orm"}}
    with _lock:
        plugin = _plugins.get(active)
        if plugin is None:
            if active not in instances:
                raise UnknownAdapterKind(f"No operational memory instance named {active!r} is configured.")
            plugin = create_operator_memory_plugin({**instances[active], "name": active})
            _plugins[active] = plugin
        return plugin


def reset_plugins() -> None:
    """Forget built plugins (tests that change TESS_MEMORY_PLUGIN call this)."""
    with _lock:
        _plugins.clear()
