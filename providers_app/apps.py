from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    """Agent runtime providers, model adapters, capability descriptors and the operator-tool catalog."""

    name = "providers_app"
    verbose_name = "Runtime providers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tess_site.health import register_health_check

        from .health import provider_health_report
        from .hermes import HermesProvider
        from .matrix import MatrixProvider
        from .pi import PiProvider
        from .registry import register_runtime_provider
        from .tmux import TmuxProvider

        register_runtime_provider(TmuxProvider.kind, TmuxProvider)
        register_runtime_provider(PiProvider.kind, PiProvider)
        register_runtime_provider(HermesProvider.kind, HermesProvider)
        register_runtime_provider(MatrixProvider.kind, MatrixProvider)
        register_health_check("runtime_providers", provider_health_report)
        from .catalog_wiring import register_catalog_capabilities

        register_catalog_capabilities()
