"""Capture redacts before persistence: no secret or customer data shape reaches an adapter."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.plugin.contract import Capabilities, CaptureInput, MemoryRecord, Namespace
from memory_app.plugin.models import OperationalMemoryRecord
from memory_app.plugin.registry import _factories, register_operator_memory_adapter

SECRETS = {
    "api_key": "sk-live0123456789abcdefABCDEF",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "url_password": "hunter2secret",
    "private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    "email": "jane.customer@example.com",
    "member": "mem_88213x",
}
TEXT = (
    f"called api with {SECRETS['api_key']} and header Authorization: {SECRETS['bearer']}; "
    f"db at postgres://admin:{SECRETS['url_password']}@db.internal/app; "
    f"key -----BEGIN RSA PRIVATE KEY-----\n{SECRETS['private_key']}\n-----END RSA PRIVATE KEY----- "
    f"customer {SECRETS['email']} member {SECRETS['member']}"
)


class SpyAdapter:
    kind = "spy"
    seen: list[CaptureInput] = []

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        self.name = name

    def capabilities(self) -> Capabilities:
        return Capabilities(delete=False, ranked_search=False, counts=False)

    def capture(self, item: CaptureInput) -> MemoryRecord:
        SpyAdapter.seen.append(item)
        return MemoryRecord(
            id="1", text=item.text, namespace=item.namespace, source=item.source, channel=item.channel,
            captured_at=item.captured_at, correlation_id=item.correlation_id, adapter_kind=self.kind,
            adapter_instance=self.name,
        )  # fmt: skip

    def search(self, namespace: Namespace, query: str, limit: int) -> list[MemoryRecord]:
        return []

    def recent(self, namespace: Namespace, limit: int) -> list[MemoryRecord]:
        return []

    def count(self, namespace: Namespace) -> int | None:
        return None

    def delete(self, namespace: Namespace, record_id: str) -> None:
        return None


@pytest.fixture
def spy():
    SpyAdapter.seen = []
    register_operator_memory_adapter("spy", SpyAdapter)
    yield SpyAdapter
    _factories.pop("spy", None)


def test_redacted_content_never_reaches_an_adapter(spy, make_plugin, session_scope):
    result = make_plugin(kind="spy").capture(session_scope(), source="session.ended", text=TEXT)
    [item] = spy.seen
    for secret in SECRETS.values():
        assert secret not in item.text
    assert "[redacted:api_key]" in item.text
    assert result.redactions == {
        "private_key": 1,
        "url_password": 1,
        "bearer_token": 1,
        "api_key": 1,
        "customer_data": 2,
    }
    assert result.redaction_count == 6


def test_the_orm_adapter_stores_only_redacted_text(make_plugin, session_scope):
    make_plugin().capture(session_scope(), source="session.ended", text=TEXT)
    stored = OperationalMemoryRecord.objects.get().text
    for secret in SECRETS.values():
        assert secret not in stored


def test_redaction_patterns_are_configurable(spy, make_plugin, session_scope, settings):
    settings.TESS_MEMORY_REDACTION_PATTERNS = {"ticket": r"TICKET-\d+"}
    result = make_plugin(kind="spy").capture(session_scope(), source="checkpoint", text="see TICKET-4411 now")
    assert spy.seen[0].text == "see [redacted:ticket] now"
    assert result.redactions == {"ticket": 1}


def test_plain_text_is_left_alone(spy, make_plugin, session_scope):
    result = make_plugin(kind="spy").capture(session_scope(), source="checkpoint", text="member-facing docs updated")
    assert spy.seen[0].text == "member-facing docs updated"
    assert result.redactions == {}
