"""A Tess session's conversation in its prompts: earlier turns from every channel, the lines between them,
a token budget, summaries of the older part, and nothing from any other session or person. Against the local
chat-completions stand-in over real HTTP."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from memory_app.models import OperatorMemory
from providers_app.model_adapters import DeterministicAdapter
from providers_app.model_tokens import estimate_tokens, messages_tokens, token_counter
from sessions_app import stream
from sessions_app.conversation import SUMMARY_LABEL, conversation_build
from sessions_app.gateway import turn_handle
from sessions_app.gateway_prompt import STABLE_PREFIX
from sessions_app.journal import event_append
from sessions_app.models import ConversationSummary, Session, SessionEvent
from tess_site.scope import Channel
from tess_site.settings.production import production_problems
from tests.conftest import csrf_token, scope_of
from tests.factories import SessionFactory
from tests.providers_app.chat_standin import ChatStandIn, running_chat_standin

pytestmark = pytest.mark.django_db

MODEL = "gpt-5.6-sol"


@pytest.fixture
def chat_standin() -> Iterator[ChatStandIn]:
    with running_chat_standin() as standin:
        yield standin


def model_settings(standin: ChatStandIn, model: str = MODEL, **more: Any) -> dict[str, Any]:
    return {
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": model,
        "TESS_MODEL_BASE_URL": standin.base_url,
        "TESS_MODEL_TIMEOUT_SECONDS": 5,
        "TESS_MODEL_STREAM": True,
        **more,
    }


@pytest.fixture
def session(cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme)


def turn(client, session: Session, text: str, **headers: Any):
    response = client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"text": text},
        format="json",
        headers={"Idempotency-Key": uuid.uuid4().hex, **headers},
    )
    assert response.status_code == 200, response.content
    return response.json()


def turn_requests(standin: ChatStandIn) -> list[list[dict[str, str]]]:
    """The messages of every answer the stand-in was asked for (summaries have their own instructions)."""
    return [r["body"]["messages"] for r in standin.requests if r["body"]["messages"][0]["content"] == STABLE_PREFIX]


def summary_requests(standin: ChatStandIn) -> list[list[dict[str, str]]]:
    return [r["body"]["messages"] for r in standin.requests if r["body"]["messages"][0]["content"] != STABLE_PREFIX]


def conversation_of(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The conversation part of an answer's request: after the stable prefix, before the dynamic section and
    the new text."""
    return messages[1:-2]


def test_a_second_turn_carries_the_first(cast, api_as, session, chat_standin):
    with override_settings(**model_settings(chat_standin)):
        first = turn(api_as(cast.owner), session, "which sessions failed overnight?")
        turn(api_as(cast.owner), session, "what did I just ask you?")
    opening, second = turn_requests(chat_standin)
    assert len(opening) == 3  # prefix, dynamic section, text: no conversation yet
    assert second[0]["content"] == STABLE_PREFIX
    assert conversation_of(second) == [
        {"role": "user", "content": "which sessions failed overnight?"},
        {"role": "assistant", "content": first["reply"]},
    ]
    assert second[-2]["content"].startswith("## Live state")
    assert second[-1] == {"role": "user", "content": "what did I just ask you?"}


def test_a_cli_turn_is_context_for_the_next_drawer_turn(cast, api_as, browser_as, session, chat_standin):
    with override_settings(**model_settings(chat_standin)):
        cli = turn(api_as(cast.owner), session, "pin the deploy runbook")
        drawer = browser_as(cast.owner)
        turn(drawer, session, "and the one before that?", **{"X-CSRFToken": csrf_token(drawer)})
    channels = [
        e["body"]["channel"] for e in SessionEvent.objects.filter(kind="turn.in").order_by("seq").values("body")
    ]
    assert channels == ["cli", "web"]
    assert conversation_of(turn_requests(chat_standin)[-1]) == [
        {"role": "user", "content": "pin the deploy runbook"},
        {"role": "assistant", "content": cli["reply"]},
    ]


def test_what_happened_between_turns_is_a_system_line(cast, api_as, session, chat_standin):
    with override_settings(**model_settings(chat_standin)):
        turn(api_as(cast.owner), session, "hello")
        event_append(session_id=session.pk, kind=stream.EventKind.OUTPUT, body={"data": "build log line"})
        event_append(session_id=session.pk, kind=stream.EventKind.APPROVAL, body={"id": "ap-1", "status": "pending"})
        event_append(session_id=session.pk, kind=stream.EventKind.APPROVAL, body={"id": "ap-1", "status": "approved"})
        event_append(
            session_id=session.pk,
            kind=stream.EventKind.HANDOFF,
            body={"id": "h-7", "status": "completed", "result": "PR #12"},
        )
        for agent_state in ("idle", "ended"):
            event_append(
                session_id=session.pk,
                kind=stream.EventKind.STATUS,
                body={"status": "terminated", "agent_state": agent_state, "since": None},
            )
        turn(api_as(cast.owner), session, "what happened?")
    between = [m["content"] for m in conversation_of(turn_requests(chat_standin)[-1]) if m["role"] == "system"]
    # Runtime output, a pending approval and a repeated end are not conversation.
    assert between == ["Approval ap-1 was approved.", "Hand-off h-7 completed: PR #12", "The session was terminated."]


