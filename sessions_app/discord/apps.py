from django.apps import AppConfig


class DiscordConfig(AppConfig):
    """Registers the Discord outbox sender and the approval notice/link deliverers at start-up."""

    name = "sessions_app.discord"
    label = "discord"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals_app.delivery import register_private_deliverer, register_shared_notifier
        from sessions_app.outbox import register_outbox_sender

        from . import sender

        register_outbox_sender("discord", sender.send_outbox_frame)
        register_shared_notifier("discord", sender.notify_bound_channels)
        register_private_deliverer("discord", sender.send_link_privately)
        from sessions_app.cutover import register_bindings_moved_observer

        from .services import relay_restart

        register_bindings_moved_observer(relay_restart)
