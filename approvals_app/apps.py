from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """Authority policy, confirm cards, approval requests and their execution, Mos hand-offs."""

    name = "approvals_app"
    verbose_name = "Approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
