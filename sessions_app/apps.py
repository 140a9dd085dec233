from django.apps import AppConfig


class SessionsConfig(AppConfig):
    """Durable sessions, ingress bindings, the event stream, inbox/outbox, and the turn gateway."""

    name = "sessions_app"
    verbose_name = "Sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
        wiring.start()
