"""The ``audit:<seq>`` reference resolver: pinnable when the operator may read that row of the feed."""

from __future__ import annotations

from django.db import connection

from tess_site.errors import Forbidden
from tess_site.scope import Scope

from .models import AuditEvent
from .selectors import audit_events_visible


def audit_readable_many(scope: Scope, ids: list[str]) -> set[str]:
    """The seqs among ``ids`` that exist in the scope tenant's feed, if the scope may read the feed at all.

    Who may read the feed is the feed's own rule (``audit_events_visible``); the lookup itself is one
    plain indexed query because recall re-grounds pins on every operator turn (bench/b_memory.py).
    """
    seqs = sorted({int(i) for i in ids if i.isdigit() and len(i) <= 18})
    if not seqs:
        return set()
    try:
        audit_events_visible(scope=scope)  # the permission check; the queryset itself is not evaluated
    except Forbidden:
        return set()
    marks = ", ".join(["%s"] * len(seqs))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq FROM {AuditEvent._meta.db_table} WHERE tenant_id = %s AND seq IN ({marks})",  # noqa: S608
            [scope.tenant.pk, *seqs],
        )
        return {str(seq) for (seq,) in cursor.fetchall()}


def audit_readable(scope: Scope, object_id: str) -> bool:
    return bool(audit_readable_many(scope, [object_id]))
