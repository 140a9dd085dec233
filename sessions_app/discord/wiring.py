"""Everything the Discord channel registers at start-up, in one place (called from ``AppConfig.ready``)."""

from __future__ import annotations

from approvals_app.delivery import register_private_deliverer, register_shared_notifier
from approvals_app.notifications import register_inbox_notifier
from sessions_app.cutover import register_bindings_moved_observer
from sessions_app.outbox import register_outbox_sender

from . import sender
from .services import relay_restart


def connect() -> None:
    register_outbox_sender("discord", sender.send_outbox_frame)
    register_shared_notifier("discord", sender.notify_bound_channels)
    register_private_deliverer("discord", sender.send_link_privately)
    register_inbox_notifier("discord", sender.send_inbox_notice)
    register_bindings_moved_observer(relay_restart)
