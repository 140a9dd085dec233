"""Tess's own model turns in the usage ledger: the openai_compatible adapter against the local chat stand-in
over real HTTP, plain and streamed; a refused call records nothing; a broken stream records an estimate; and
the Prometheus counters move with the rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings

from sessions_app import services
from sessions_app.gateway_prompt import STABLE_PREFIX
from sessions_app.models import Session, UsageRecord
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory
from tests.providers_app.chat_standin import ChatStandIn, running_chat_standin, usage_of
from tests.tess_site.test_metrics import scrape, value

pytestmark = pytest.mark.django_db

PRICES = {"gpt-priced": {"input": "2", "output": "8", "cache_read": "0.5", "cache_write": "1", "currency": "EUR"}}


@pytest.fixture
def chat_standin() -> Iterator[ChatStandIn]:
    with running_chat_standin() as standin:
        yield standin


@pytest.fixture
def session(cast: Cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme)


def model_settings(standin: ChatStandIn, model: str, *, stream: bool) -> dict[str, Any]:
    return {
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": model,
        "TESS_MODEL_BASE_URL": standin.base_url,
        "TESS_MODEL_TIMEOUT_SECONDS": 5,
        "TESS_MODEL_STREAM": stream,
        "TESS_MODEL_PRICES": PRICES,
    }


def turn(client: Any, session: Session, text: str) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"text": text},
        format="json",
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_model_turn_is_one_ledger_row_priced_from_the_table(cast, api_as, session, chat_standin, stream):
    with override_settings(**model_settings(chat_standin, "gpt-priced", stream=stream)):
        body = turn(api_as(cast.owner), session, "how is the queue?")
    reported = usage_of(chat_standin.requests[-1]["body"], body["reply"])
    cached = reported["prompt_tokens_details"]["cached_tokens"]
    [row] = UsageRecord.objects.filter(session=session)
    assert row.source_ref == f"turn:{body['turn_id']}"
    assert (row.operator, row.provider_instance, row.model) == (cast.owner, "openai_compatible", "gpt-priced")
    assert (row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens) == (
        reported["prompt_tokens"] - cached,
        reported["completion_tokens"],
        cached,
        0,
    )
    expected = (Decimal(row.input_tokens) * 2 + Decimal(row.output_tokens) * 8 + Decimal(cached) / 2) / 1_000_000
    assert (row.cost, row.currency, row.cost_source) == (expected, "EUR", "priced")


def test_the_turn_s_actor_is_the_operator_of_its_row(cast, api_as, session, chat_standin):
    services.session_grant(
        scope=scope_of(cast.owner, cast.acme), session_id=session.pk, grantee=cast.teammate, operate=True
    )
    with override_settings(**model_settings(chat_standin, "gpt-priced", stream=True)):
        turn(api_as(cast.teammate), session, "what is it doing?")
    assert list(UsageRecord.objects.filter(session=session).values_list("operator__username", flat=True)) == [
        "teammate"
    ]


def test_a_model_without_a_price_is_unpriced_never_free(cast, api_as, session, chat_standin):
    with override_settings(**model_settings(chat_standin, "gpt-nowhere", stream=True)):
        turn(api_as(cast.owner), session, "anything new?")
    [row] = UsageRecord.objects.filter(session=session)
    assert (row.cost, row.currency, row.cost_source) == (None, "", "unpriced")
    assert row.input_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_refused_before_the_model_answers_records_nothing(cast, api_as, session, chat_standin, stream):
    with override_settings(**model_settings(chat_standin, "error-503", stream=stream)):
        body = turn(api_as(cast.owner), session, "status please")
    assert body["events"][-2]["body"]["code"] == "model_fallback"
    assert not UsageRecord.objects.filter(session=session).exists()


def test_a_stream_broken_half_way_records_an_estimated_row(cast, api_as, session, chat_standin):
    with override_settings(**{**model_settings(chat_standin, "broken", stream=True), "TESS_MODEL_PRICES": {}}):
        turn(api_as(cast.owner), session, "tell me about the build")
    [row] = UsageRecord.objects.filter(session=session)
    sent = chat_standin.requests[-1]["body"]["messages"]
    assert row.input_tokens == -(-sum(len(m["content"]) for m in sent) // 4)
    assert row.output_tokens > 0
    assert row.cost_source == "unpriced"  # estimated tokens, and no price to put on them
    with override_settings(
        **{
            **model_settings(chat_standin, "broken", stream=True),
            "TESS_MODEL_PRICES": {"broken": {"input": "1", "output": "1"}},
        }
    ):
        body = turn(api_as(cast.owner), session, "and the tests?")
    row = UsageRecord.objects.get(session=session, source_ref=f"turn:{body['turn_id']}")
    assert row.cost_source == "estimated"
    assert row.cost == Decimal(row.input_tokens + row.output_tokens) / 1_000_000


def test_a_recorded_turn_moves_the_prometheus_counters(
    cast, api_as, session, chat_standin, django_capture_on_commit_callbacks
):
    labels = {"tenant": "acme", "provider": "openai_compatible", "model": "gpt-priced"}
    before = scrape()
    with (
        override_settings(**model_settings(chat_standin, "gpt-priced", stream=True)),
        django_capture_on_commit_callbacks(execute=True),
    ):
        turn(api_as(cast.owner), session, "how much so far?")
    after = scrape()
    row = UsageRecord.objects.get(session=session)
    for kind in ("input", "output", "cache_read"):
        grown = value(after, "tess_usage_tokens_total", **labels, kind=kind) - value(
            before, "tess_usage_tokens_total", **labels, kind=kind
        )
        assert grown == getattr(row, f"{kind}_tokens")
    cost = value(after, "tess_usage_cost_total", **labels, currency="EUR") - value(
        before, "tess_usage_cost_total", **labels, currency="EUR"
    )
    assert cost == pytest.approx(float(row.cost))


def test_the_session_says_its_agent_s_usage_and_tess_s_turns_apart(cast, api_as, session, chat_standin):
    body = api_as(cast.owner).get(f"/api/v1/sessions/{session.pk}/").json()
    assert body["usage"] == {"agent": {"text": "unknown", "steps": 0, "tokens": None}, "tess": None}
    with override_settings(**model_settings(chat_standin, "gpt-priced", stream=False)):
        turn(api_as(cast.owner), session, "how is it going?")
    row = UsageRecord.objects.get(session=session)
    usage = api_as(cast.owner).get(f"/api/v1/sessions/{session.pk}/").json()["usage"]
    assert usage["agent"]["text"] == "unknown"  # the runtime reports nothing: Tess's turn is not the agent's
    tokens = row.input_tokens + row.output_tokens + row.cache_read_tokens
    assert usage["tess"] == {"text": "< 0.01 EUR", "steps": 1, "tokens": tokens}


def test_a_summary_a_turn_made_is_a_ledger_row_of_its_own(cast, api_as, session, chat_standin):
    client = api_as(cast.owner)
    settings = {**model_settings(chat_standin, "gpt-priced", stream=False), "TESS_CONVERSATION_TOKENS": 1024}
    with override_settings(**settings):
        for n in range(12):
            body = turn(client, session, f"question {n}: " + "about the fleet " * 60)
            if UsageRecord.objects.filter(session=session, source_ref__startswith="summary:").exists():
                break
    [row] = UsageRecord.objects.filter(session=session, source_ref__startswith="summary:")
    assert row.source_ref == f"summary:{body['turn_id']}"
    summaries = [r["body"] for r in chat_standin.requests if r["body"]["messages"][0]["content"] != STABLE_PREFIX]
    assert len(summaries) == 1
    asked = summaries[0]
    reported = usage_of(asked, f"stand-in answer to: {asked['messages'][-1]['content']}")
    assert (row.operator, row.provider_instance, row.model) == (cast.owner, "openai_compatible", "gpt-priced")
    assert row.output_tokens == reported["completion_tokens"] and row.cost_source == "priced"
    # The turn's own answer is its own row beside it.
    assert UsageRecord.objects.filter(session=session, source_ref=f"turn:{body['turn_id']}").exists()
