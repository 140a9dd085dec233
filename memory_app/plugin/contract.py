"""The operator-memory plugin contract (seed 000, TESS-MEM-001): types every adapter speaks.

Tess's operational memory of the work: short records captured at lifecycle boundaries (a session ended,
an approval executed, a hand-off completed, a checkpoint after a runtime compacted its context). Never raw
transcripts or tool output, and never the operator's confirmed notes (those reach prompts only through
``memory_app.recall``).

The namespace is derived on the server from the tess ``Scope`` (tenant, actor, session); callers pass a
Scope and can choose neither the namespace nor the adapter. Capture writes into the session's namespace;
search, recent and startup context read the owner's namespace across their sessions in the tenant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from rest_framework import status

from tess_site.errors import InvalidInput, NotFound, TessError, Unsupported
from tess_site.scope import Scope

MAX_CAPTURE_CHARS = 2000


class CaptureNeedsSession(InvalidInput):
    code = "capture_needs_session"
    default_message = "A capture belongs to one session of one operator; this scope names neither."


class OperationalMemoryNotFound(NotFound):
    code = "operational_memory_not_found"
    default_message = "No such operational memory record."


class DeleteUnsupported(Unsupported):
    code = "operational_memory_delete_unsupported"
    default_message = "The configured memory adapter cannot delete records; nothing was deleted."


class AdapterUnavailable(TessError):
    code = "operational_memory_unavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_message = "The operational memory store cannot be reached right now; nothing was changed."


@dataclass(frozen=True, slots=True)
class Namespace:
    """Where a record lives: ids only. ``session`` is ``None`` for the owner-wide read namespace."""

    tenant: str
    owner: str
    session: str | None = None

    @classmethod
    def for_capture(cls, scope: Scope) -> Namespace:
        if scope.actor is None or not scope.session:
            raise CaptureNeedsSession()
        return cls(tenant=str(scope.tenant.pk), owner=str(scope.actor.pk), session=scope.session)

    @classmethod
    def for_read(cls, scope: Scope) -> Namespace:
        if scope.actor is None:
            raise CaptureNeedsSession("Operational memory is read for one operator; a system scope names none.")
        return cls(tenant=str(scope.tenant.pk), owner=str(scope.actor.pk))

    def as_dict(self) -> dict[str, str | None]:
        return {"tenant": self.tenant, "owner": self.owner, "session": self.session}


@dataclass(frozen=True, slots=True)
class CaptureInput:
    """What reaches an adapter: the text is already redacted."""

    namespace: Namespace
    source: str  # the lifecycle boundary: session.ended, approval.executed, handoff.completed, checkpoint
    text: str
    channel: str
    correlation_id: str
    captured_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One record as read back, with provenance and namespace metadata."""

    id: str
    text: str
    namespace: Namespace
    source: str
    channel: str
    captured_at: datetime | None
    correlation_id: str
    adapter_kind: str
    adapter_instance: str
    score: float | None = None

    def provenance(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "channel": self.channel,
            "captured_at": self.captured_at.isoformat() if self.captured_at else None,
            "correlation_id": self.correlation_id,
            "adapter_kind": self.adapter_kind,
            "adapter_instance": self.adapter_instance,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "provenance": self.provenance(),
            "namespace": self.namespace.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class CaptureResult:
    record: MemoryRecord
    redactions: dict[str, int] = field(default_factory=dict)

    @property
    def redaction_count(self) -> int:
        return sum(self.redactions.values())


@dataclass(frozen=True, slots=True)
class Capabilities:
    delete: bool
    ranked_search: bool
    counts: bool


class OperatorMemoryAdapter(Protocol):
    """What a registered adapter kind implements. Namespaces arrive resolved; adapters never derive them."""

    kind: str
    name: str

    def capabilities(self) -> Capabilities: ...

    def capture(self, item: CaptureInput) -> MemoryRecord: ...

    def search(self, namespace: Namespace, query: str, limit: int) -> list[MemoryRecord]: ...

    def recent(self, namespace: Namespace, limit: int) -> list[MemoryRecord]: ...

    def count(self, namespace: Namespace) -> int | None: ...

    def delete(self, namespace: Namespace, record_id: str) -> None: ...