def test_other_sessions_and_other_people_never_appear(cast, api_as, session, chat_standin):
    mine_elsewhere = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    teammates = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    outsiders = SessionFactory.create(owner=cast.outsider, tenant=cast.globex)
    memory_before = OperatorMemory.objects.count()
    with override_settings(**model_settings(chat_standin)):
        turn(api_as(cast.owner), mine_elsewhere, "marker-own-other-session")
        turn(api_as(cast.teammate), teammates, "marker-teammate")
        turn(api_as(cast.outsider, cast.globex), outsiders, "marker-outsider")
        turn(api_as(cast.owner), session, "first here")
        turn(api_as(cast.owner), session, "second here")
    sent = str(turn_requests(chat_standin)[-1])
    assert "first here" in sent
    for marker in ("marker-own-other-session", "marker-teammate", "marker-outsider"):
        assert marker not in sent
    # The outsider's next turn sees only their own session's conversation, too.
    with override_settings(**model_settings(chat_standin)):
        turn(api_as(cast.outsider, cast.globex), outsiders, "again")
    outsider_sent = str(turn_requests(chat_standin)[-1])
    assert "marker-outsider" in outsider_sent
    assert "first here" not in outsider_sent and "marker-teammate" not in outsider_sent
    assert OperatorMemory.objects.count() == memory_before  # the conversation never becomes memory


def test_300_short_turns_stay_within_the_budget_and_summarise_once_each(cast, session, chat_standin):
    budget = 1024
    scope = scope_of(cast.owner, cast.acme, Channel.CLI)
    with override_settings(**model_settings(chat_standin, TESS_CONVERSATION_TOKENS=budget)):
        for n in range(300):
            turn_handle(scope=scope, session_id=str(session.pk), text=f"short question number {n}?")
    count = token_counter(MODEL)
    answers = turn_requests(chat_standin)
    assert len(answers) == 300
    assert all(messages[0]["content"].encode() == STABLE_PREFIX.encode() for messages in answers)
    sizes = [messages_tokens(conversation_of(messages), count) for messages in answers]
    assert max(sizes) <= budget

    summaries = list(ConversationSummary.objects.filter(session=session).order_by("last_seq"))
    lines = SessionEvent.objects.filter(session=session, kind="system", body__code="conversation_summarised")
    assert len(summaries) == len(summary_requests(chat_standin)) == lines.count()
    # Each summary covers the turns after the one before it, once: no range is summarised twice.
    assert all(b.first_seq > a.last_seq for a, b in itertools.pairwise(summaries))
    # One summary per half a budget of new conversation or so (a quarter at the very least), never per turn.
    conversation_tokens = sum(
        count(e.body["text"]) + 4
        for e in SessionEvent.objects.filter(session=session, kind__in=["turn.in", "turn.out"])
    )
    assert conversation_tokens // budget <= len(summaries) <= conversation_tokens // (budget // 4)
    # Once summarised, a prompt carries the newest summary first, then the turns after it.
    last = conversation_of(answers[-1])
    assert last[0]["content"] == SUMMARY_LABEL + summaries[-1].text
    assert [m["content"] for m in last if m["role"] == "user"][-1] == "short question number 298?"
    assert "Earlier conversation summarised" in lines.last().body["text"]


def test_a_failed_summary_drops_the_oldest_turns_and_says_so(cast, api_as, session, chat_standin):
    with override_settings(**model_settings(chat_standin)):
        for n in range(40):
            turn(api_as(cast.owner), session, f"question {n:02d} about the fleet")
    with override_settings(**model_settings(chat_standin, "error-500", TESS_CONVERSATION_TOKENS=1024)):
        body = turn(api_as(cast.owner), session, "and now?")
    codes = [e["body"]["code"] for e in body["events"] if e["kind"] == "system"]
    assert codes[0] == "conversation_summary_failed"
    assert "could not be summarised (model_error); its oldest turns were left out" in body["events"][1]["body"]["text"]
    assert not ConversationSummary.objects.exists()
    sent = conversation_of(turn_requests(chat_standin)[-1])
    assert messages_tokens(sent, token_counter("error-500")) <= 1024
    texts = [m["content"] for m in sent]
    assert "question 39 about the fleet" in texts  # the newest stay
    assert "question 00 about the fleet" not in texts  # the oldest are left out, not summarised or made up
    assert not any(t.startswith(SUMMARY_LABEL) for t in texts)


def test_the_deterministic_summary_is_a_plain_list_cut_to_its_budget(cast, session):
    scope = scope_of(cast.owner, cast.acme, Channel.CLI)
    for n in range(60):
        turn_handle(scope=scope, session_id=str(session.pk), text=f"deterministic question {n:02d}")
    conversation = conversation_build(session=session, adapter=DeterministicAdapter(), budget=1024)
    assert conversation.summary is not None and conversation.tokens <= 1024
    lines = conversation.summary.text.splitlines()
    assert estimate_tokens(conversation.summary.text) <= 1024 // 4
    assert all(line.startswith(("- Operator: deterministic question", "- Tess: ")) for line in lines)
    # Cut from the oldest end: the last summarised turn is there, the first is not.
    assert "- Operator: deterministic question 00" not in lines
    assert conversation.messages[0]["content"].startswith(SUMMARY_LABEL)


def test_production_refuses_a_conversation_budget_out_of_range():
    problems = production_problems({"TESS_CONVERSATION_TOKENS": "12"})
    assert any(p.startswith("TESS_CONVERSATION_TOKENS (an integer from 1024") for p in problems)
    problems = production_problems({"TESS_CONVERSATION_TOKENS": "32000"})
    assert not any(p.startswith("TESS_CONVERSATION_TOKENS") for p in problems)
