"""Runtime bootstrap: start a command from ``TESS_BOOTSTRAP_COMMANDS`` in a new runtime session.

A requester picks a command by name, never by text; the command's configuration names the provider
instance it runs on. Runtime bootstrap is a per-instance capability: tmux instances offer ``start``
(a new detached tmux session running the configured argv, output copied from its first byte); a kind
that does not register the capability fails closed. Starting happens only after a human approved it;
sessions_app executes the approval, because the new runtime becomes a Tess session of the requester.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .capabilities import Operation
from .contract import AgentRuntimeProvider, RuntimeSession
from .registry import instances_for_tenant
from .tmux import TmuxProvider


class BootstrapCommandUnknown(NotFound):
    code = "bootstrap_command_unknown"
    default_message = "No configured bootstrap command has that name."


def configured_commands() -> dict[str, dict[str, Any]]:
    return dict(getattr(settings, "TESS_BOOTSTRAP_COMMANDS", {}) or {})


def commands_for_tenant(slug: str) -> list[str]:
    """Commands the tenant may start: its own (``tenants``) on provider instances it may use."""
    usable = set(instances_for_tenant(slug))
    return [
        name
        for name, config in sorted(configured_commands().items())
        if (config.get("tenants") is None or slug in config["tenants"]) and config["provider"] in usable
    ]


def bootstrap_command(scope: Scope, name: object) -> dict[str, Any]:
    """``{"name", "provider", "argv"}`` of command ``name`` for the scope's tenant; 404 otherwise."""
    key = str(name)
    config = configured_commands().get(key)
    if config is None or key not in commands_for_tenant(scope.tenant.slug):
        raise BootstrapCommandUnknown(details={"command": key[:64]})
    return {"name": key, "provider": config["provider"], "argv": list(config["argv"])}


def tmux_bootstrap(provider: AgentRuntimeProvider) -> Mapping[str, Operation]:
    """The runtime bootstrap operations of a tmux instance."""
    assert isinstance(provider, TmuxProvider)

    def start(scope: Scope, *, title: str, argv: list[str]) -> RuntimeSession:
        return provider.start_command(scope, title=title, argv=argv)

    return {"start": start}
