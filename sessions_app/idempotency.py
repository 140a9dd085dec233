"""``Idempotency-Key`` for every POST that causes an effect (the IETF httpapi draft, Stripe's behaviour).

- The header is required (1-255 printable ASCII characters); without it: 400 ``idempotency_key_required``.
- Keys are scoped to the tenant and the actor, and kept 24 hours (``TESS_IDEMPOTENCY_HOURS``), then purged.
- The first request takes the key and records it *in flight*; a retry meanwhile gets 409
  ``idempotency_request_in_flight`` at once. The record, the view's effect and the stored outcome are one
  transaction (one commit per request); on PostgreSQL a transaction-level advisory lock on the key is what
  a concurrent retry finds taken, so it never waits for the first request to finish.
- The same key with the same body then replays the stored status and body with ``Idempotency-Replayed: true``.
- The same key with another body (or on another route) gets 422 ``idempotency_key_reused``.
- Validation failures (400) and server errors (5xx) are not stored: the key is free for a corrected retry.
- A typed refusal (another 4xx) rolls the effect back and is then stored in a short transaction of its own,
  unless a retry has taken the key in between (its outcome is then the stored one).
- A crashed request leaves nothing behind (its transaction never committed). A record committed in flight
  by an earlier version is taken over after ``TESS_IDEMPOTENCY_LOCK_SECONDS``.

Use it as a decorator on a ``ScopedAPIView`` method: ``@idempotent``.

A view that calls a model, a provider or another service over the network must not hold a transaction (nor
its database connection) while it waits: ``@idempotent_in_steps`` keeps the same answers with the work in
short transactions of its own.

1. The key is taken and committed *in flight* in a short transaction of its own (the advisory lock only
   lives that long); a retry meanwhile still gets 409, since it finds the committed in-flight record.
2. The view runs outside any transaction, with the request's database connection given back
   (``tess_site.transactions.connection_release``), and does its slow calls there.
3. The view writes its effect in one short transaction and calls ``view.idempotency.finish(status, body)``
   inside it, so the effect and the stored outcome commit together. ``finish`` only moves a record this
   request still holds (it was not taken over meanwhile); otherwise it raises the 409 and the effect rolls back.

Validation failures and server errors free the key as before, and a typed refusal raised by the view is
stored. A request that dies between the steps leaves its record in flight: a retry gets 409 until
``TESS_IDEMPOTENCY_LOCK_SECONDS`` passed, then takes the key over and runs afresh.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.http import HttpRequest
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.errors import TessError, envelope
from tess_site.rows import hot_cursor
from tess_site.scope import Scope
from tess_site.transactions import commit_without_flush_wait, connection_release

from .models import IdempotencyRecord, IdempotencyState

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotency-Replayed"
logger = logging.getLogger(__name__)
_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    name=KEY_HEADER,
    location=OpenApiParameter.HEADER,
    required=True,
    type=str,
    description=(
        "1-255 printable characters, unique per intended effect. Same key and body: the stored response is "
        "replayed with `Idempotency-Replayed: true`; another body: 422; while the first is running: 409; "
        "kept 24 hours per tenant and caller. Validation failures are not stored."
    ),
)


class IdempotencyKeyRequired(TessError):
    code = "idempotency_key_required"
    status_code = status.HTTP_400_BAD_REQUEST
    default_message = "This request needs an Idempotency-Key header of 1 to 255 printable characters."


class IdempotencyKeyReused(TessError):
    code = "idempotency_key_reused"
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_message = "This Idempotency-Key was used with a different request."


class IdempotencyInFlight(TessError):
    code = "idempotency_request_in_flight"
    status_code = status.HTTP_409_CONFLICT
    default_message = "A request with this Idempotency-Key is still being processed; retry shortly."


def request_fingerprint(request: HttpRequest) -> str:
    """Method, path and the body's JSON (key order ignored) — what "the same request" means."""
    raw = request.body or b""
    try:
        body: Any = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")) if raw else ""
    except (ValueError, UnicodeDecodeError):
        body = raw.hex()
    digest = hashlib.sha256()
    for part in (request.method or "", request.path, body):
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def _replay(record: IdempotencyRecord) -> Response:
    return Response(record.response_body, status=record.status_code, headers={REPLAYED_HEADER: "true"})


def _lock_key(scope: Scope, key: str) -> int:
    assert scope.actor is not None, "idempotency keys belong to a person"
    name = f"tess.idempotency:{scope.tenant.pk}:{scope.actor.pk}:{key}"
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


