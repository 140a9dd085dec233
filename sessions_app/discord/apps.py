from django.apps import AppConfig


class DiscordConfig(AppConfig):
    """Registers the Discord outbox sender and the approval notice/link deliverers at start-up."""

    name = "sessions_app.discord"
    label = "discord"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import wiring

        wiring.connect()
