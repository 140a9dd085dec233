"""Model-completion adapters: what phrases Tess's answers. Separate from runtime providers (``contract``).

A model phrases; it never grants authority (the gateway's deterministic classifier decides what a turn
may do before any adapter runs) and it never writes operator memory. Adapters register by name
(``register_model_adapter``); ``TESS_MODEL_ADAPTER`` picks the configured one:

- ``deterministic`` (the embedded default): no model at all. It answers from the live state in the
  request and, when it is the configured adapter, may use recalled notes (it names the standing initiative).
- ``openai_compatible``: the chat-completions protocol (``chat_completions``) against any compatible base URL
  (``TESS_MODEL_BASE_URL``), model ``TESS_MODEL`` (default ``gpt-5.6-sol``), reasoning effort
  ``TESS_REASONING_LEVEL`` (default ``high``), ``TESS_MODEL_TIMEOUT_SECONDS``, streamed or not
  (``TESS_MODEL_STREAM``). Failures are typed: ``model_timeout``, ``model_unavailable``, ``model_error``.
- ``pi`` (``pi_model.py``, registered by ``wiring``): the same endpoint and settings through
  ``pi --mode rpc --no-tools``, one pi session file per Tess session, as seed 001 deploys Tess.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from django.conf import settings
from rest_framework import status

from tess_site.errors import TessError

from .chat_completions import ChatClient, ChatError, ChatStatus, ChatTimeout, ChatUnavailable
from .http_cancel import CancelEvent, cancellable_call

# --- typed errors ------------------------------------------------------------------------------------


class ModelError(TessError):
    code = "model_error"
    status_code: int = status.HTTP_502_BAD_GATEWAY
    default_message = "The model failed to answer."
    # What the failed call had consumed when the model had already started answering (reported, or estimated);
    # None when it was refused before answering.
    usage: ModelUsage | None = None


class ModelTimeout(ModelError):
    code = "model_timeout"
    status_code = status.HTTP_504_GATEWAY_TIMEOUT
    default_message = "The model did not answer in time."


class ModelUnavailable(ModelError):
    code = "model_unavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_message = "The model endpoint cannot be reached."


class ModelStopped(ModelError):
    """The turn was stopped while the model was answering: the call was cancelled (its connection closed, or
    the runtime told to abort). ``text`` is what the model had produced by then, ``usage`` what it reported."""

    code = "model_stopped"
    status_code = status.HTTP_409_CONFLICT
    default_message = "The reply was stopped."

    def __init__(self, text: str = "", *, usage: ModelUsage | None = None) -> None:
        super().__init__(details={"chars": len(text)})
        self.text = text
        self.usage = usage


class ModelAdapterUnknown(ModelError):
    code = "model_adapter_unknown"
    status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
    default_message = "No model adapter is registered under that name."


# --- what an adapter is given and returns ----------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """The assembled prompt: a stable prefix (policy only), the session's conversation so far, a dynamic
    section, then the operator's text.

    ``conversation`` is chat messages, oldest first: a labelled summary of the earlier conversation (when
    there is one), the earlier turns as ``user`` / ``assistant`` messages and short ``system`` lines for what
    happened between them."""

    stable_prefix: str
    dynamic: str
    user_text: str
    conversation: tuple[dict[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        # The stable prefix is its own first message so providers can cache it across turns and operators;
        # the conversation follows it, since it only grows at its end between turns (or is summarised), so the
        # cached prefix reaches into it. The dynamic section changes every turn and comes last, beside the text.
        messages = [{"role": "system", "content": self.stable_prefix}]
        messages.extend(self.conversation)
        if self.dynamic:
            messages.append({"role": "system", "content": self.dynamic})
        messages.append({"role": "user", "content": self.user_text})
        return messages


# The intent of a request to summarise the earlier conversation (its text: the transcript to summarise).
SUMMARY_INTENT = "summary"


@dataclass(frozen=True)
class ModelUsage:
    """What one model call consumed, as the model API (or runtime) reported it, or estimated when it did not
    (``source`` ``estimated``). ``cost`` only when the source reported one (else the ledger prices it)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost: Decimal | None = None
    currency: str = "USD"
    source: str = "reported"