_TABLE = IdempotencyRecord._meta.db_table
_BODY = IdempotencyRecord._meta.get_field("response_body")
_COLUMNS = "tenant_id, actor_id, key, fingerprint, state, status_code, response_body, created_at"
# One round trip: take the key's lock without waiting, and insert the record if the lock is ours and no
# record exists (a committed one conflicts at once; an uncommitted one cannot exist while we hold the lock).
_TAKE_POSTGRES = f"""
    WITH lock AS (SELECT pg_try_advisory_xact_lock(%s::bigint) AS held),
         taken AS (
             INSERT INTO {_TABLE} ({_COLUMNS})
             SELECT %s::bigint, %s::bigint, %s::text, %s::text, %s::text, %s::int, %s::jsonb, %s::timestamptz
               FROM lock WHERE lock.held
             ON CONFLICT (tenant_id, actor_id, key) DO NOTHING
             RETURNING id
         )
    SELECT lock.held, (SELECT id FROM taken) FROM lock
"""  # noqa: S608 (the table name is the model's)


class Taken(NamedTuple):
    held: bool  # the key's lock (PostgreSQL) is held by this transaction
    record_id: int | None  # the new record, or ``None`` if the key had one already
    created_at: datetime  # what the new record was written with


def _take(
    scope: Scope, key: str, fingerprint: str, *, state: str, status_code: int | None = None, body: Any = None
) -> Taken:
    """Insert the key's record in the caller's transaction."""
    assert scope.actor is not None, "idempotency keys belong to a person"
    if connection.vendor != "postgresql":
        # The embedded SQLite: every write transaction is immediate, so writers are serialized anyway.
        record = IdempotencyRecord(
            tenant=scope.tenant, actor=scope.actor, key=key, fingerprint=fingerprint, state=state
        )
        record.status_code, record.response_body = status_code, body
        try:
            with transaction.atomic():
                record.save(force_insert=True)
        except IntegrityError:
            return Taken(True, None, record.created_at)
        return Taken(True, record.pk, record.created_at)
    now = timezone.now()
    values = [
        _lock_key(scope, key),
        scope.tenant.pk,
        scope.actor.pk,
        key,
        fingerprint,
        state,
        status_code,
        _BODY.get_db_prep_save(body, connection),
        now,
    ]
    with hot_cursor() as cursor:
        cursor.execute(_TAKE_POSTGRES, values)
        held, record_id = cursor.fetchone()
    return Taken(bool(held), record_id, now)


class Begun(NamedTuple):
    record_id: int | None  # the record this request holds in flight, or ``None`` with a replay
    claimed_at: datetime | None  # when it was taken (a takeover rewrites it): the finish checks it is still so
    replay: Response | None  # the answer of an earlier request with the key


def _begin(scope: Scope, key: str, fingerprint: str) -> Begun:
    """Inside the request's transaction: take the key (in flight), or answer from an earlier request with it."""
    held, record_id, created_at = _take(scope, key, fingerprint, state=IdempotencyState.IN_FLIGHT)
    if record_id is not None:
        return Begun(record_id, created_at, None)
    found = IdempotencyRecord.objects.filter(tenant=scope.tenant, actor=scope.actor, key=key).first()
    if found is None:
        if not held:  # another request holds the key and has not committed yet
            raise IdempotencyInFlight()
        return _begin(scope, key, fingerprint)  # purged between our insert and read: try once more
    if found.fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    if found.state == IdempotencyState.DONE:
        return Begun(None, None, _replay(found))
    now = timezone.now()
    if held and found.created_at < now - timedelta(seconds=settings.TESS_IDEMPOTENCY_LOCK_SECONDS):
        taken = IdempotencyRecord.objects.filter(
            pk=found.pk, state=IdempotencyState.IN_FLIGHT, created_at=found.created_at
        ).update(created_at=now)
        if taken == 1:
            return Begun(found.pk, now, None)
    raise IdempotencyInFlight()


_FINISH = f"UPDATE {_TABLE} SET state = %s, status_code = %s, response_body = %s WHERE id = %s"  # noqa: S608


_FINISH_HELD = f"{_FINISH} AND state = %s AND created_at = %s"


def _finish(record_id: int, status_code: int, body: Any) -> None:
    with hot_cursor() as cursor:
        cursor.execute(
            _FINISH, [IdempotencyState.DONE, status_code, _BODY.get_db_prep_save(body, connection), record_id]
        )


def _store_refusal(scope: Scope, key: str, fingerprint: str, exc: TessError | APIException) -> None:
    """After the refused request rolled back: store its error, unless a retry took the key meanwhile."""
    with transaction.atomic():
        _take(scope, key, fingerprint, state=IdempotencyState.DONE, status_code=exc.status_code, body=_error_body(exc))


def _is_validation_failure(exc: Exception) -> bool:
    if isinstance(exc, ValidationError | ParseError):
        return True
    return isinstance(exc, TessError) and exc.status_code == status.HTTP_400_BAD_REQUEST


Handler = Callable[..., Response]


