"""Appending to a session's stream: gap-free sequence numbers, and a wake-up for consumers after commit."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from tess_site.rows import hot_cursor

from . import events, stream
from .models import Session, SessionEvent


def events_append(*, session_id: uuid.UUID, items: Iterable[tuple[stream.EventKind, Any]]) -> list[SessionEvent]:
    """Append events to a session's stream with the next sequence numbers, in the caller's transaction.

    Locks the session row, so concurrent writers get consecutive, gap-free numbers; consumers are woken
    once after commit with the newest number.
    """
    batch = list(items)
    if not batch:
        return []
    now = timezone.now()
    if connection.vendor == "postgresql":
        rows = _append_postgres(session_id, batch, now)
        events.wake_session_on_commit(session_id, rows[-1].seq)
        return rows
    with transaction.atomic():
        last_seq = Session.objects.select_for_update().filter(pk=session_id).values_list("last_seq", flat=True).get()
        rows = [
            SessionEvent(session_id=session_id, seq=last_seq + i, kind=str(kind), ts=now, body=body)
            for i, (kind, body) in enumerate(batch, start=1)
        ]
        SessionEvent.objects.bulk_create(rows)
        Session.objects.filter(pk=session_id).update(last_seq=rows[-1].seq, updated_at=now)
        events.wake_session_on_commit(session_id, rows[-1].seq)
    return rows


_EVENT_BODY = SessionEvent._meta.get_field("body")
# Moving the session's last_seq locks its row until the caller's transaction ends (concurrent appenders
# queue there and continue from the committed number), and the events take the numbers it moved past:
# one statement, so one round trip, whatever the batch.
_APPEND_EVENTS = f"""
    WITH head AS (
        UPDATE {Session._meta.db_table} SET last_seq = last_seq + %s, updated_at = %s WHERE id = %s
        RETURNING last_seq - %s AS before
    )
    INSERT INTO {SessionEvent._meta.db_table} (session_id, seq, kind, ts, body)
    SELECT %s::uuid, head.before + item.n, item.event ->> 0, %s::timestamptz, item.event -> 1
      FROM head, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS item(event, n)
    RETURNING id, seq
"""  # noqa: S608 (table names are the models')


def _append_postgres(session_id: uuid.UUID, batch: list[tuple[stream.EventKind, Any]], now: Any) -> list[SessionEvent]:
    count = len(batch)
    items = _EVENT_BODY.get_db_prep_save([[str(kind), body] for kind, body in batch], connection)
    with hot_cursor() as cursor:
        cursor.execute(_APPEND_EVENTS, [count, now, session_id, count, session_id, now, items])
        ids = {seq: pk for pk, seq in cursor.fetchall()}
    if not ids:
        raise Session.DoesNotExist("No such session.")
    first = min(ids)
    rows = []
    for offset, (kind, body) in enumerate(batch):
        row = SessionEvent(
            id=ids[first + offset], session_id=session_id, seq=first + offset, kind=str(kind), ts=now, body=body
        )
        row._state.adding = False
        row._state.db = connection.alias
        rows.append(row)
    return rows


def event_append(*, session_id: uuid.UUID, kind: stream.EventKind, body: Any) -> SessionEvent:
    return events_append(session_id=session_id, items=[(kind, body)])[0]
