"""Everything providers_app registers at start-up, in one place (called from ``AppConfig.ready``).

Which executor runs for which approved action: ``gitops.create_branch`` and ``gitops.create_tag`` →
``gitops_approvals.executor(action)``. The catalog's capabilities are listed beside their operations in
``catalog_wiring.register_catalog_capabilities``.
"""

from __future__ import annotations

from approvals_app.approvals import register_action_executor
from tess_site.health import register_health_check

from . import gitops_approvals
from .catalog_wiring import register_catalog_capabilities
from .health import provider_health_for
from .hermes import HermesProvider
from .matrix import MatrixProvider
from .model_adapters import register_model_adapter
from .pi import PiProvider
from .pi_model import PiModelAdapter
from .registry import register_runtime_provider
from .tmux import TmuxProvider


def connect() -> None:
    register_runtime_provider(TmuxProvider.kind, TmuxProvider)
    register_runtime_provider(PiProvider.kind, PiProvider)
    register_runtime_provider(HermesProvider.kind, HermesProvider)
    register_runtime_provider(MatrixProvider.kind, MatrixProvider)
    register_model_adapter(PiModelAdapter.name, PiModelAdapter.from_settings)
    register_health_check("runtime_providers", provider_health_for)
    # A GitOps write is approved by a human, then executed here with the parameters bound at request time.
    for action in gitops_approvals.ACTIONS:
        register_action_executor(
            action, gitops_approvals.executor(action), bind_parameters=gitops_approvals.bind_parameters(action)
        )
    register_catalog_capabilities()