def idempotent(method: Handler) -> Handler:
    """Make a ``ScopedAPIView`` handler idempotent under the ``Idempotency-Key`` header."""

    @functools.wraps(method)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        scope: Scope = view.scope
        key = request.headers.get(KEY_HEADER, "")
        if not _KEY_RE.match(key):
            raise IdempotencyKeyRequired()
        fingerprint = request_fingerprint(request._request)
        taken = False
        try:
            with transaction.atomic():
                record_id, _, replay = _begin(scope, key, fingerprint)
                if replay is not None:
                    return replay
                assert record_id is not None
                taken = True
                response = method(view, request, *args, **kwargs)
                if response.status_code < 500 and response.status_code != status.HTTP_400_BAD_REQUEST:
                    _finish(record_id, response.status_code, response.data)
                else:  # the effect (if any) commits; the key stays free for a corrected retry
                    IdempotencyRecord.objects.filter(pk=record_id).delete()
                return response
        except (TessError, APIException) as exc:
            if taken and exc.status_code < 500 and not _is_validation_failure(exc):
                _store_refusal(scope, key, fingerprint, exc)
            raise

    return wrapper


@dataclass
class KeyHold:
    """An in-flight record committed by ``@idempotent_in_steps``: this request holds it while it has the
    ``claimed_at`` it was committed (or taken over) with."""

    record_id: int
    claimed_at: datetime
    settled: bool = False

    def _mine(self) -> Any:
        return IdempotencyRecord.objects.filter(
            pk=self.record_id, state=IdempotencyState.IN_FLIGHT, created_at=self.claimed_at
        )

    def finish(self, status_code: int, body: Any) -> None:
        """Store the outcome inside the transaction that writes the effect; 409 if a retry took the key over."""
        assert connection.in_atomic_block, "finish in the transaction that writes the effect"
        self.settled = True
        values = [IdempotencyState.DONE, status_code, _BODY.get_db_prep_save(body, connection), self.record_id]
        with hot_cursor() as cursor:  # every turn runs it: a prepared statement on PostgreSQL
            # The time as the backend stores it: SQLite compares text, and a raw parameter is not converted.
            claimed = connection.ops.adapt_datetimefield_value(self.claimed_at)
            cursor.execute(_FINISH_HELD, [*values, IdempotencyState.IN_FLIGHT, claimed])
            if cursor.rowcount != 1:
                raise IdempotencyInFlight()

    def free(self) -> None:
        """Forget the key (validation failures, server errors): best effort, a dead database leaves it stale."""
        self.settled = True
        try:
            with transaction.atomic():
                self._mine().delete()
        except DatabaseError:
            logger.warning("idempotency record %s stays in flight until it is taken over", self.record_id)

    def refuse(self, exc: TessError | APIException) -> None:
        """Store a typed refusal the view raised (its effects, if any, were not written)."""
        self.settled = True
        with transaction.atomic():
            self._mine().update(
                state=IdempotencyState.DONE, status_code=exc.status_code, response_body=_error_body(exc)
            )


def idempotent_in_steps(method: Handler) -> Handler:
    """Like ``@idempotent``, for a handler that waits on a model, provider or other service: the key is
    committed in flight first, the handler runs outside any transaction and stores its outcome with
    ``self.idempotency.finish(...)`` in the transaction that writes its effect (see the module docstring)."""

    @functools.wraps(method)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        scope: Scope = view.scope
        key = request.headers.get(KEY_HEADER, "")
        if not _KEY_RE.match(key):
            raise IdempotencyKeyRequired()
        fingerprint = request_fingerprint(request._request)
        with transaction.atomic():
            commit_without_flush_wait()  # a mark of a request in flight (tess_site.transactions)
            record_id, claimed_at, replay = _begin(scope, key, fingerprint)
            if replay is not None:
                return replay
            assert record_id is not None and claimed_at is not None
        hold = KeyHold(record_id=record_id, claimed_at=claimed_at)
        view.idempotency = hold
        connection_release()
        try:
            response = method(view, request, *args, **kwargs)
        except (TessError, APIException) as exc:
            if not hold.settled:
                if exc.status_code < 500 and not _is_validation_failure(exc):
                    hold.refuse(exc)
                else:
                    hold.free()
            raise
        except BaseException:
            if not hold.settled:
                hold.free()
            raise
        if not hold.settled:
            if response.status_code < 500 and response.status_code != status.HTTP_400_BAD_REQUEST:
                with transaction.atomic():
                    hold.finish(response.status_code, response.data)
            else:
                hold.free()
        return response

    return wrapper


def _error_body(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, TessError):
        return envelope(exc.code, exc.message, exc.details)
    assert isinstance(exc, APIException)
    return envelope(str(exc.default_code), str(exc.detail))


def idempotency_purge(*, older_than: timedelta | None = None) -> int:
    """Delete records past their retention (Celery beat). Returns how many went."""
    age = older_than or timedelta(hours=settings.TESS_IDEMPOTENCY_HOURS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=timezone.now() - age).delete()
    return deleted
