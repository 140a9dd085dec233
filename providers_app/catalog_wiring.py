"""What providers_app offers the catalog, registered at start-up (``ProvidersConfig.ready``).

- GitOps reads and (approval-gated) writes, present while ``TESS_GITOPS_REPOS`` names a repository; what
  runs a write once approved is registered in ``wiring.py``.
- Fleet diagnostics: provider health and queue depth (sessions_app adds session counts).
- Runtime bootstrap on tmux instances (sessions_app executes it: the runtime becomes a Tess session).
- MCP discovery, present while ``TESS_MCP_SERVERS`` names a server.
- Mos coordination: a hand-off, for catalog tools whose authority is Mos.
"""

from __future__ import annotations

from typing import Any

from approvals_app.handoffs import handoff_create
from tess_site.scope import Scope

from . import diagnostics, gitops, mcp_discovery
from .bootstrap import tmux_bootstrap
from .capabilities import (
    CapabilityName,
    Operation,
    register_capability_operation,
    register_instance_capability,
)
from .tmux import TmuxProvider


def _has_repos() -> bool:
    return bool(gitops.configured_repos())


def _has_mcp_servers() -> bool:
    return bool(mcp_discovery.configured_servers())


def mos_handoff(scope: Scope, *, session_id: str | None, summary: str, payload: dict[str, Any]) -> dict[str, Any]:
    handoff = handoff_create(scope, session_id=session_id, summary=summary, payload=payload)
    return {"id": str(handoff.pk), "status": str(handoff.status), "adapter": handoff.adapter or "none"}


def _create_ref(scope: Scope, *, repo: str, full_ref: str, commit: str, reason: str) -> dict[str, Any]:
    return gitops.create_ref(scope, repo=repo, full_ref=full_ref, commit=commit, reason=reason)


def register_catalog_capabilities() -> None:
    gitops_ops: dict[str, Operation] = {
        "repos": gitops.repos,
        "status": gitops.status,
        "log": gitops.log,
        "branches": gitops.branches,
        "create_branch": _create_ref,
        "create_tag": _create_ref,
    }
    for operation, implementation in gitops_ops.items():
        register_capability_operation(CapabilityName.GITOPS, operation, implementation, when=_has_repos)

    register_capability_operation(CapabilityName.FLEET_DIAGNOSTICS, "provider_health", diagnostics.provider_health)
    register_capability_operation(CapabilityName.FLEET_DIAGNOSTICS, "queue_depth", diagnostics.queue_depth)

    register_instance_capability(TmuxProvider.kind, CapabilityName.RUNTIME_BOOTSTRAP, tmux_bootstrap)

    register_capability_operation(CapabilityName.MCP_DISCOVERY, "servers", mcp_discovery.servers, when=_has_mcp_servers)
    register_capability_operation(
        CapabilityName.MCP_DISCOVERY, "discover", mcp_discovery.discover, when=_has_mcp_servers
    )

    register_capability_operation(CapabilityName.MOS_COORDINATION, "handoff", mos_handoff)
