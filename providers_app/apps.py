from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    """Agent runtime providers, model adapters, capability descriptors and the operator-tool catalog."""

    name = "providers_app"
    verbose_name = "Runtime providers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
