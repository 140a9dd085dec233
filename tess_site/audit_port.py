"""The port through which the base records audit events without importing the app that owns the feed.

``approvals_app`` owns the audit feed and sits above ``tess_site``; it registers its recorder here at
start-up (``AppConfig.ready``) so identity events (tokens made, revoked, refused) are audited too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .scope import Scope

AuditRecorder = Callable[..., Any]
_recorder: AuditRecorder | None = None


def register_audit_recorder(recorder: AuditRecorder) -> None:
    global _recorder
    _recorder = recorder


def audit(scope: Scope, **event: Any) -> Any:
    """Record an audit event through the registered recorder. Without one, Tess is misconfigured."""
    if _recorder is None:
        raise RuntimeError("no audit recorder registered: is approvals_app installed?")
    return _recorder(scope, **event)
