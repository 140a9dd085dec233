"""Runtime checkpoints (seed 001, "checkpoint", "compaction recovery"): the state side of the durable
inbox/state hooks (seed 000).

A checkpoint is the point a runtime compacted its context at, kept on ``Session.checkpoint`` with the stream
cursor it covers: ``{"kind", "entry_id", "summary", "first_kept_entry_id", "tokens_before", "cursor"}``.
Every write (the pump's, as it reads a compaction; or a caller's through the capability) appends a
``system`` event with code ``checkpoint`` and an audit row ``session.checkpoint`` carrying ids only (the
summary is the owner's, never the auditor's), and captures the summary as the owner's operational memory.

When a runtime rewrites its stream under the cursor (pi migrating a session file on load), the pump asks
the provider to find the same point again from the checkpoint (``stream_resume``) rather than reading on
from a place that now means something else, or starting over.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from providers_app.contract import AgentRuntimeProvider, CapabilityUnsupported, CursorLost
from providers_app.registry import get_provider
from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, Forbidden, InvalidInput
from tess_site.scope import Role, Scope

from . import selectors, stream
from .journal import events_append
from .lifecycle import capture_on_commit, checkpoint_body, checkpoint_capture_text
from .models import Session, SessionStatus

FIELDS = ("kind", "entry_id", "summary", "first_kept_entry_id", "tokens_before")
MAX_SUMMARY_CHARS = 20000
ID_CHARS = 64


def checkpoint_record(
    *, scope: Scope, session: Session, checkpoint: dict[str, Any], cursor: str, items: list[tuple[Any, Any]]
) -> dict[str, Any]:
    """The value to store on ``Session.checkpoint`` for ``checkpoint`` at ``cursor``; adds its ``system``
    event to ``items`` and records the audit row and the capture. Call in the transaction holding the
    session row's lock, which writes the value and appends ``items``."""
    value = {**{key: checkpoint.get(key) for key in FIELDS}, "cursor": cursor}
    items.append((stream.EventKind.SYSTEM, checkpoint_body(value)))
    record_audit(
        scope,
        action="session.checkpoint",
        target_type="session",
        target_id=str(session.pk),
        outcome="ok",
        metadata={
            "kind": _safe_id(value["kind"]),
            "entry_id": _safe_id(value["entry_id"]),
            "first_kept_entry_id": _safe_id(value["first_kept_entry_id"]),
            "cursor": _safe_id(cursor),
        },
    )
    capture_on_commit(session_id=session.pk, source="checkpoint", text=checkpoint_capture_text(session, value))
    return value


def _safe_id(value: object) -> str:
    """An id as the audit feed may hold it (anything else is left out, never the summary)."""
    text = str(value or "")[:ID_CHARS]
    return text if all(ch.isalnum() or ch in "_.:-" for ch in text) else ""


def _check_given(checkpoint: Any, cursor: Any) -> dict[str, Any]:
    if not isinstance(checkpoint, dict) or set(checkpoint) - set(FIELDS):
        raise InvalidInput(f"A checkpoint has the fields {', '.join(FIELDS)}.", details={"field": "checkpoint"})
    for key in ("kind", "entry_id"):
        value = checkpoint.get(key)
        if not isinstance(value, str) or not value or _safe_id(value) != value:
            raise InvalidInput(f"A checkpoint names its {key} as an id.", details={"field": key})
    summary = checkpoint.get("summary", "")
    if not isinstance(summary, str) or len(summary) > MAX_SUMMARY_CHARS:
        raise InvalidInput(f"A summary has at most {MAX_SUMMARY_CHARS} characters.", details={"field": "summary"})
    tokens = checkpoint.get("tokens_before")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
        raise InvalidInput("tokens_before is a count.", details={"field": "tokens_before"})
    if not isinstance(cursor, str) or not cursor or len(cursor) > 128:
        raise InvalidInput("A checkpoint covers a stream cursor.", details={"field": "cursor"})
    return {key: checkpoint.get(key, "" if key != "tokens_before" else None) for key in FIELDS}


def session_checkpoint_write(scope: Scope, *, session_id: object, checkpoint: Any, cursor: Any) -> dict[str, Any]:
    """The capability's ``checkpoint_write``: record ``checkpoint`` as covering the stream up to ``cursor``.

    For the session's owner or a tenant admin, on a running session whose provider keeps checkpoints
    (``Capabilities.checkpoints``); any other provider fails closed (``capability_unsupported``), since
    nothing could resume from it. The cursor is the provider's own and must name a point of the session's
    stream now (the provider is asked, before anything is written)."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    if scope.actor is None or (session.owner_id != scope.actor.pk and not scope.has_role(Role.ADMIN)):
        raise Forbidden("Only the session's owner or a tenant admin may do that.")
    given = _check_given(checkpoint, cursor)
    provider = get_provider(session.provider_instance)
    if not provider.capabilities().checkpoints:
        raise CapabilityUnsupported(
            "This session's runtime keeps no checkpoints.",
            details={"provider": session.provider_instance, "operation": "checkpoint_write"},
        )
    provider.stream_session(session.runtime_ref, cursor, scope, limit=1)  # InvalidInput or CursorLost if not
    with transaction.atomic():
        locked = Session.objects.select_for_update(of=("self",)).select_related("tenant").get(pk=session.pk)
        if locked.status != SessionStatus.RUNNING:
            raise Conflict("The session is not running.")
        items: list[tuple[Any, Any]] = []
        value = checkpoint_record(scope=scope, session=locked, checkpoint=given, cursor=cursor, items=items)
        rows = events_append(session_id=locked.pk, items=items)
        Session.objects.filter(pk=locked.pk).update(checkpoint=value)
    return {"session_id": str(session.pk), "checkpoint": value, "seq": rows[-1].seq}


def stream_resume(
    *, session: Session, provider: AgentRuntimeProvider, scope: Scope, items: list[tuple[Any, Any]]
) -> str:
    """After ``CursorLost``: the provider's cursor for where the session's stream reader was, found from
    the session's checkpoint; a ``system`` event (code ``checkpoint.resumed``) says so. Without a checkpoint,
    or from a provider that keeps none, ``CursorLost`` stands (nothing is guessed: the pump leaves the
    cursor where it is and logs it)."""
    checkpoint = session.checkpoint if isinstance(session.checkpoint, dict) else {}
    if not checkpoint.get("entry_id") or not provider.capabilities().checkpoints:
        raise CursorLost(details={"session": str(session.pk), "checkpoint": None})
    cursor = provider.resume_cursor(session.runtime_ref, session.cursor, checkpoint, scope)
    entry = _safe_id(checkpoint.get("entry_id"))
    items.append(
        (
            stream.EventKind.SYSTEM,
            stream.system_body(
                text=f"The runtime rewrote its stream; reading resumed from the checkpoint (entry {entry}).",
                code="checkpoint.resumed",
            ),
        )
    )
    record_audit(
        scope,
        action="session.checkpoint_resumed",
        target_type="session",
        target_id=str(session.pk),
        outcome="ok",
        metadata={"entry_id": entry, "lost_cursor": _safe_id(session.cursor), "cursor": _safe_id(cursor)},
    )
    return cursor
