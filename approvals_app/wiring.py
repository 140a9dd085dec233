"""Everything approvals_app registers at start-up, in one place (called from ``AppConfig.ready``).

The executors that run approved actions are registered by the apps owning those actions (their own
``wiring.py``: ``session.terminate`` in sessions_app, the GitOps actions in providers_app).
"""

from __future__ import annotations

from tess_site.leases import register_leased_work
from tess_site.metrics import register_scrape_collector
from tess_site.refs import register_reference_resolver

from . import executions
from .approval_selectors import can_read_approval
from .approvals import register_approval_observer
from .handoff_selectors import handoff_readable, handoffs_readable_many
from .handoffs import wake_handoff
from .metrics import collect_pending, count_transition
from .models import ApprovalExecution, Handoff


def connect() -> None:
    register_leased_work(ApprovalExecution, executions.wake_execution)
    register_leased_work(Handoff, wake_handoff)
    register_approval_observer(count_transition)
    register_scrape_collector("approvals", collect_pending)
    # seed 002: a pinned "approval:<id>" resolves only while the operator may read that approval (they
    # requested it or may decide it); "handoff:<id>" likewise for hand-offs.
    register_reference_resolver("approval", lambda scope, ref: can_read_approval(scope=scope, approval_id=ref))
    register_reference_resolver("handoff", handoff_readable, many=handoffs_readable_many)
