"""The audit chain: canonical form and hashing of one event, shared by the writer and the verifier."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

GENESIS = "0" * 64

# Metadata holds identifiers, counts and flags. Strings must look like identifiers (no spaces), so a
# sentence a user typed cannot be smuggled into the append-only feed, where it could never be erased.
_SAFE_STRING = re.compile(r"^[A-Za-z0-9_.:@/+#=-]{0,128}$")
_MAX_KEYS = 32


class UnsafeMetadata(ValueError):
    """Audit metadata carried something that may be free text or a secret."""


def check_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        raise UnsafeMetadata("metadata must be an object")
    if len(metadata) > _MAX_KEYS:
        raise UnsafeMetadata(f"metadata has more than {_MAX_KEYS} keys")
    for key, value in metadata.items():
        if not isinstance(key, str) or not re.match(r"^[a-z][a-z0-9_]{0,63}$", key):
            raise UnsafeMetadata(f"metadata key {key!r} is not an identifier")
        _check_value(key, value, depth=0)
    return metadata


def _check_value(key: str, value: Any, *, depth: int) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        # PostgreSQL's jsonb has no NaN or Infinity, and JSON itself does not either.
        raise UnsafeMetadata(f"metadata {key!r} is not a finite number")
    if value is None or isinstance(value, bool | int | float):
        return
    if isinstance(value, str):
        if not _SAFE_STRING.match(value):
            raise UnsafeMetadata(f"metadata {key!r} holds text that is not an identifier")
        return
    if isinstance(value, list) and depth == 0 and len(value) <= 50:
        for item in value:
            _check_value(key, item, depth=1)
        return
    raise UnsafeMetadata(f"metadata {key!r} must be a scalar or a short list of scalars")


def _stable_numbers(value: Any) -> Any:
    """Whole floats as ints, so the hash survives the database's JSON round trip.

    jsonb keeps numbers as decimals: 1e16 comes back as the int 10000000000000000 and -0.0 as 0.0, so hashing
    the float as written would not match the row read back by the verifier.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_stable_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _stable_numbers(item) for key, item in value.items()}
    return value


def canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _timestamp(moment: datetime) -> str:
    # Hashed as UTC with microseconds: exactly what a timestamptz column stores and gives back, whatever the
    # time zone of the process that wrote or reads it.
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("audit timestamps must be timezone-aware")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def chain_hash(
    *,
    tenant_id: int,
    seq: int,
    actor_id: int | None,
    actor_label: str,
    channel: str,
    action: str,
    target_type: str,
    target_id: str,
    outcome: str,
    correlation_id: str,
    metadata: dict[str, Any],
    created_at: datetime,
    prev_hash: str,
) -> str:
    payload = canonical(
        {
            "tenant": tenant_id,
            "seq": seq,
            "actor": actor_id,
            "actor_label": actor_label,
            "channel": channel,
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "outcome": outcome,
            "correlation_id": correlation_id,
            "metadata": _stable_numbers(metadata),
            "created_at": _timestamp(created_at),
            "prev": prev_hash,
        }
    )
    return hashlib.sha256(payload).hexdigest()


class ChainRow(Protocol):
    """The stored fields of one audit row, as the verifier reads them back (an ``AuditEvent``)."""

    @property
    def id(self) -> int: ...
    @property
    def tenant_id(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def actor_id(self) -> int | None: ...
    @property
    def actor_label(self) -> str: ...
    @property
    def channel(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def target_type(self) -> str: ...
    @property
    def target_id(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def correlation_id(self) -> str: ...
    @property
    def metadata(self) -> Any: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def hash(self) -> str: ...


def row_hash(row: ChainRow) -> str:
    """The hash ``row`` should carry, recomputed from its stored fields."""
    return chain_hash(
        tenant_id=row.tenant_id,
        seq=row.seq,
        actor_id=row.actor_id,
        actor_label=row.actor_label,
        channel=row.channel,
        action=row.action,
        target_type=row.target_type,
        target_id=row.target_id,
        outcome=row.outcome,
        correlation_id=row.correlation_id,
        metadata=row.metadata,
        created_at=row.created_at,
        prev_hash=row.prev_hash,
    )


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first place a chain stops verifying. ``row_id`` is ``None`` when the problem is a missing row."""

    seq: int
    row_id: int | None
    problem: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What walking one tenant's chain found: how many rows verified, where it ends, and the first break."""

    count: int
    last_seq: int
    last_hash: str
    last_row_id: int | None
    broken: ChainBreak | None = None


def missing_seqs(first: int, last: int) -> str:
    return f"seq {first} missing" if first == last else f"seqs {first}..{last} missing"


def walk_chain(rows: Iterable[ChainRow], *, head_seq: int, head_hash: str) -> ChainReport:
    """Check ``rows`` (one tenant, ordered by seq) link from GENESIS with consecutive seqs and true hashes.

    Stops at the first break: every later row's ``prev_hash`` depends on it, so more reports add nothing.
    ``head_seq``/``head_hash`` are the chain head as read *before* the rows; the row at that seq must carry
    that hash. Comparing where the rows end with the head is the caller's job (it may have to re-read it).
    """
    count, last_seq, last_hash, last_row_id = 0, 0, GENESIS, None
    for row in rows:
        expected = last_seq + 1
        problem = None
        if row.seq != expected:
            if row.seq > expected:
                problem = f"{missing_seqs(expected, row.seq - 1)}: expected seq {expected}, found seq {row.seq}"
            else:
                problem = f"out of order: expected seq {expected}, found seq {row.seq}"
        elif row.prev_hash != last_hash:
            after = "GENESIS" if expected == 1 else f"the hash of seq {last_seq}"
            problem = f"prev_hash is not {after}"
        elif row_hash(row) != row.hash:
            problem = "stored hash does not match the row's fields (the row was altered)"
        elif row.seq == head_seq and row.hash != head_hash:
            problem = f"chain head hash {head_hash or '(empty)'} differs from this row's hash"
        if problem is not None:
            broken = ChainBreak(seq=row.seq, row_id=row.id, problem=problem)
            return ChainReport(count, last_seq, last_hash, last_row_id, broken)
        count, last_seq, last_hash, last_row_id = count + 1, row.seq, row.hash, row.id
    return ChainReport(count, last_seq, last_hash, last_row_id)
