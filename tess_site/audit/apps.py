from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The append-only, hash-chained audit feed every app records into, and its pinnable ``audit:<seq>`` refs."""

    name = "tess_site.audit"
    label = "audit"
    verbose_name = "Audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
