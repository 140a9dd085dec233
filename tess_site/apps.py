from django.apps import AppConfig


class TessSiteConfig(AppConfig):
    """The base's own start-up wiring: signal receivers that belong to no app."""

    name = "tess_site"
    verbose_name = "Tess"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
