"""The ``orm`` adapter (the default): rows in PostgreSQL with full-text ranking; LIKE matching on SQLite."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
from django.db import connection
from django.db.models import F, QuerySet

from .contract import Capabilities, CaptureInput, MemoryRecord, Namespace, OperationalMemoryNotFound
from .models import OperationalMemoryRecord

SEARCH_CONFIG = "english"  # must match the GIN index expression of migration 0002


class OrmAdapter:
    kind = "orm"

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        self.name = name

    def capabilities(self) -> Capabilities:
        return Capabilities(delete=True, ranked_search=connection.vendor == "postgresql", counts=True)

    def _owned(self, namespace: Namespace) -> QuerySet[OperationalMemoryRecord]:
        return OperationalMemoryRecord.objects.filter(
            instance=self.name, tenant_id=int(namespace.tenant), owner_id=int(namespace.owner)
        )

    def capture(self, item: CaptureInput) -> MemoryRecord:
        ns = item.namespace
        row = OperationalMemoryRecord.objects.create(
            instance=self.name,
            tenant_id=int(ns.tenant),
            owner_id=int(ns.owner),
            session=ns.session or "",
            source=item.source,
            channel=item.channel,
            correlation_id=item.correlation_id[:64],
            text=item.text,
            captured_at=item.captured_at,
        )
        return self._record(row)

    def search(self, namespace: Namespace, query: str, limit: int) -> list[MemoryRecord]:
        if connection.vendor == "postgresql":
            vector = SearchVector("text", config=SEARCH_CONFIG)
            search = SearchQuery(query, config=SEARCH_CONFIG, search_type="websearch")
            rows = (
                self._owned(namespace)
                .annotate(rank=SearchRank(vector, search), document=vector)
                .filter(document=search)
                .order_by(F("rank").desc(), "-captured_at")[:limit]
            )
            return [self._record(row, score=float(row.rank)) for row in rows]
        return self._search_like(namespace, query, limit)

    def _search_like(self, namespace: Namespace, query: str, limit: int) -> list[MemoryRecord]:
        """SQLite fallback: rows containing any term, ranked by how many distinct terms they contain."""
        terms = sorted({t.casefold() for t in query.split()})[:8]
        if not terms:
            return []
        qs = self._owned(namespace)
        matches = OperationalMemoryRecord.objects.none()
        for term in terms:
            matches = matches | qs.filter(text__icontains=term)
        scored = []
        for row in matches.order_by("-captured_at")[:500]:
            text = row.text.casefold()
            scored.append((sum(1 for t in terms if t in text) / len(terms), row))
        scored.sort(key=lambda pair: (-pair[0], -pair[1].captured_at.timestamp()))
        return [self._record(row, score=score) for score, row in scored[:limit]]

    def recent(self, namespace: Namespace, limit: int) -> list[MemoryRecord]:
        return [self._record(row) for row in self._owned(namespace).order_by("-captured_at")[:limit]]

    def count(self, namespace: Namespace) -> int | None:
        return self._owned(namespace).count()

    def delete(self, namespace: Namespace, record_id: str) -> None:
        try:
            pk = uuid.UUID(str(record_id))
        except ValueError:
            raise OperationalMemoryNotFound() from None
        deleted, _ = self._owned(namespace).filter(pk=pk).delete()
        if not deleted:
            raise OperationalMemoryNotFound()

    def _record(self, row: OperationalMemoryRecord, score: float | None = None) -> MemoryRecord:
        return MemoryRecord(
            id=str(row.id),
            text=row.text,
            namespace=Namespace(tenant=str(row.tenant_id), owner=str(row.owner_id), session=row.session),
            source=row.source,
            channel=row.channel,
            captured_at=row.captured_at,
            correlation_id=row.correlation_id,
            adapter_kind=self.kind,
            adapter_instance=self.name,
            score=score,
        )
