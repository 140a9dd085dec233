"""Everything sessions_app registers at start-up, in one place (called from ``AppConfig.ready``).

Which executor runs for which approved action: ``session.terminate`` → ``terminate.execute_terminate``.
"""

from __future__ import annotations

from approvals_app.approvals import register_action_executor, register_approval_observer
from approvals_app.briefs import register_action_describer
from approvals_app.handoffs import register_handoff_observer
from approvals_app.inbox_items import register_inbox_source
from memory_app.forgetting import register_forget_observer
from memory_app.plugin import register_capture_observer
from providers_app.pi_model import pi_conversation_reset
from tess_site.leases import register_leased_work
from tess_site.refs import register_reference_resolver

from . import pump, selectors
from .approval_brief import describe_terminate
from .budgets import budgets_waiting
from .catalog_capabilities import register as register_catalog_capabilities
from .gateway import post_handoff_event
from .inbox_source import sessions_waiting
from .lifecycle import post_capture_event, wake_capture_item
from .models import CaptureItem, InboxItem, OutboxItem
from .outbox import wake_outbox_item
from .over_budget import ACTION as OVER_BUDGET
from .over_budget import describe_over_budget, execute_over_budget
from .redaction import redact_forgotten, register_conversation_reset
from .services import wake_inbox_item
from .terminate import ACTION, bind_terminate_parameters, execute_terminate, post_approval_event


def connect() -> None:
    register_leased_work(InboxItem, wake_inbox_item)
    register_leased_work(OutboxItem, wake_outbox_item)
    register_leased_work(CaptureItem, wake_capture_item)
    # seed 002: a pinned "session:<id>" resolves only while the operator can still read that session.
    register_reference_resolver("session", lambda scope, ref: selectors.can_read_session(scope=scope, session_id=ref))
    # Terminating is approved by a human, then executed here; approval and hand-off changes reach the stream.
    register_action_executor(ACTION, execute_terminate, bind_parameters=bind_terminate_parameters)
    register_approval_observer(post_approval_event)
    register_action_describer(ACTION, describe_terminate)
    # A turn or input a require_approval budget stopped runs once an approver approves it.
    register_action_executor(OVER_BUDGET, execute_over_budget)
    register_action_describer(OVER_BUDGET, describe_over_budget)
    register_handoff_observer(post_handoff_event)
    # seed 000: every operational-memory capture shows in its session's stream (ids only).
    register_capture_observer(post_capture_event)
    # seed 002: forgotten notes' words leave the stream's turns, replies and conversation summaries too.
    register_forget_observer(redact_forgotten)
    # A model adapter's own copy of a conversation restarts from the redacted one: pi's session file.
    register_conversation_reset(pi_conversation_reset)
    # The inbox's "sessions waiting for your input" part (reads Session.agent_state where the model has it).
    register_inbox_source("sessions", sessions_waiting)
    # Budgets of the person at 80 % or 100 % this period.
    register_inbox_source("budgets", budgets_waiting)
    # The durable inbox/state hooks, session counts, Discord status and runtime bootstrap in the catalog.
    register_catalog_capabilities()


def start() -> None:
    """The side effect of starting up, apart from registrations: the embedded output pump, where configured."""
    if pump.should_start():
        pump.start_embedded_pump()