@dataclass(frozen=True)
class ModelRequest:
    """One answer to phrase. ``intent`` is the classifier's class (``conversation``, ``status``,
    ``diagnostics``), or ``summary`` for a summary of the earlier conversation; ``live`` is the authoritative
    state the answer must rest on; ``standing_initiative`` is the operator's recalled initiative, or empty when
    memory was not read or must not ground the answer."""

    prompt: Prompt
    intent: str
    live: dict[str, Any] = field(default_factory=dict)
    standing_initiative: str = ""
    # A retrieval turn's findings, each with where it came from (the deterministic adapter says them as they are;
    # a model reads the labelled records in the prompt's dynamic section).
    found: str = ""
    # Called with each piece of the answer as the model produces it (a streaming adapter only); never raises.
    on_delta: Callable[[str], None] | None = field(default=None, compare=False)
    # Set when the turn is stopped: the adapter ends the model call promptly and raises ``ModelStopped``.
    cancel: CancelEvent | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ModelReply:
    text: str
    adapter: str
    model: str
    usage: ModelUsage | None = None  # None: the adapter reports no usage (the deterministic one)


class ModelAdapter(Protocol):
    name: str

    def complete(self, request: ModelRequest) -> ModelReply:
        """Phrase an answer; raise a ``ModelError`` subclass on failure."""


AdapterFactory = Callable[[], ModelAdapter]
_factories: dict[str, AdapterFactory] = {}


def register_model_adapter(name: str, factory: AdapterFactory) -> None:
    _factories[name] = factory


def registered_model_adapters() -> list[str]:
    return sorted(_factories)


def get_model_adapter(name: str | None = None) -> ModelAdapter:
    """The adapter ``name`` (default: ``TESS_MODEL_ADAPTER``), built from the current settings."""
    chosen = name or settings.TESS_MODEL_ADAPTER
    factory = _factories.get(chosen)
    if factory is None:
        raise ModelAdapterUnknown(details={"adapter": chosen})
    return factory()


# --- deterministic ------------------------------------------------------------------------------------------

CAPABILITIES_LINE = (
    "I can report this session's status from its runtime, run safe diagnostics, park memory cards when you "
    'say "remember …", "forget …" or "correct …", hand coding work (fix, implement, review, merge) to Mos, '
    "and ask an approver before terminating a session."
)


def _session_line(live: dict[str, Any]) -> str:
    session = live.get("session") or {}
    if not session:
        return ""
    return (
        f"Session “{session.get('title', '')}” on {session.get('provider_instance', '?')} is "
        f"{session.get('status', 'unknown')}."
    )


def _runtime_line(live: dict[str, Any]) -> str:
    runtime = live.get("runtime")
    if not runtime:
        return ""
    if runtime.get("error"):
        return f"The runtime provider could not be read ({runtime['error']}); I am not guessing its state."
    parts = [f"The runtime reports {runtime.get('status', 'unknown')}"]
    if runtime.get("last_activity_at"):
        parts.append(f", last activity {runtime['last_activity_at']}")
    return "".join(parts) + "."


def _diagnostics_line(live: dict[str, Any]) -> str:
    diag = live.get("diagnostics")
    if not diag:
        return ""
    health = "healthy" if diag.get("healthy") else "unhealthy"
    operations = ", ".join(diag.get("operations", [])) or "none"
    return f"Provider {diag.get('kind', '?')} {diag.get('instance', '?')} is {health}; it supports: {operations}."


