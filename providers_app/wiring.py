"""Everything providers_app registers at start-up, in one place (called from ``AppConfig.ready``).

The catalog's capabilities, and the GitOps write actions' binders and executors, are registered by
``catalog_wiring.register_catalog_capabilities`` (the catalog lists them beside their operations).
"""

from __future__ import annotations

from tess_site.health import register_health_check

from .catalog_wiring import register_catalog_capabilities
from .health import provider_health_for
from .hermes import HermesProvider
from .matrix import MatrixProvider
from .pi import PiProvider
from .registry import register_runtime_provider
from .tmux import TmuxProvider


def connect() -> None:
    register_runtime_provider(TmuxProvider.kind, TmuxProvider)
    register_runtime_provider(PiProvider.kind, PiProvider)
    register_runtime_provider(HermesProvider.kind, HermesProvider)
    register_runtime_provider(MatrixProvider.kind, MatrixProvider)
    register_health_check("runtime_providers", provider_health_for)
    register_catalog_capabilities()
