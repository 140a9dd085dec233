"""Adapter kinds, the configured plugin, and capture observers.

``register_operator_memory_adapter(kind, factory)`` is called at start-up for each kind (``orm`` and
``plastmem`` in ``MemoryConfig.ready``). ``create_operator_memory_plugin(config)`` builds a plugin from one
named instance's config (``{"name", "kind", ...kind options, "startup", "project_files"}``);
``operator_memory_plugin()`` is the instance ``TESS_MEMORY_PLUGIN`` makes active. Callers get a plugin and
pass it their Scope: they never pick an adapter or a namespace.

``register_capture_observer(fn)`` lets a higher app (sessions_app: "every capture appears as a system
event in the session stream") hear of each capture after commit, as ``fn(scope, record)``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from tess_site.errors import InvalidInput
from tess_site.scope import Scope

from .contract import MemoryRecord, OperatorMemoryAdapter

logger = logging.getLogger(__name__)

AdapterFactory = Callable[..., OperatorMemoryAdapter]  # factory(name=..., config=...)
CaptureObserver = Callable[[Scope, MemoryRecord], None]

_factories: dict[str, AdapterFactory] = {}
_observers: list[CaptureObserver] = []
_plugins: dict[str, Any] = {}
_lock = threading.Lock()


class UnknownAdapterKind(InvalidInput):
    code = "memory_adapter_unknown"
    default_message = "The configured operational memory adapter kind is not registered."


def register_operator_memory_adapter(kind: str, factory: AdapterFactory) -> None:
    _factories[kind] = factory


def registered_adapter_kinds() -> list[str]:
    return sorted(_factories)


def create_operator_memory_plugin(config: dict[str, Any]) -> Any:
    """A plugin over a fresh adapter for one named instance's config; ``UnknownAdapterKind`` if unregistered."""
    from .plugin import OperatorMemoryPlugin

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


def operator_memory_plugin() -> Any:
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


def register_capture_observer(observer: CaptureObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def unregister_capture_observer(observer: CaptureObserver) -> None:
    if observer in _observers:
        _observers.remove(observer)


def notify_capture_on_commit(scope: Scope, record: MemoryRecord) -> None:
    """Tell every observer of ``record`` once the current transaction commits (at once outside one)."""

    def notify() -> None:
        for observer in list(_observers):
            try:
                observer(scope, record)
            except Exception:
                # An observer's failure must not undo or fail a capture that already committed.
                logger.exception("capture observer %r failed", observer)

    transaction.on_commit(notify)
