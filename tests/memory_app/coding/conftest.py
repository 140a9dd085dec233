"""Fixtures of the reviewed coding memory tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory_app.coding.models import CodingMemoryEntry
from memory_app.coding.services import coding_memory_apply, coding_memory_propose_candidate
from tests.conftest import scope_of
from tests.memory_app.plastmem_standin import PlastMemStandIn

WORKSPACE = "acme/payments-api"


@pytest.fixture
def plastmem() -> Iterator[PlastMemStandIn]:
    server = PlastMemStandIn().start()
    yield server
    server.stop()


@pytest.fixture
def candidate(cast) -> Callable[..., CodingMemoryEntry]:
    def make(**overrides: Any) -> CodingMemoryEntry:
        data: dict[str, Any] = {
            "workspace_key": WORKSPACE,
            "kind": "pitfall",
            "statement": "The ledger tests need PGTZ=UTC.",
            "evidence": "run 881 failed with a timezone diff until PGTZ was set",
            "confidence": "high",
            "tags": ["tests", "timezone"],
            "related_files": ["ledger/tests/test_close.py"],
            "source_run_id": "run-881",
        }
        data.update(overrides)
        return coding_memory_propose_candidate(scope_of(cast.owner, cast.acme), **data)

    return make


@pytest.fixture
def active(cast, candidate) -> Callable[..., CodingMemoryEntry]:
    def make(**overrides: Any) -> CodingMemoryEntry:
        entry = candidate(**overrides)
        return coding_memory_apply(scope_of(cast.approver, cast.acme), entry_id=entry.pk, rationale="checked run 881")

    return make
