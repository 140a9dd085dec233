"""A stopped turn ends its model call: the OpenAI-compatible adapter closes the connection (the local
chat-completions stand-in, over real HTTP, sees it closed) and raises ``ModelStopped`` with the text so far,
whether the model was mid-stream or still silent before its first byte."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from providers_app.http_cancel import CancelEvent
from providers_app.model_adapters import ModelRequest, ModelStopped, OpenAICompatibleAdapter, Prompt
from tests.providers_app.chat_standin import ChatStandIn
from tests.waiting import wait_for


@pytest.fixture
def standin() -> Iterator[ChatStandIn]:
    server = ChatStandIn(drip_seconds=0.2).start()
    try:
        yield server
    finally:
        server.release.set()
        server.stop()


def _adapter(standin: ChatStandIn, model: str, *, stream: bool = True) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter(
        base_url=standin.base_url, api_key="k", model=model, reasoning_effort="none", timeout=30, stream=stream
    )


def _request(
    text: str, *, on_delta: Callable[[str], None] | None = None, cancel: CancelEvent | None = None
) -> ModelRequest:
    prompt = Prompt(stable_prefix="policy", dynamic="", user_text=text)
    return ModelRequest(prompt=prompt, intent="conversation", on_delta=on_delta, cancel=cancel)


def _cancel_once_asked(standin: ChatStandIn, cancel: CancelEvent, requests: int = 1) -> None:
    """Stop the call once the stand-in holds it (the model is thinking: no byte of the answer yet)."""
    assert wait_for(lambda: len(standin.requests) >= requests, timeout=30)
    time.sleep(0.2)
    cancel.set()


def test_a_stop_mid_stream_closes_the_connection_and_keeps_the_text_so_far(standin):
    cancel = CancelEvent()
    pieces: list[str] = []

    def on_delta(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            threading.Timer(0.05, cancel.set).start()  # stopped while the model is silent between two words

    with pytest.raises(ModelStopped) as stopped:
        _adapter(standin, "drip").complete(
            _request("tell me about every session in the fleet today", on_delta=on_delta, cancel=cancel)
        )
    assert stopped.value.code == "model_stopped"
    assert stopped.value.text == "".join(pieces) == "stand-in answer "
    assert standin.closed_event.wait(10)  # the stand-in saw its connection closed
    assert not standin.finished.is_set()


def test_a_stop_before_the_first_byte_closes_a_kept_alive_connection_too(standin):
    adapter = _adapter(standin, "held", stream=True)
    standin.release.set()
    adapter.complete(_request("warm the connection"))  # one call first: the next reuses its connection
    standin.release.clear()
    cancel = CancelEvent()
    threading.Thread(target=_cancel_once_asked, args=(standin, cancel, 2), daemon=True).start()
    started = time.monotonic()
    with pytest.raises(ModelStopped) as stopped:
        adapter.complete(_request("think hard", cancel=cancel))
    assert stopped.value.text == ""
    assert time.monotonic() - started < 30  # ended by the stop, not by the 30 s timeout nor the stand-in
    assert standin.closed_event.wait(10)
    assert not standin.release.is_set()


def test_a_stop_ends_an_unstreamed_call_as_well(standin):
    cancel = CancelEvent()
    threading.Thread(target=_cancel_once_asked, args=(standin, cancel), daemon=True).start()
    with pytest.raises(ModelStopped):
        _adapter(standin, "held", stream=False).complete(_request("think hard", cancel=cancel))
    assert standin.closed_event.wait(10)


def test_an_unstopped_call_answers_whole(standin):
    reply = _adapter(standin, "drip").complete(_request("hello there", cancel=CancelEvent()))
    assert reply.text == "stand-in answer to: hello there"
    assert standin.closed == 0


def test_a_cancel_event_calls_back_once_when_set_and_not_after_it_is_forgotten():
    event, calls = CancelEvent(), []
    forget = event.when_set(lambda: calls.append("kept"))
    event.when_set(lambda: calls.append("also kept"))
    event.when_set(lambda: calls.append("forgotten"))()  # the call ended before the stop
    assert calls == []
    event.set()
    event.set()
    assert calls == ["kept", "also kept"] and event.is_set()
    forget()  # forgetting after the call back is harmless
    event.when_set(lambda: calls.append("late"))  # asked after the stop: called at once
    assert calls == ["kept", "also kept", "late"]
