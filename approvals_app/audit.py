"""The audit chain: canonical form and hashing of one event, shared by the writer and the verifier."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Any

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


def canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


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
            "metadata": metadata,
            "created_at": created_at.isoformat(timespec="microseconds"),
            "prev": prev_hash,
        }
    )
    return hashlib.sha256(payload).hexdigest()
