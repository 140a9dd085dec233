from django.apps import AppConfig


class SessionsConfig(AppConfig):
    """Durable sessions, ingress bindings, the event stream, inbox/outbox, and the turn gateway."""

    name = "sessions_app"
    verbose_name = "Sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory_app.refs import register_reference_resolver
        from tess_site.leases import register_leased_work

        from . import pump, selectors
        from .models import InboxItem, OutboxItem
        from .outbox import wake_outbox_item
        from .services import wake_inbox_item

        register_leased_work(InboxItem, wake_inbox_item)
        register_leased_work(OutboxItem, wake_outbox_item)
        # seed 002: a pinned "session:<id>" resolves only while the operator can still read that session.
        register_reference_resolver(
            "session", lambda scope, ref: selectors.can_read_session(scope=scope, session_id=ref)
        )
        if pump.should_start():
            pump.start_embedded_pump()
