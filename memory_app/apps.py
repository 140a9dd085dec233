from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Operator memory, the operational memory plugin, and reviewed coding memory."""

    name = "memory_app"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
