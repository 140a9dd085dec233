"""Fixtures of the operational-memory plugin tests: plugins built from config, and a live plast-mem stand-in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory_app.plugin.registry import create_operator_memory_plugin, reset_plugins
from tess_site.scope import Scope
from tests.conftest import scope_of
from tests.memory_app.plastmem_standin import PlastMemStandIn


@pytest.fixture
def plastmem() -> Iterator[PlastMemStandIn]:
    server = PlastMemStandIn().start()
    yield server
    server.stop()


@pytest.fixture
def make_plugin() -> Callable[..., Any]:
    def make(name: str = "default", kind: str = "orm", **config: Any) -> Any:
        return create_operator_memory_plugin({"name": name, "kind": kind, **config})

    return make


@pytest.fixture
def session_scope(cast) -> Callable[..., Scope]:
    def make(user=None, tenant=None, session: str = "sess-1", correlation_id: str = "corr-1") -> Scope:
        base = scope_of(user or cast.owner, tenant or cast.acme, correlation_id=correlation_id)
        return base.for_session(session)

    return make


@pytest.fixture(autouse=True)
def _fresh_plugins() -> Iterator[None]:
    reset_plugins()
    yield
    reset_plugins()
