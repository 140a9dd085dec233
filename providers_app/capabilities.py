"""Capability descriptors (seed 000, TESS-PLG-001): what Tess can do beyond the runtime contract, and where.

A capability is named (``CapabilityName``) and advertises the operations it supports. Some are Tess-wide
(fleet diagnostics, the durable inbox/state hooks, GitOps, MCP discovery, the Discord integration, Mos
coordination); runtime bootstrap belongs to a provider instance (a tmux instance can start a configured
command; a pi instance cannot). Whoever implements an operation registers it at start-up
(``AppConfig.ready``): a lower app never imports the higher one that owns the tables an operation reads.

Asking for a capability nobody registered, or an operation it does not advertise, raises
``CapabilityUnsupported`` (501): nothing is emulated (seed 001, "fail closed").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .contract import AgentRuntimeProvider, CapabilityUnsupported, RuntimeNotFound
from .registry import configured_instances, get_provider


class CapabilityName(StrEnum):
    RUNTIME_BOOTSTRAP = "runtime_bootstrap"
    DURABLE_INBOX_STATE = "durable_inbox_state"
    FLEET_DIAGNOSTICS = "fleet_diagnostics"
    GITOPS = "gitops"
    MCP_DISCOVERY = "mcp_discovery"
    DISCORD_INTEGRATION = "discord_integration"
    MOS_COORDINATION = "mos_coordination"


# Every operation a capability may advertise, and whether it only reads. A descriptor advertising anything
# else is a programming error, caught at registration; fleet diagnostics is read-only by definition.
OPERATIONS: dict[CapabilityName, dict[str, bool]] = {
    CapabilityName.RUNTIME_BOOTSTRAP: {"start": False},
    CapabilityName.DURABLE_INBOX_STATE: {
        "enqueue": False,
        "claim": False,
        "checkpoint": True,
        "checkpoint_write": False,
        "depth": True,
    },
    CapabilityName.FLEET_DIAGNOSTICS: {"provider_health": True, "queue_depth": True, "session_counts": True},
    CapabilityName.GITOPS: {
        "repos": True,
        "status": True,
        "log": True,
        "branches": True,
        "create_branch": False,
        "create_tag": False,
    },
    CapabilityName.MCP_DISCOVERY: {"servers": True, "discover": True},
    CapabilityName.DISCORD_INTEGRATION: {"status": True},
    CapabilityName.MOS_COORDINATION: {"handoff": False},
}

Operation = Callable[..., Any]
# Builds an instance's operations of one capability from the provider (None or {}: it has none).
InstanceCapabilityFactory = Callable[[AgentRuntimeProvider], Mapping[str, Operation] | None]


@dataclass(frozen=True)
class CapabilityDescriptor:
    """One capability as it is available here: its operations and, for a per-instance one, the instance."""

    name: CapabilityName
    operations: Mapping[str, Operation] = field(default_factory=dict)
    instance: str = ""  # "" for a Tess-wide capability

    def __post_init__(self) -> None:
        known = OPERATIONS[self.name]
        unknown = sorted(set(self.operations) - set(known))
        if unknown:
            raise ValueError(f"{self.name} does not define the operations {unknown}")

    @property
    def supported(self) -> frozenset[str]:
        return frozenset(self.operations)

    @property
    def read_only(self) -> bool:
        """True when every operation it advertises only reads."""
        return all(OPERATIONS[self.name][op] for op in self.operations)

    def supports(self, operation: str) -> bool:
        return operation in self.operations

    def operation(self, operation: str) -> Operation:
        """The implementation of ``operation``; ``CapabilityUnsupported`` if this capability lacks it."""
        implementation = self.operations.get(operation)
        if implementation is None:
            where = f" on provider instance {self.instance!r}" if self.instance else ""
            raise CapabilityUnsupported(
                f"The capability {self.name}{where} does not support {operation!r}.",
                details={"capability": str(self.name), "operation": operation, "instance": self.instance or None},
            )
        return implementation

    def describe(self) -> dict[str, Any]:
        return {
            "name": str(self.name),
            "instance": self.instance or None,
            "operations": sorted(self.operations),
            "read_only": self.read_only,
        }


Condition = Callable[[], bool]

_global: dict[CapabilityName, dict[str, tuple[Operation, Condition | None]]] = {}
_per_kind: dict[tuple[str, CapabilityName], InstanceCapabilityFactory] = {}
_lock = threading.Lock()


def register_capability_operation(
    name: CapabilityName, operation: str, implementation: Operation, *, when: Condition | None = None
) -> None:
    """Offer ``operation`` of the Tess-wide capability ``name``. Called from an app's ``ready()``.

    ``when``, if given, is asked at every lookup: while it is false the operation is absent (GitOps without
    configured repositories, MCP discovery without configured servers). Several apps may contribute
    operations to one capability (fleet diagnostics reads tables of more than one app); registering an
    operation again replaces it.
    """
    if operation not in OPERATIONS[name]:
        raise ValueError(f"{name} does not define the operation {operation!r}")
    with _lock:
        _global.setdefault(name, {})[operation] = (implementation, when)


def unregister_capability_operation(name: CapabilityName, operation: str) -> None:
    """Withdraw an operation (tests of absence; a deployment never needs it)."""
    with _lock:
        _global.get(name, {}).pop(operation, None)


def register_instance_capability(kind: str, name: CapabilityName, factory: InstanceCapabilityFactory) -> None:
    """Per provider kind: ``factory(provider)`` gives a configured instance's operations of ``name``."""
    with _lock:
        _per_kind[(kind, name)] = factory


def capability(name: CapabilityName | str, *, instance: str | None = None) -> CapabilityDescriptor:
    """The descriptor of ``name`` (Tess-wide, or of provider ``instance``); fails closed when absent."""
    try:
        key = CapabilityName(name)
    except ValueError:
        raise CapabilityUnsupported(
            f"There is no capability named {name!r}.", details={"capability": str(name)}
        ) from None
    descriptor = _instance_descriptor(key, instance) if instance is not None else _global_descriptor(key)
    if descriptor is None or not descriptor.operations:
        where = f" on provider instance {instance!r}" if instance is not None else ""
        raise CapabilityUnsupported(
            f"The capability {key}{where} is not available.",
            details={"capability": str(key), "instance": instance},
        )
    return descriptor


def _global_descriptor(name: CapabilityName) -> CapabilityDescriptor | None:
    with _lock:
        registered = dict(_global.get(name, {}))
    operations = {op: impl for op, (impl, when) in registered.items() if when is None or when()}
    return CapabilityDescriptor(name=name, operations=operations) if operations else None


def _instance_descriptor(name: CapabilityName, instance: str) -> CapabilityDescriptor | None:
    kind = str(configured_instances().get(instance, {}).get("kind", ""))
    with _lock:
        factory = _per_kind.get((kind, name))
    if factory is None:
        return None
    try:
        provider = get_provider(instance)
    except RuntimeNotFound:
        return None
    operations = factory(provider) or {}
    return CapabilityDescriptor(name=name, operations=dict(operations), instance=instance) if operations else None


def available_capabilities(*, instances: list[str]) -> list[CapabilityDescriptor]:
    """Every capability available: the Tess-wide ones, then those of each named provider instance."""
    found = [d for d in (_global_descriptor(name) for name in CapabilityName) if d is not None]
    for instance in instances:
        for name in CapabilityName:
            descriptor = _instance_descriptor(name, instance)
            if descriptor is not None:
                found.append(descriptor)
    return found
