"""Ed25519 verification of Discord interaction requests (``X-Signature-Ed25519`` over timestamp + raw body)."""

from __future__ import annotations

import re
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.core.cache import cache
from rest_framework import status

from tess_site.errors import TessError

MAX_AGE_SECONDS = 300
# Discord sends the signature as 128 lower-case hex digits. Any other spelling of the same bytes (upper case,
# spaces) is refused, so one signature has exactly one accepted form.
_CANONICAL_SIGNATURE = re.compile(r"[0-9a-f]{128}")


class BadSignature(TessError):
    code = "invalid_signature"
    status_code = status.HTTP_401_UNAUTHORIZED
    default_message = "invalid request signature"


def verify_request(*, public_key_hex: str, signature_hex: str, timestamp: str, body: bytes) -> None:
    """Raise ``BadSignature`` unless the signature is valid, fresh and seen for the first time."""
    if not public_key_hex:
        raise BadSignature("Discord is not configured.")
    if not _CANONICAL_SIGNATURE.fullmatch(signature_hex):
        raise BadSignature()
    signature = bytes.fromhex(signature_hex)
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex))
        key.verify(signature, timestamp.encode() + body)
        sent_at = int(timestamp)
    except (ValueError, InvalidSignature) as exc:
        raise BadSignature() from exc
    if abs(time.time() - sent_at) > MAX_AGE_SECONDS:
        raise BadSignature("stale request timestamp")
    # A captured request replayed within the freshness window is refused: each signature counts once, keyed by
    # its bytes rather than by how they were spelt.
    if not cache.add(f"discord:sig:{signature.hex()}", 1, timeout=MAX_AGE_SECONDS * 2):
        raise BadSignature("replayed request")
