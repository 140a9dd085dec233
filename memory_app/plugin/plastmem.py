"""The ``plastmem`` adapter: operational memory kept by a plast-mem server (v0 HTTP API).

The owner's namespace (instance name, tenant, owner) is folded into one deterministic ``conversation_id``
(``memory_app.plastmem_client.conversation_id``), so search and recent read the owner's records across
their sessions; the session, source, channel, correlation id and capture time travel in a labelled header
of each message and are read back as provenance. plast-mem segments and consolidates messages on its own
schedule, so a capture becomes searchable only once plast-mem has made an episode of it. It has no delete
route: ``capabilities().delete`` is false and ``delete`` raises ``DeleteUnsupported``.

Config: ``{"kind": "plastmem", "url": "http://plast-mem:3000", "timeout": 5}``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from ..plastmem_client import PlastMemClient, PlastMemError, PlastMemUnreachable, conversation_id, millis
from .contract import AdapterUnavailable, Capabilities, CaptureInput, DeleteUnsupported, MemoryRecord, Namespace

HEADER = "[operational memory record]"
SEPARATOR = "---"
ROLE = "system"


def render(item: CaptureInput, record_id: str) -> str:
    ns = item.namespace
    lines = [
        HEADER,
        f"id: {record_id}",
        f"source: {item.source}",
        f"channel: {item.channel}",
        f"session: {ns.session}",
        f"correlation: {item.correlation_id}",
        f"captured: {item.captured_at.isoformat()}",
        SEPARATOR,
        item.text,
    ]
    return "\n".join(lines)


def parse(content: str) -> tuple[dict[str, str], str] | None:
    """The header fields and text of a message Tess wrote, or ``None`` for anything else."""
    if not content.startswith(HEADER + "\n") or f"\n{SEPARATOR}\n" not in content:
        return None
    head, text = content[len(HEADER) + 1 :].split(f"\n{SEPARATOR}\n", 1)
    fields = {}
    for line in head.splitlines():
        key, _, value = line.partition(": ")
        fields[key] = value
    return fields, text


class PlastMemAdapter:
    kind = "plastmem"

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        self.name = name
        url = str(config.get("url") or "")
        if not url:
            raise ValueError(f"plastmem instance {name!r} needs a url")
        self.client = PlastMemClient(base_url=url, timeout=float(config.get("timeout", 5)))

    def capabilities(self) -> Capabilities:
        return Capabilities(delete=False, ranked_search=True, counts=False)

    def conversation(self, namespace: Namespace) -> uuid.UUID:
        return conversation_id("operational-memory", self.name, namespace.tenant, namespace.owner)

    def capture(self, item: CaptureInput) -> MemoryRecord:
        record_id = str(uuid.uuid4())
        owner_ns = Namespace(tenant=item.namespace.tenant, owner=item.namespace.owner)
        try:
            self.client.add_message(
                self.conversation(owner_ns),
                role=ROLE,
                content=render(item, record_id),
                timestamp_ms=millis(item.captured_at),
            )
        except (PlastMemError, PlastMemUnreachable) as exc:
            raise AdapterUnavailable(details={"adapter_instance": self.name}) from exc
        return MemoryRecord(
            id=record_id,
            text=item.text,
            namespace=item.namespace,
            source=item.source,
            channel=item.channel,
            captured_at=item.captured_at,
            correlation_id=item.correlation_id,
            adapter_kind=self.kind,
            adapter_instance=self.name,
        )

    def search(self, namespace: Namespace, query: str, limit: int) -> list[MemoryRecord]:
        try:
            data = self.client.retrieve_memory_raw(self.conversation(namespace), query=query, limit=limit)
        except (PlastMemError, PlastMemUnreachable) as exc:
            raise AdapterUnavailable(details={"adapter_instance": self.name}) from exc
        records = []
        for episode in data.get("episodic", []):
            records += self._from_episode(namespace, episode, score=float(episode.get("score", 0.0)))
        return records[:limit]

    def recent(self, namespace: Namespace, limit: int) -> list[MemoryRecord]:
        try:
            episodes = self.client.recent_memory_raw(self.conversation(namespace), limit=limit)
        except (PlastMemError, PlastMemUnreachable) as exc:
            raise AdapterUnavailable(details={"adapter_instance": self.name}) from exc
        records = []
        for episode in episodes:
            records += self._from_episode(namespace, episode, score=None)
        records.sort(key=lambda r: r.captured_at.timestamp() if r.captured_at else 0.0, reverse=True)
        return records[:limit]

    def count(self, namespace: Namespace) -> int | None:
        return None  # plast-mem has no count route

    def delete(self, namespace: Namespace, record_id: str) -> None:
        raise DeleteUnsupported(details={"adapter_kind": self.kind, "adapter_instance": self.name})

    def _from_episode(self, namespace: Namespace, episode: dict[str, Any], score: float | None) -> list[MemoryRecord]:
        records = []
        for message in episode.get("messages", []):
            parsed = parse(str(message.get("content", "")))
            if parsed is None:
                continue
            fields, text = parsed
            records.append(
                MemoryRecord(
                    id=fields.get("id", ""),
                    text=text,
                    namespace=Namespace(tenant=namespace.tenant, owner=namespace.owner, session=fields.get("session")),
                    source=fields.get("source", ""),
                    channel=fields.get("channel", ""),
                    captured_at=_parse_time(fields.get("captured")),
                    correlation_id=fields.get("correlation", ""),
                    adapter_kind=self.kind,
                    adapter_instance=self.name,
                    score=score,
                )
            )
        return records


def _parse_time(raw: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(raw) if raw else None
    except ValueError:
        return None
