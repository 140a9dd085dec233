"""Personal access token format: ``tess_<prefix>_<secret>``.

The prefix finds the row; the SHA-256 of the whole token is compared in constant time. A slow password
hash is unnecessary because the secret is 256 random bits, never chosen by a person.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string

TOKEN_RE = re.compile(r"^tess_(?P<prefix>[A-Za-z0-9]{8})_(?P<secret>[A-Za-z0-9_-]{43})$")
_ALPHABET = string.ascii_letters + string.digits


def generate() -> tuple[str, str]:
    """Return ``(prefix, token)`` for a new token."""
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(8))
    return prefix, f"tess_{prefix}_{secrets.token_urlsafe(32)}"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def matches(token: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(token), stored_digest)


def parse_prefix(token: str) -> str | None:
    match = TOKEN_RE.match(token)
    return match.group("prefix") if match else None
