"""Prompt build time with a session's conversation: 1,000 turns beside 10 and 200 turns, in the same run.

Both conversations are made by real turns (the gateway, the deterministic adapter, the default
``TESS_CONVERSATION_TOKENS``), so the long one has been summarised along the way as it grew, and between
every turn the session's runtime wrote ``BENCH_PROMPT_OUTPUT`` output events (default 5), which a prompt
must not walk. Measured: the prompt's conversation read and assembled (``conversation_build``, with the
tokens counted) plus the whole prompt's messages, as the gateway's second step makes them. Target: 1,000
turns at most 2x 10 turns, since a prompt carries the newest summary and the turns after it, not the
whole history. Each build reads the conversation from the database (nothing kept from the last one), as the
first turn a serving process answers for a session does. A second row sets it beside 200 turns (already past
the budget): at most 1.25x, the cost stays flat however long the session runs. Each pair twice: counted with
the stated estimate (the deterministic model), and exactly with the ``o200k_base`` vocabulary
(``TESS_MODEL=gpt-5.6-sol``).
"""

from __future__ import annotations

import os
import uuid

from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from bench.common import Row, per_op_us
from providers_app.model_adapters import DeterministicAdapter
from sessions_app import stream
from sessions_app.conversation import conversation_build, conversation_summary_store
from sessions_app.conversation_items import conversation_kept_clear
from sessions_app.gateway import turn_handle
from sessions_app.gateway_prompt import prompt_assemble
from sessions_app.journal import events_append
from sessions_app.models import ConversationSummary, Session
from tess_site.accounts import services as accounts
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Role, Scope

OUTPUT_PER_TURN = int(os.environ.get("BENCH_PROMPT_OUTPUT", "5"))
LIVE = {"session": {"id": "bench", "title": "bench", "status": "running", "provider_instance": "bench"}}


def _conversation(scope: Scope, tenant_id: int, turns: int) -> Session:
    assert scope.actor is not None
    session = Session.objects.create(
        tenant_id=tenant_id,
        owner=scope.actor,
        title=f"bench {turns}",
        provider_instance="bench",
        runtime_id=f"${uuid.uuid4().hex[:8]}",
    )
    body = stream.output_body(data="build step ok\n" * 4, source="%1", cursor="", next_cursor="")
    output = [(stream.EventKind.OUTPUT, body)] * OUTPUT_PER_TURN
    for n in range(turns):
        turn_handle(scope=scope, session_id=str(session.pk), text=f"what changed in the fleet since step {n}?")
        events_append(session_id=session.pk, items=output)
    # The next prompt reads what the last turn left: if that needs a summary, make it now, as the next turn
    # would, so the figure is the steady state.
    pending = conversation_build(session=session, adapter=DeterministicAdapter()).summary
    if pending is not None:
        conversation_summary_store(session_id=session.pk, pending=pending)
    return session


def _build(session: Session) -> None:
    # Read whole every time, as the first turn a process answers for a session does: what each process keeps
    # between turns (conversation_items) would otherwise turn every figure but the first into a cache hit.
    conversation_kept_clear()
    conversation = conversation_build(session=session, adapter=DeterministicAdapter())
    assert conversation.summary is None
    prompt_assemble(text="and now?", live=LIVE, conversation=conversation.messages).messages()


def run() -> list[Row]:
    assert settings.TESS_MODEL_ADAPTER == "deterministic", "the prompt benchmark makes its turns without a model"
    tenant = accounts.tenant_create(slug=f"bench-prompt-{timezone.now():%H%M%S%f}")
    user, _ = accounts.user_ensure(username=f"bench-prompt-{tenant.pk}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.CLI,
        correlation_id="bench-prompt",
        roles=roles_for(user=user, tenant=tenant),
    )
    short = _conversation(scope, tenant.pk, 10)
    middle = _conversation(scope, tenant.pk, 200)
    long = _conversation(scope, tenant.pk, 1000)
    summaries = ConversationSummary.objects.filter(session=long).count()
    rows = []
    for label, model in (("estimate", "tess-deterministic"), ("o200k", "gpt-5.6-sol")):
        with override_settings(TESS_MODEL=model):
            _build(short)  # warm: the tokenizer's vocabulary loads once per process
            baseline = per_op_us(lambda: _build(short), 100)
            value = per_op_us(lambda: _build(long), 100)
            beside_middle = per_op_us(lambda: _build(middle), 100)
        name = f"prompt, 1,000 turns ({summaries} summaries, {label})"
        rows.append(Row(name, f"prompt, 10 turns ({label})", baseline, value, at_most=2.0))
        # Past the budget a prompt's cost no longer grows with the session's history.
        rows.append(Row(name, f"prompt, 200 turns ({label})", beside_middle, value, at_most=1.25))
    return rows
