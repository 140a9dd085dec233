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
        # issue 5: terminating is approved by a human, then executed here; approval changes reach the stream.
        from approvals_app.approval_selectors import can_read_approval
        from approvals_app.approvals import register_action_executor, register_approval_observer

        from .terminate import ACTION, bind_terminate_parameters, execute_terminate, post_approval_event

        register_action_executor(ACTION, execute_terminate, bind_parameters=bind_terminate_parameters)
        register_approval_observer(post_approval_event)
        # In sessions_app because approvals_app may not import memory_app: "approval:<id>" pins resolve
        # only while the operator may read that approval (they requested it or may decide it).
        register_reference_resolver("approval", lambda scope, ref: can_read_approval(scope=scope, approval_id=ref))
        # issue 5: Mos hand-offs reach the stream, are re-queued by the lease sweeper, and can be pinned.
        from approvals_app.handoffs import (
            handoff_readable,
            handoffs_readable_many,
            register_handoff_observer,
            wake_handoff,
        )
        from approvals_app.models import Handoff

        from .gateway import post_handoff_event

        register_handoff_observer(post_handoff_event)
        register_leased_work(Handoff, wake_handoff)
        register_reference_resolver("handoff", handoff_readable, many=handoffs_readable_many)
        # seed 000: every operational-memory capture shows in its session's stream (ids only).
        from memory_app.plugin import register_capture_observer

        from .lifecycle import post_capture_event

        register_capture_observer(post_capture_event)
        # issue 10: the durable inbox/state hooks, session counts, Discord status and runtime bootstrap.
        from .catalog_capabilities import register as register_catalog_capabilities

        register_catalog_capabilities()
        if pump.should_start():
            pump.start_embedded_pump()
