"""The stand-in itself answers like plast-mem's documented v0 routes (so tests against it mean something)."""

from __future__ import annotations

import uuid

import httpx


def test_errors_are_plain_text_not_json(plastmem):
    response = httpx.post(f"{plastmem.url}/api/v0/add_message", json={"message": {"role": "user", "content": "x"}})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("text/plain")


def test_a_malformed_body_is_400_and_a_missing_content_type_415(plastmem):
    url = f"{plastmem.url}/api/v0/import_batch_messages"
    assert httpx.post(url, content=b"{", headers={"Content-Type": "application/json"}).status_code == 400
    assert httpx.post(url, content=b"{}").status_code == 415


def test_recent_memory_is_newest_first_and_clamped(plastmem):
    conv = str(uuid.uuid4())
    messages = [{"role": "user", "content": f"m{n}", "timestamp": 1_000 * n} for n in range(1, 4)]
    httpx.post(f"{plastmem.url}/api/v0/import_batch_messages", json={"conversation_id": conv, "messages": messages})
    body = httpx.post(f"{plastmem.url}/api/v0/recent_memory/raw", json={"conversation_id": conv, "limit": 0}).json()
    assert [e["content"] for e in body] == ["m3"]
    body = httpx.post(f"{plastmem.url}/api/v0/recent_memory/raw", json={"conversation_id": conv}).json()
    assert [e["content"] for e in body] == ["m3", "m2", "m1"]


def test_an_empty_message_in_a_batch_rejects_the_whole_batch_with_500(plastmem):
    conv = str(uuid.uuid4())
    messages = [{"role": "user", "content": "ok"}, {"role": "user", "content": ""}]
    response = httpx.post(
        f"{plastmem.url}/api/v0/import_batch_messages", json={"conversation_id": conv, "messages": messages}
    )
    assert (response.status_code, response.text) == (500, "Message content cannot be empty")
    assert httpx.post(f"{plastmem.url}/api/v0/recent_memory/raw", json={"conversation_id": conv}).json() == []
