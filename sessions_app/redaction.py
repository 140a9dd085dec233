"""Forgotten notes leave the session stream too (seed 002: forget, forget-all and erasure "delete … current
bytes and matching lineage").

The operator's words reach a session as the ``turn.in`` that asked to remember them, and may come back in a
``turn.out`` or be folded into a ``ConversationSummary``. ``redact_forgotten`` is registered with
memory_app (``memory_app.forgetting``) and runs inside the deleting transaction: it replaces the text of
those events in place (``seq``, ``kind``, ``ts`` and the other body fields kept) and of the summaries that
hold them with ``REDACTED_TEXT``, and returns how many it redacted.

Where: the sessions the operator owns and those in which the audit feed shows them taking a turn, in the
note's tenant. What: a turn or reply whose text contains a forgotten value (compared as the notes are,
whitespace collapsed and case-folded), and every summary of those sessions made from a redacted turn or
after one (a summary folds the one before it in), or holding a value itself; and the stored answers a retried
request of the operator would replay. Words paraphrased by a model
inside a reply are not recognised; the summaries that could hold them are redacted by the rule above.

After commit, each session gets one ``redacted`` event naming the seqs (its consumers re-render them; a
client that reconnects later reads them redacted from the database), and the registered conversation
resets run (a model adapter that keeps its own copy of the conversation, such as pi's session file, starts
it again from Tess's redacted one). A reset runs outside any transaction: it may touch files or processes.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import Q

from memory_app.forgetting import Forgotten
from memory_app.policy import canonicalize
from tess_site.audit.models import AuditEvent

from . import stream
from .conversation import conversation_changed
from .journal import event_append
from .models import ConversationSummary, IdempotencyRecord, Session, SessionEvent

logger = logging.getLogger(__name__)

REDACTED_TEXT = "(forgotten memory request)"
# A value shorter than this would match a large part of every conversation: it is left to the note's own
# deletion (the stream keeps such words; the README says so).
MIN_VALUE_CHARS = 3
TURN_KINDS = (str(stream.EventKind.TURN_IN), str(stream.EventKind.TURN_OUT))

ConversationReset = Callable[[str], bool]
_resets: list[ConversationReset] = []


def register_conversation_reset(reset: ConversationReset) -> None:
    """``reset(tess_session_id)`` drops a model adapter's own copy of a session's conversation after some of it
    was redacted (True: there was one). Registered in ``wiring.py``; called after commit."""
    if reset not in _resets:
        _resets.append(reset)


def _pattern(value: str) -> str | None:
    words = canonicalize(value).split()
    if len(" ".join(words)) < MIN_VALUE_CHARS:
        return None
    # Any run of whitespace between the words, as ``canonicalize`` compares them; a regex both PostgreSQL
    # (ARE) and Python read the same way: only punctuation is escaped.
    return r"\s+".join(re.escape(word) for word in words)


def _sessions_of(forgotten: Forgotten) -> list[uuid.UUID]:
    """The sessions in the tenant that the operator owns or took a turn in (the audit feed's turns)."""
    owned = Session.objects.filter(tenant_id=forgotten.tenant_id, owner_id=forgotten.operator_id).values_list(
        "pk", flat=True
    )
    turned = (
        AuditEvent.objects.filter(
            tenant_id=forgotten.tenant_id, actor_id=forgotten.operator_id, action="turn.decided", target_type="session"
        )
        .values_list("target_id", flat=True)
        .distinct()
    )
    ids = {str(pk) for pk in owned} | set(turned)
    found = Session.objects.filter(tenant_id=forgotten.tenant_id, pk__in=[_uuid(i) for i in ids if _uuid(i)])
    return list(found.values_list("pk", flat=True))


def _uuid(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


def _redacted_body(body: Any) -> dict[str, Any]:
    return {**(body if isinstance(body, dict) else {}), "text": REDACTED_TEXT}


def redact_forgotten(forgotten: Forgotten) -> int:
    """Redact the stream turns, replies and conversation summaries that carry ``forgotten``'s values; how many.
    Runs inside the deleting transaction (the memory_app observer contract)."""
    patterns = [p for p in (_pattern(v) for v in forgotten.values) if p]
    if not patterns:
        return 0
    sessions = _sessions_of(forgotten)
    if not sessions:
        return 0
    carries = Q()
    for pattern in patterns:
        carries |= Q(body__text__iregex=pattern)
    events = (
        SessionEvent.objects.filter(session_id__in=sessions, kind__in=TURN_KINDS)
        .filter(carries)
        .exclude(body__text=REDACTED_TEXT)
        .select_for_update()
        .order_by("session_id", "seq")
    )
    seqs: dict[uuid.UUID, list[int]] = {}
    for event in events:
        event.body = _redacted_body(event.body)
        event.save(update_fields=["body"])
        seqs.setdefault(event.session_id, []).append(event.seq)
    _redact_replays(forgotten, patterns)
    summarised, summaries = _redact_summaries(sessions, seqs, patterns)
    for session_id in sorted(set(seqs) | summarised, key=str):
        redacted = tuple(seqs.get(session_id, ()))
        conversation_changed(session_id=session_id)  # every process reads the conversation again
        transaction.on_commit(lambda s=session_id, q=redacted: _after_redaction(s, q))  # type: ignore[misc]
    return sum(len(q) for q in seqs.values()) + summaries


def _redact_summaries(
    sessions: list[uuid.UUID], seqs: dict[uuid.UUID, list[int]], patterns: list[str]
) -> tuple[set[uuid.UUID], int]:
    """Redact the summaries made from a redacted turn or after one, or holding a value; their sessions and
    how many."""
    holds = Q()
    for pattern in patterns:
        holds |= Q(text__iregex=pattern)
    after = Q()
    for session_id, redacted in seqs.items():
        after |= Q(session_id=session_id, last_seq__gte=min(redacted))
    rows = ConversationSummary.objects.filter(session_id__in=sessions).filter(holds | after).exclude(text=REDACTED_TEXT)
    touched = set(rows.values_list("session_id", flat=True))
    return touched, rows.update(text=REDACTED_TEXT)


def _scrubbed(value: Any, compiled: list[re.Pattern[str]]) -> Any:
    if isinstance(value, str):
        return REDACTED_TEXT if any(p.search(value) for p in compiled) else value
    if isinstance(value, list):
        return [_scrubbed(v, compiled) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, compiled) for k, v in value.items()}
    return value


def _redact_replays(forgotten: Forgotten, patterns: list[str]) -> None:
    """The stored answers a retried request would replay (kept ``TESS_IDEMPOTENCY_HOURS``) hold copies of the
    turn and its reply: every string in them that carries a value is redacted the same way (not counted: they
    are copies of the events counted above)."""
    compiled = [re.compile(p, re.I) for p in patterns]
    records = IdempotencyRecord.objects.filter(
        tenant_id=forgotten.tenant_id, actor_id=forgotten.operator_id, response_body__isnull=False
    ).select_for_update()
    for record in records:
        scrubbed = _scrubbed(record.response_body, compiled)
        if scrubbed != record.response_body:
            record.response_body = scrubbed
            record.save(update_fields=["response_body"])


def _after_redaction(session_id: uuid.UUID, seqs: tuple[int, ...]) -> None:
    """Tell the stream's consumers which seqs to re-render, then let adapters restart their conversation."""
    if seqs:
        try:
            with transaction.atomic():
                event_append(
                    session_id=session_id,
                    kind=stream.EventKind.REDACTED,
                    body=stream.redacted_body(seqs=list(seqs), text=REDACTED_TEXT),
                )
        except Exception:
            # The redaction itself is committed: a client that reloads reads it; only live re-rendering is lost.
            logger.warning("the redaction notice of session %s could not be written", session_id, exc_info=True)
    for reset in list(_resets):
        try:
            reset(str(session_id))
        except Exception:
            logger.warning("conversation reset of session %s failed", session_id, exc_info=True)
