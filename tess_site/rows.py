"""Model instances from rows of hand-written SQL, for the reads every API request or turn makes.

Building a queryset's SQL costs more than running it for these one-row lookups (bench/b_turns.py), so
the few of them written as SQL select ``columns(Model, alias)`` and turn each slice of the row into an
instance with ``instance(Model, values)``: the same object the ORM would give, with the same conversions
(``from_db_value``; JSON arrives as text on PostgreSQL). PostgreSQL only: elsewhere callers use the ORM.
Those statements run on ``hot_cursor()``, which lets PostgreSQL keep their plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]  # not in the stubs
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)


@cache
def _fields(model: type[Model]) -> tuple[tuple[str, ...], tuple[Field[Any, Any], ...]]:
    fields = tuple(model._meta.concrete_fields)
    return tuple(field.attname for field in fields), tuple(field for field in fields if hasattr(field, "from_db_value"))


def columns(model: type[Model], alias: str) -> str:
    """The select list of every concrete column of ``model`` under table alias ``alias``, in field order."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def width(model: type[Model]) -> int:
    """How many values of a row ``columns(model, …)`` selects."""
    return len(_fields(model)[0])


def instance(model: type[M], values: Sequence[Any]) -> M:
    """The instance a row selected with ``columns(model, …)`` holds, as loaded from the database."""
    names, converted = _fields(model)
    if converted:
        by_name = dict(zip(names, values, strict=True))
        for field in converted:
            by_name[field.attname] = field.from_db_value(by_name[field.attname], None, connection)  # type: ignore[attr-defined]
        values = [by_name[name] for name in names]
    return model.from_db(connection.alias, list(names), list(values))


def hot_cursor() -> CursorWrapper:
    """A cursor for the hand-written statements every request or turn makes (use it as ``with hot_cursor()``).

    On PostgreSQL it binds parameters on the server, so psycopg prepares the statement on the connection
    after ``DB_PREPARE_THRESHOLD`` runs and PostgreSQL stops parsing and planning it each time. Everything
    else keeps Django's client-side binding. Give nullable or ambiguous parameters an explicit cast
    (``%s::int``): a prepared parameter has one type. Elsewhere it is an ordinary cursor.
    """
    if connection.vendor != "postgresql":
        return connection.cursor()
    # What ``connection.cursor()`` does (health check, connect, Django's wrappers), with the other cursor class.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return connection._prepare_cursor(ServerBindingCursor(connection.connection))  # type: ignore[attr-defined]