class DeterministicAdapter:
    """Answers from live state with no model: the same request always gives the same words."""

    name = "deterministic"

    def complete(self, request: ModelRequest) -> ModelReply:
        if request.intent == SUMMARY_INTENT:
            # A plain list of the earlier turns (the caller cuts it to its budget).
            return ModelReply(text=request.prompt.user_text, adapter=self.name, model="tess-deterministic")
        live = request.live
        if request.intent == "retrieval":
            return ModelReply(text=request.found, adapter=self.name, model="tess-deterministic")
        lines = [_session_line(live)]
        if request.intent == "status":
            lines.append(_runtime_line(live))
        elif request.intent == "diagnostics":
            lines.append(_runtime_line(live))
            lines.append(_diagnostics_line(live))
        else:
            lines.append(CAPABILITIES_LINE)
        if request.standing_initiative:
            lines.append(f"Your standing initiative (from your notes): {request.standing_initiative}")
        text = " ".join(line for line in lines if line)
        return ModelReply(text=text, adapter=self.name, model="tess-deterministic")


# --- openai_compatible ------------------------------------------------------------------------------------


class _StopNow(Exception):
    """Raised out of the stream's loop when the turn was stopped between two pieces."""


# One chat-completions client per endpoint and process (``OpenAICompatibleAdapter._client``).
_CLIENTS: dict[tuple[str | None, str | None, float], ChatClient] = {}
_CLIENTS_LOCK = threading.Lock()


class OpenAICompatibleAdapter:
    """Chat completions (``providers_app/chat_completions.py``) against any compatible base URL."""

    name = "openai_compatible"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        reasoning_effort: str,
        timeout: float,
        stream: bool,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.reasoning_effort = reasoning_effort
        self.timeout = timeout
        self.stream = stream

    @classmethod
    def from_settings(cls) -> OpenAICompatibleAdapter:
        return cls(
            base_url=settings.TESS_MODEL_BASE_URL,
            api_key=settings.TESS_MODEL_API_KEY,
            model=settings.TESS_MODEL or "gpt-5.6-sol",
            reasoning_effort=settings.TESS_REASONING_LEVEL,
            timeout=float(settings.TESS_MODEL_TIMEOUT_SECONDS),
            stream=settings.TESS_MODEL_STREAM,
        )

    def _client(self) -> ChatClient:
        """The process's client for this endpoint, made once: it keeps a pool of connections that every thread
        shares, and making one (its TLS context) costs about as much CPU as the rest of a turn. No retries: the
        gateway falls back at once instead of keeping the operator waiting."""
        key = (self.base_url, self.api_key, self.timeout)
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = ChatClient(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout)
        return client

    def complete(self, request: ModelRequest) -> ModelReply:
        arguments: dict[str, Any] = {"model": self.model, "messages": request.prompt.messages()}
        if self.reasoning_effort != "none":
            arguments["reasoning_effort"] = self.reasoning_effort
        # What has been handed on so far and what the model reported, kept for a stop or a failure; a stop seen
        # between pieces ends the stream here, one seen while the model is silent shuts its connection down
        # (``cancellable_call``).
        progress = _Progress(arguments["messages"])

        def relay(piece: str) -> None:
            if request.on_delta is not None:
                request.on_delta(piece)
            if request.cancel is not None and request.cancel.is_set():
                raise _StopNow()

        try:
            client = self._client()
            try:
                with cancellable_call(request.cancel) as call:
                    if request.cancel is not None and request.cancel.is_set():
                        raise _StopNow()
                    if self.stream:
                        text, usage = self._streamed(client, arguments, relay, progress)
                    else:
                        text, usage = self._whole(client, arguments)
            except (_StopNow, ChatError) as exc:
                if request.cancel is not None and request.cancel.is_set():
                    raise progress.stopped() from exc
                raise
            if call.cancelled:  # the shut-down connection read as the stream's end
                raise progress.stopped()
        except ChatTimeout as exc:
            raise progress.spent(ModelTimeout(details={"adapter": self.name})) from exc
        except ChatUnavailable as exc:  # refused, or a stream broken mid-way
            raise progress.spent(ModelUnavailable(details={"adapter": self.name})) from exc
        except ChatStatus as exc:
            raise ModelError(
                f"The model endpoint answered with status {exc.status}.",
                details={"adapter": self.name, "status": exc.status},
            ) from exc
        except ChatError as exc:
            error = ModelError(details={"adapter": self.name, "error": type(exc).__name__})
            raise progress.spent(error) from exc
        if not text.strip():
            raise ModelError("The model returned an empty answer.", details={"adapter": self.name})
        return ModelReply(text=text, adapter=self.name, model=self.model, usage=usage)

    @staticmethod
    def _whole(client: ChatClient, arguments: dict[str, Any]) -> tuple[str, ModelUsage | None]:
        completion = client.complete(arguments)
        usage = usage_reported(completion.get("usage"))
        choices = completion.get("choices") or []
        if not choices:
            return "", usage
        return _text(choices[0].get("message")), usage

    @staticmethod
    def _streamed(
        client: ChatClient, arguments: dict[str, Any], on_delta: Callable[[str], None] | None, progress: _Progress
    ) -> tuple[str, ModelUsage | None]:
        # Streamed usage comes in a last chunk with no choices, only when asked for.
        for chunk in client.stream({**arguments, "stream_options": {"include_usage": True}}):
            progress.usage = usage_reported(chunk.get("usage")) or progress.usage
            for choice in chunk.get("choices") or []:
                piece = _text(choice.get("delta"))
                if piece:
                    progress.parts.append(piece)
                    if on_delta is not None:
                        on_delta(piece)
        return "".join(progress.parts), progress.usage


