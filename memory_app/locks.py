"""Writers serialize per operator and category (seed 002, "Concurrency").

On PostgreSQL: transaction-level advisory locks, released at commit or rollback. On SQLite: the
database is opened with ``transaction_mode=IMMEDIATE`` (settings), so every ``atomic`` block is an
immediate transaction and writers already serialize on the whole database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from .policy import LOCK_ORDER, Category


def lock_key(*, tenant_id: int, operator_id: int, category: Category) -> int:
    digest = hashlib.blake2b(f"tess.memory:{tenant_id}:{operator_id}:{category.value}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def lock_categories(*, tenant_id: int, operator_id: int, categories: Iterable[Category]) -> None:
    """Take the locks of ``categories`` for one operator, always in ``LOCK_ORDER``, for writing.

    Call inside ``transaction.atomic()``; the locks are held until that transaction ends.
    """
    _lock(tenant_id, operator_id, categories, "pg_advisory_xact_lock")


def lock_categories_to_read(*, tenant_id: int, operator_id: int, categories: Iterable[Category]) -> None:
    """The same locks, shared: for a reader that must not see a write half done. It waits for a writer and
    makes writers wait, but never waits for another reader (an operator's inspections run side by side)."""
    _lock(tenant_id, operator_id, categories, "pg_advisory_xact_lock_shared")


def _lock(tenant_id: int, operator_id: int, categories: Iterable[Category], function: str) -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("memory locks are transaction-level: call inside transaction.atomic()")
    wanted = set(categories)
    if connection.vendor == "postgresql":
        keys = [
            lock_key(tenant_id=tenant_id, operator_id=operator_id, category=category)
            for category in LOCK_ORDER
            if category in wanted
        ]
        if keys:
            # One round trip; PostgreSQL evaluates a target list left to right, so the order holds.
            calls = ", ".join(f"{function}(%s)" for _ in keys)
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {calls}", keys)
    elif connection.vendor == "sqlite":
        if connection.settings_dict.get("OPTIONS", {}).get("transaction_mode") != "IMMEDIATE":
            raise ImproperlyConfigured("operator memory on SQLite needs OPTIONS transaction_mode=IMMEDIATE")
    else:
        raise ImproperlyConfigured(f"operator memory cannot serialize writers on {connection.vendor}")
