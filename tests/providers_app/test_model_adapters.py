"""Model adapters: the deterministic default, and openai_compatible against a real local HTTP stand-in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from providers_app.model_adapters import (
    DeterministicAdapter,
    ModelAdapterUnknown,
    ModelError,
    ModelRequest,
    ModelTimeout,
    ModelUnavailable,
    ModelUsage,
    OpenAICompatibleAdapter,
    Prompt,
    get_model_adapter,
    registered_model_adapters,
)
from tess_site.settings.derived import model_adapter, model_name, reasoning_level
from tess_site.settings.production import production_problems
from tests.providers_app.chat_standin import ChatStandIn, running_chat_standin, usage_of

PROMPT = Prompt(stable_prefix="policy", dynamic="## Live state\n{}", user_text="how are things?")
LIVE = {"session": {"id": "s1", "title": "work", "status": "running", "provider_instance": "alpha", "last_seq": 4}}


@pytest.fixture
def chat_standin() -> Iterator[ChatStandIn]:
    with running_chat_standin() as standin:
        yield standin


def adapter_for(standin: ChatStandIn, *, model: str = "gpt-5.6-sol", stream: bool = False, timeout: float = 10.0):
    return OpenAICompatibleAdapter(
        base_url=standin.base_url,
        api_key="sk-test",
        model=model,
        reasoning_effort="high",
        timeout=timeout,
        stream=stream,
    )


def test_both_adapters_are_registered_by_name():
    assert {"deterministic", "openai_compatible"} <= set(registered_model_adapters())


def test_the_deterministic_adapter_is_the_default(settings):
    assert settings.TESS_MODEL_ADAPTER == "deterministic"
    assert get_model_adapter().name == "deterministic"


def test_an_unknown_adapter_is_a_typed_error():
    with pytest.raises(ModelAdapterUnknown):
        get_model_adapter("nonesuch")


def test_the_deterministic_adapter_answers_from_live_state_and_names_the_standing_initiative():
    reply = DeterministicAdapter().complete(
        ModelRequest(prompt=PROMPT, intent="conversation", live=LIVE, standing_initiative="EVE Phase 5")
    )
    assert "“work” on alpha is running" in reply.text
    assert "Your standing initiative (from your notes): EVE Phase 5" in reply.text
    assert reply.adapter == "deterministic"


@override_settings(
    TESS_MODEL_ADAPTER="openai_compatible",
    TESS_MODEL="gpt-5.6-sol",
    TESS_REASONING_LEVEL="high",
    TESS_MODEL_BASE_URL="http://127.0.0.1:9/v1",
    TESS_MODEL_TIMEOUT_SECONDS=7,
    TESS_MODEL_STREAM=False,
)
def test_openai_compatible_is_built_from_settings():
    adapter = get_model_adapter()
    assert isinstance(adapter, OpenAICompatibleAdapter)
    assert (adapter.model, adapter.reasoning_effort, adapter.timeout, adapter.stream) == (
        "gpt-5.6-sol",
        "high",
        7.0,
        False,
    )
    assert adapter.base_url == "http://127.0.0.1:9/v1"


def test_it_sends_the_prompt_model_and_reasoning_effort_over_http(chat_standin):
    reply = adapter_for(chat_standin).complete(ModelRequest(prompt=PROMPT, intent="conversation", live=LIVE))
    assert reply.text == "stand-in answer to: how are things?"
    assert (reply.adapter, reply.model) == ("openai_compatible", "gpt-5.6-sol")
    sent = chat_standin.requests[-1]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "gpt-5.6-sol"
    assert sent["body"]["reasoning_effort"] == "high"
    assert sent["body"]["messages"] == [
        {"role": "system", "content": "policy"},
        {"role": "system", "content": "## Live state\n{}"},
        {"role": "user", "content": "how are things?"},
    ]


def test_it_reads_a_streamed_answer(chat_standin):
    reply = adapter_for(chat_standin, stream=True).complete(ModelRequest(prompt=PROMPT, intent="conversation"))
    assert reply.text == "stand-in answer to: how are things?"
    assert chat_standin.requests[-1]["body"]["stream"] is True


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_it_returns_the_usage_the_model_reported(chat_standin, stream):
    reply = adapter_for(chat_standin, stream=stream).complete(ModelRequest(prompt=PROMPT, intent="conversation"))
    sent = chat_standin.requests[-1]["body"]
    reported = usage_of(sent, reply.text)
    if stream:
        assert sent["stream_options"] == {"include_usage": True}
    cached = reported["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0
    assert reply.usage == ModelUsage(
        input_tokens=reported["prompt_tokens"] - cached,
        output_tokens=reported["completion_tokens"],
        cache_read_tokens=cached,
        reasoning_tokens=3,
        source="reported",
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_refused_before_answering_carries_no_usage(chat_standin, stream):
    with pytest.raises(ModelError) as raised:
        adapter_for(chat_standin, model="error-503", stream=stream).complete(
            ModelRequest(prompt=PROMPT, intent="conversation")
        )
    assert raised.value.usage is None


def test_a_stream_broken_half_way_is_unavailable_with_an_estimated_usage(chat_standin):
    with pytest.raises(ModelUnavailable) as raised:
        adapter_for(chat_standin, model="broken", stream=True).complete(
            ModelRequest(prompt=PROMPT, intent="conversation")
        )
    usage = raised.value.usage
    assert usage is not None and usage.source == "estimated"
    prompt_chars = sum(len(m["content"]) for m in chat_standin.requests[-1]["body"]["messages"])
    assert usage.input_tokens == -(-prompt_chars // 4)
    assert 0 < usage.output_tokens < len("stand-in answer to: how are things?") // 4 + 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_error_status_is_a_typed_model_error(chat_standin, stream):
    with pytest.raises(ModelError) as raised:
        adapter_for(chat_standin, model="error-500", stream=stream).complete(
            ModelRequest(prompt=PROMPT, intent="conversation")
        )
    assert raised.value.code == "model_error"
    assert raised.value.details["status"] == 500


def test_a_slow_model_is_a_typed_timeout(chat_standin):
    with pytest.raises(ModelTimeout) as raised:
        adapter_for(chat_standin, model="slow", timeout=0.3).complete(
            ModelRequest(prompt=PROMPT, intent="conversation")
        )
    assert raised.value.code == "model_timeout"


def test_an_unreachable_endpoint_is_typed_unavailable():
    adapter = OpenAICompatibleAdapter(
        base_url="http://127.0.0.1:9/v1", api_key=None, model="m", reasoning_effort="none", timeout=2, stream=False
    )
    with pytest.raises(ModelUnavailable):
        adapter.complete(ModelRequest(prompt=PROMPT, intent="conversation"))


def test_an_empty_answer_is_a_model_error(chat_standin):
    with pytest.raises(ModelError):
        adapter_for(chat_standin, model="empty").complete(ModelRequest(prompt=PROMPT, intent="conversation"))


def test_reasoning_effort_none_is_not_sent(chat_standin):
    adapter = OpenAICompatibleAdapter(
        base_url=chat_standin.base_url, api_key="k", model="m", reasoning_effort="none", timeout=5, stream=False
    )
    adapter.complete(ModelRequest(prompt=PROMPT, intent="conversation"))
    assert "reasoning_effort" not in chat_standin.requests[-1]["body"]


# --- settings: names, defaults and production's refusal ------------------------------------------------------

PROD_BASE = {
    "SECRET_KEY": "k" * 50,
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tess",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "ALLOWED_HOSTS": "tess.example",
}


def _settings_probe(**env: str) -> list[str]:
    return [model_adapter(env), str(model_name(env)), reasoning_level(env)]


def test_openai_compatible_defaults_to_gpt_5_6_sol_with_high_reasoning():
    assert _settings_probe(TESS_MODEL_ADAPTER="openai_compatible") == ["openai_compatible", "gpt-5.6-sol", "high"]


def test_the_earlier_adapter_names_still_mean_the_same_adapters():
    assert _settings_probe(TESS_MODEL_ADAPTER="builtin")[0] == "deterministic"
    assert _settings_probe(TESS_MODEL_ADAPTER="openai")[0] == "openai_compatible"


def test_production_refuses_openai_compatible_without_a_base_url():
    assert "TESS_MODEL_BASE_URL" in " ".join(
        production_problems({"TESS_MODEL_ADAPTER": "openai_compatible", **PROD_BASE})
    )


def test_production_refuses_the_webhook_mos_adapter_without_url_and_secret():
    assert "TESS_MOS_WEBHOOK_SECRET" in " ".join(production_problems({"TESS_MOS_ADAPTER": "webhook", **PROD_BASE}))
