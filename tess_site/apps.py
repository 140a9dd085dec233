from django.apps import AppConfig


class TessSiteConfig(AppConfig):
    """Wiring of the base: signal receivers that belong to no app."""

    name = "tess_site"
    verbose_name = "Tess"

    def ready(self) -> None:
        from django.core.signals import request_finished

        from .context import clear_correlation_id

        request_finished.connect(clear_correlation_id, dispatch_uid="tess-clear-correlation-id")
