"""A daphne that answers turns itself, with a chat-completions stand-in as its model (the tests of streamed
replies, Stop and ``tess ask`` share it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.providers_app.chat_standin import ChatStandIn
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for


@contextmanager
def answering_daphne(
    start_child: Callable[..., Child], model: ChatStandIn, *, timeout_seconds: int = 30
) -> Iterator[tuple[int, Child]]:
    """``(port, child)`` of a daphne whose model is ``model`` (started here, stopped after)."""
    model.start()
    try:
        port = free_port()
        env = child_env(
            TESS_MODEL_ADAPTER="openai_compatible",
            TESS_MODEL="drip",
            TESS_MODEL_BASE_URL=model.base_url,
            TESS_MODEL_API_KEY="not-a-real-key",
            TESS_MODEL_TIMEOUT_SECONDS=str(timeout_seconds),
        )
        cmd = [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"]
        child = start_child("daphne-answering", cmd, env)
        if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30) or not child.alive():
            pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
        yield port, child
    finally:
        model.stop()
