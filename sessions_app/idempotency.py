"""``Idempotency-Key`` for every POST that causes an effect (the IETF httpapi draft, Stripe's behaviour).

- The header is required (1-255 printable ASCII characters); without it: 400 ``idempotency_key_required``.
- Keys are scoped to the tenant and the actor, and kept 24 hours (``TESS_IDEMPOTENCY_HOURS``), then purged.
- The first request records the key *in flight* (committed at once); a retry meanwhile gets 409
  ``idempotency_request_in_flight``.
- The view's effect and the stored outcome commit in one transaction; the same key with the same body
  then replays the stored status and body with ``Idempotency-Replayed: true``.
- The same key with another body (or on another route) gets 422 ``idempotency_key_reused``.
- Validation failures (400) and server errors (5xx) are not stored: the key is free for a corrected retry.
- A record left in flight by a crashed process is taken over after ``TESS_IDEMPOTENCY_LOCK_SECONDS``.

Use it as a decorator on a ``ScopedAPIView`` method: ``@idempotent``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.errors import TessError, envelope
from tess_site.scope import Scope

from .models import IdempotencyRecord, IdempotencyState

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotency-Replayed"
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


def _begin(scope: Scope, key: str, fingerprint: str) -> tuple[IdempotencyRecord | None, Response | None]:
    """Record the key in flight (committed now), or answer from an earlier request with it."""
    try:
        with transaction.atomic():
            record = IdempotencyRecord(tenant=scope.tenant, key=key, fingerprint=fingerprint)
            assert scope.actor is not None, "idempotency keys belong to a person"
            record.actor_id = scope.actor.pk
            record.save(force_insert=True)
            return record, None
    except IntegrityError:
        pass
    found = IdempotencyRecord.objects.filter(tenant=scope.tenant, actor=scope.actor, key=key).first()
    if found is None:  # purged or released between our insert and read: try once more
        return _begin(scope, key, fingerprint)
    record = found
    if record.fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    if record.state == IdempotencyState.DONE:
        return None, _replay(record)
    stale = timezone.now() - timedelta(seconds=settings.TESS_IDEMPOTENCY_LOCK_SECONDS)
    if record.created_at < stale:
        taken = IdempotencyRecord.objects.filter(
            pk=record.pk, state=IdempotencyState.IN_FLIGHT, created_at=record.created_at
        ).update(created_at=timezone.now())
        if taken == 1:
            return record, None
    raise IdempotencyInFlight()


def _finish(record: IdempotencyRecord, status_code: int, body: Any) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        state=IdempotencyState.DONE, status_code=status_code, response_body=body
    )


def _release(record: IdempotencyRecord) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk, state=IdempotencyState.IN_FLIGHT).delete()


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
        record, replay = _begin(scope, key, request_fingerprint(request._request))
        if replay is not None:
            return replay
        assert record is not None
        try:
            with transaction.atomic():
                response = method(view, request, *args, **kwargs)
                storable = response.status_code < 500 and response.status_code != status.HTTP_400_BAD_REQUEST
                if storable:
                    _finish(record, response.status_code, response.data)
        except Exception as exc:
            if isinstance(exc, TessError | APIException) and not _is_validation_failure(exc):
                code = exc.status_code
                if code < 500:
                    _finish(record, code, _error_body(exc))
                    raise
            _release(record)
            raise
        if not storable:
            _release(record)
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
