"""Refuse request input no part of Tess can store or echo, before any view sees it.

PostgreSQL text and jsonb cannot hold NUL (psycopg raises on it), a lone UTF-16 surrogate cannot be encoded
as UTF-8 (the JSON renderer fails echoing it back in a validation message), jsonb has no NaN or Infinity, and
JSON nested thousands deep exhausts Python's recursion limit in the parser. Left to the views, each would be a
500 from whichever view met it first; this middleware answers them once, for every route, with typed errors:

- a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``: 413 ``request_too_large``;
- NUL in the path, the query or a form field (urlencoded or multipart), or NUL or a lone surrogate anywhere
  in a JSON body (keys too): 400 ``invalid_characters``;
- a JSON body that does not parse, is not UTF-8, uses NaN/Infinity, or nests deeper than ``MAX_JSON_DEPTH``:
  400 ``parse_error``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from rest_framework import status

from .errors import TessError, error_response

# Where answers are JSON envelopes; elsewhere (admin, approval pages) a refusal is a plain-text 400.
ENVELOPE_PREFIXES = ("/api/", "/integrations/")
MAX_JSON_DEPTH = 64
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class RequestTooLarge(TessError):
    code = "request_too_large"
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_message = "The request body is larger than this server accepts."


class InvalidCharacters(TessError):
    code = "invalid_characters"
    default_message = "The request contains characters that cannot be stored (NUL or unpaired surrogates)."


class JsonNotAccepted(TessError):
    code = "parse_error"
    default_message = "The body is not JSON this server accepts."


class _Constant(ValueError):
    """NaN, Infinity or -Infinity: valid for Python's parser, not JSON, and not storable in jsonb."""


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def check_json_value(value: Any) -> TessError | None:
    """The refusal for a parsed JSON value with unstorable strings or too much nesting, if any (iterative)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return JsonNotAccepted(f"The body nests deeper than {MAX_JSON_DEPTH} levels.")
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return InvalidCharacters()
        elif isinstance(item, dict):
            for key, child in item.items():
                if _UNSTORABLE.search(key):
                    return InvalidCharacters()
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return None


def check_json_body(raw: bytes) -> TessError | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return JsonNotAccepted("The body is not valid UTF-8.")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except _Constant:
        return JsonNotAccepted("NaN and Infinity are not JSON.")
    except RecursionError:
        return JsonNotAccepted(f"The body nests deeper than {MAX_JSON_DEPTH} levels.")
    except ValueError as exc:
        # Refused here even for routes that ignore their body: a malformed request is never half-understood.
        return JsonNotAccepted(f"The body is not valid JSON: {exc}.")
    return check_json_value(value)


def check_request(request: HttpRequest) -> TessError | None:
    """The refusal that applies to ``request``'s path, query and body, if any."""
    if "\x00" in request.path:
        return InvalidCharacters()
    for key, value in parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True):
        if "\x00" in key or "\x00" in value:
            return InvalidCharacters()
    content_type = request.content_type or ""
    try:
        if request.method in ("POST", "PUT", "PATCH", "DELETE"):
            request.body  # noqa: B018  (reading it enforces DATA_UPLOAD_MAX_MEMORY_SIZE for every content type)
        if _is_json(content_type):
            return check_json_body(request.body) if request.body else None
        if content_type == "application/x-www-form-urlencoded" and request.body:
            # Parsed here for every method: Django fills request.POST for POST only.
            for key, value in parse_qsl(request.body.decode("utf-8", "replace"), keep_blank_values=True):
                if "\x00" in key or "\x00" in value:
                    return InvalidCharacters()
        elif content_type == "multipart/form-data" and request.method == "POST":
            for key, values in request.POST.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    return InvalidCharacters()
    except RequestDataTooBig:
        return RequestTooLarge()
    return None


class RefuseUnstorableInputMiddleware:
    """Runs early (after the correlation id is bound), for every route present and future."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = check_request(request)
        if refusal is None:
            return self.get_response(request)
        if request.path.startswith(ENVELOPE_PREFIXES):
            return error_response(refusal.code, refusal.message, refusal.status_code, refusal.details)
        response = HttpResponseBadRequest(refusal.message, content_type="text/plain; charset=utf-8")
        response.status_code = refusal.status_code
        return response
