"""Server-owned policy of operator memory (seed 002): categories, ceilings, retention, shapes, decisions.

Decisions, in one table (also in the README):

| situation | decision |
| --- | --- |
| ``remember``, empty slot | ``created``: revision 1, new memory id, the card as source and reauthorization |
| ``remember``/``correct``, same content in the slot | ``reauthorized``: no new revision |
| ``remember``, different content in the slot | ``slot_in_use`` (use ``correct``); standing initiative: ``revised`` |
| content another slot of the category holds | ``duplicate_content``, naming that slot |
| ``remember``, new slot of a full category | ``category_full`` |
| ``correct``, different content | ``revised``: prior row to history, same memory id, revision + 1, linked |
| ``reauthorize`` | expiry renewed, last use cleared, new reauthorization ref; content, revision kept |
| recency | latest confirmation or reauthorization (``reauthorized_at``, set by both) |
| expiry | counted from the latest confirmation or reauthorization |
| forget, forget-all, erasure | rows deleted (current and superseded), no hidden flag; exact count, zero too |
| a pin whose reference no longer resolves | skipped at recall, still shown for inspection |
| memory switched off (env or database) | nothing read or written; scope ``session``; empty recall |
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from django.conf import settings

from .errors import InvalidMemoryInput, MemberDataRefused


class Category(StrEnum):
    PREFERENCES = "preferences"
    STANDING_INITIATIVE = "standing_initiative"
    PINNED_CONTEXTS = "pinned_contexts"


@dataclass(frozen=True)
class CategoryPolicy:
    ceiling: int
    salience: int
    retention: timedelta | None  # None: until forgotten
    needs_ref: bool = False


POLICY: dict[Category, CategoryPolicy] = {
    Category.PREFERENCES: CategoryPolicy(ceiling=12, salience=50, retention=None),
    Category.STANDING_INITIATIVE: CategoryPolicy(ceiling=1, salience=100, retention=timedelta(days=30)),
    Category.PINNED_CONTEXTS: CategoryPolicy(ceiling=8, salience=80, retention=timedelta(days=14), needs_ref=True),
}
# Categories in the one order every multi-category lock takes them (no deadlocks between writers).
LOCK_ORDER = tuple(sorted(Category, key=lambda c: c.value))

STANDING_SLOT = "current"
MAX_VALUE_CHARS = 280
MAX_SLOT_CHARS = 64
RECALL_MAX_ROWS = 8
RECALL_MAX_CHARS = 4096
SLOT_RE = re.compile(r"^[a-z0-9_-]{1,64}$")

# End-customer data never becomes operator memory. TESS_MEMORY_REFUSED_PATTERNS adds to these.
DEFAULT_REFUSED_PATTERNS = (
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",  # e-mail addresses
    # member-like ids (mem_…, mbr_…, member-…) with a digit in them, so "member-facing" stays a word
    r"(?i)\b(?:mem|mbr|member)[_-](?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{3,}",
)


def refused_patterns() -> list[re.Pattern[str]]:
    extra = getattr(settings, "TESS_MEMORY_REFUSED_PATTERNS", [])
    return [re.compile(p) for p in (*DEFAULT_REFUSED_PATTERNS, *extra)]


def canonicalize(value: str) -> str:
    """Unicode whitespace collapsed to one space, trimmed, case-folded (seed 002 dedupe)."""
    normalized = unicodedata.normalize("NFC", value)
    return " ".join(normalized.split()).casefold()


def parse_category(raw: object) -> Category:
    try:
        return Category(str(raw))
    except ValueError:
        raise InvalidMemoryInput(
            "Unknown memory category.", details={"fields": {"category": [c.value for c in Category]}}
        ) from None


def check_slot(slot: str) -> str:
    if not SLOT_RE.match(slot):
        raise InvalidMemoryInput(
            "A slot is 1 to 64 characters from a-z, 0-9, _ and -.", details={"fields": {"slot": "[a-z0-9_-]{1,64}"}}
        )
    return slot


def check_value(value: object) -> str:
    """The value as the operator wrote it, verbatim, if it may be stored."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidMemoryInput("A note needs a non-empty value.", details={"fields": {"value": "required"}})
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidMemoryInput(
            f"A note is at most {MAX_VALUE_CHARS} characters.", details={"fields": {"value": MAX_VALUE_CHARS}}
        )
    for pattern in refused_patterns():
        if pattern.search(value):
            raise MemberDataRefused()
    return value


def derived_slot(category: Category, content: str) -> str:
    """A slot for a card that named none: stable for the same content, and no copy of the text.

    Slots may appear in the audit feed, which is never erased, so a slot derived from a note is a keyed
    digest of it rather than a slug of its words.
    """
    if category is Category.STANDING_INITIATIVE:
        return STANDING_SLOT
    digest = hmac.new(settings.SECRET_KEY.encode(), canonicalize(content).encode(), hashlib.sha256).hexdigest()
    prefix = "pin" if category is Category.PINNED_CONTEXTS else "pref"
    return f"{prefix}-{digest[:16]}"
