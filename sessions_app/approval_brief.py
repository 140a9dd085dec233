"""The approval page's words for a terminate: which session, on which runtime, whose, since when, and the
last lines it printed."""

from __future__ import annotations

from django.utils import timezone
from django.utils.timesince import timesince

from approvals_app.briefs import ActionBrief
from approvals_app.models import Approval
from providers_app.registry import configured_instances
from tess_site.terminal_text import plain_lines

from . import selectors
from .stream import EventKind

OUTPUT_LINES = 20
OUTPUT_EVENTS = 200  # enough recent output events to hold 20 lines of any ordinary output


def describe_terminate(approval: Approval) -> ActionBrief | None:
    session = selectors.session_for_approval(
        session_id=approval.session_id or approval.target_id, tenant_id=approval.tenant_id
    )
    if session is None:
        return None
    kind = str(configured_instances().get(session.provider_instance, {}).get("kind", "")) or "runtime"
    runtime = f"{kind} instance {session.provider_instance}"
    started = timezone.now() - session.created_at
    age = (
        "just now" if started.total_seconds() < 60 else f"{timesince(session.created_at, timezone.now(), depth=1)} ago"
    )
    sentence = (
        f"Terminate the session \u201c{session.title or session.runtime_id}\u201d ({runtime}), "
        f"started by {session.owner.get_username()} {age}"
    )
    events = selectors.events_before(session_id=session.pk, before=None, limit=OUTPUT_EVENTS, kind=EventKind.OUTPUT)
    text = "".join(str((event.body or {}).get("data", "")) for event in events)
    lines = plain_lines(text, last=OUTPUT_LINES)
    return ActionBrief(
        sentence=sentence,
        output_lines=lines,
        output_label=f"The last {len(lines)} line{'s' if len(lines) != 1 else ''} of the session\u2019s output",
    )