def _text(message: Any) -> str:
    """A message's or a delta's ``content``, when it is text."""
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


@dataclass
class _Progress:
    """How far a streamed call got: what a call that fails half-way had consumed."""

    messages: list[dict[str, str]]
    parts: list[str] = field(default_factory=list)
    usage: ModelUsage | None = None

    def spent(self, error: ModelError) -> ModelError:
        """``error``, with the usage the model reported, or an estimate once it had started answering."""
        if self.usage is not None:
            error.usage = self.usage
        elif self.parts:
            error.usage = usage_estimate(self.messages, "".join(self.parts))
        return error

    def stopped(self) -> ModelStopped:
        """The stop of a call that had handed on ``parts``, with what it had consumed (as ``spent``)."""
        stop = ModelStopped("".join(self.parts))
        self.spent(stop)
        return stop


def usage_estimate(messages: list[dict[str, str]], text: str) -> ModelUsage:
    """A call's usage when the model reported none: about four characters a token (the usual rule of thumb
    for English text and code), marked ``estimated``."""
    prompt_chars = sum(len(m.get("content") or "") for m in messages)
    return ModelUsage(input_tokens=-(-prompt_chars // 4), output_tokens=-(-len(text) // 4), source="estimated")


def usage_reported(usage: Any) -> ModelUsage | None:
    """A chat completion's ``usage`` object (prompt, completion, cached and reasoning tokens) as ``ModelUsage``.

    ``prompt_tokens`` includes the cached ones, which are billed apart: they are split out as cache reads.
    Reasoning tokens are part of ``completion_tokens`` already and are kept only for the record."""
    if not isinstance(usage, dict):
        return None
    prompt = _count(usage, "prompt_tokens")
    completion = _count(usage, "completion_tokens")
    cached = _count(usage.get("prompt_tokens_details"), "cached_tokens")
    reasoning = _count(usage.get("completion_tokens_details"), "reasoning_tokens")
    return ModelUsage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=completion,
        cache_read_tokens=min(cached, prompt),
        reasoning_tokens=reasoning,
    )


def _count(found: Any, name: str) -> int:
    value = found.get(name) if isinstance(found, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


register_model_adapter(DeterministicAdapter.name, DeterministicAdapter)
register_model_adapter(OpenAICompatibleAdapter.name, OpenAICompatibleAdapter.from_settings)
