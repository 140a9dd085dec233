"""Helpers of the bad-input suite: every mutating route (from the URL resolver), a plausible body for each
(from the OpenAPI schema), real objects for the path parameters, signatures for the signed routes, and one
query that counts the rows of every table (to prove a refused request wrote nothing)."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.apps import apps
from django.conf import global_settings
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from approvals_app.handoff_adapters import SIGNATURE_HEADER, sign
from approvals_app.handoffs import handoff_create
from memory_app.coding.services import coding_memory_write
from memory_app.plugin import operator_memory_plugin
from memory_app.services import memory_propose
from sessions_app import services as session_services
from sessions_app.models import Session
from tess_site.accounts import services as accounts
from tess_site.accounts.models import ExternalIdentity
from tess_site.scope import Role
from tests.conftest import Cast, scope_of

MUTATING = ("post", "put", "patch", "delete")
# Tables a refused request may legitimately touch. The idempotency record of a refused request stores the
# refusal itself (a retry with the same key gets the same answer); it is the response, not an effect.
NOT_EFFECTS = {"sessions_app.IdempotencyRecord", "sessions.Session"}
_PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")


@dataclass(frozen=True)
class Route:
    template: str  # "/api/v1/sessions/{session_id}/turns/"
    method: str
    name: str  # the URL name, for routes that need their own signature
    params: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.template}"


def _walk(patterns: list[URLPattern | URLResolver], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, route)
        else:
            yield route, entry


def _view_class(entry: URLPattern) -> Any:
    return getattr(entry.callback, "view_class", None) or getattr(entry.callback, "cls", None)


@cache
def mutating_routes() -> tuple[Route, ...]:
    """Every REST route (API and integrations) that accepts a mutating method, read from the URL resolver."""
    found = []
    for raw, entry in _walk(get_resolver().url_patterns):
        if not raw.startswith(("api/", "integrations/")):
            continue
        view = _view_class(entry)
        if view is None:
            continue
        template = "/" + _PARAM.sub(r"{\2}", raw)
        params = tuple(m.group(2) for m in _PARAM.finditer(raw))
        for method in MUTATING:
            if hasattr(view, method):
                found.append(Route(template, method, entry.name or "", params))
    return tuple(sorted(found, key=str))


@cache
def openapi() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return _resolve(openapi()["components"]["schemas"][name])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolve(schema["allOf"][0])
    return schema


def documented(route: Route) -> bool:
    return route.method in openapi()["paths"].get(route.template, {})


def _sample(prop: dict[str, Any], uuids: list[str]) -> Any:
    prop = _resolve(prop)
    if prop.get("enum"):
        return next(v for v in prop["enum"] if v is not None)
    kind = prop.get("type")
    if kind == "string":
        return uuids[0] if prop.get("format") == "uuid" and uuids else "plain text"
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    return {}


def body_template(route: Route, uuids: list[str]) -> dict[str, Any]:
    """A plausible JSON body for ``route``: every documented request field with an ordinary value."""
    operation = openapi()["paths"].get(route.template, {}).get(route.method)
    content = (operation or {}).get("requestBody", {}).get("content", {})
    media = content.get("application/json") or next(iter(content.values()), None)
    if not media:
        return {"text": "plain text"}
    properties = _resolve(media["schema"]).get("properties", {})
    return {name: _sample(prop, uuids) for name, prop in properties.items()} or {"text": "plain text"}


def replace_strings(value: Any, bad: Any) -> Any:
    """``value`` with every string (keys kept) replaced by ``bad``; non-strings replaced too when ``bad`` is not
    a string, so wrong types reach every field."""
    if isinstance(value, dict):
        return {key: replace_strings(child, bad) for key, child in value.items()}
    if isinstance(value, list):
        return [replace_strings(child, bad) for child in value]
    if isinstance(value, str) or not isinstance(bad, str):
        return bad
    return value


def table_counts() -> dict[str, int]:
    """Rows of every concrete table of every installed model, in one query."""
    models = [
        m for m in apps.get_models() if m._meta.managed and not m._meta.proxy and m._meta.label not in NOT_EFFECTS
    ]
    quote = connection.ops.quote_name
    sql = " UNION ALL ".join(f"SELECT {i}, COUNT(*) FROM {quote(m._meta.db_table)}" for i, m in enumerate(models))
    with connection.cursor() as cursor:
        cursor.execute(sql)
        counts = dict(cursor.fetchall())
    return {m._meta.label: counts[i] for i, m in enumerate(models)}


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    return {label: (before[label], after[label]) for label in before if before[label] != after[label]}


@dataclass
class Request:
    """One prepared request: where, what, and how it is signed."""

    route: Route
    path: str
    body: bytes
    content_type: str = "application/json"
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)


Signer = Callable[[bytes], dict[str, str]]


def as_json(value: Any) -> bytes:
    """JSON with escapes for everything outside ASCII, so lone surrogates survive as ``\\ud800``."""
    return json.dumps(value, ensure_ascii=True).encode()


def fresh_key() -> str:
    return uuid.uuid4().hex


UPLOAD_LIMIT = 64 * 1024  # DATA_UPLOAD_MAX_MEMORY_SIZE in these tests: oversized bodies stay small
MOS_SECRET = "bad-input-mos-secret"
DISCORD_CHANNEL = "900000000000000042"
DISCORD_USER = "4242"


@dataclass
class World:
    """The caller (the owner, holding every role in acme), real objects for path parameters, and signers."""

    cast: Cast
    token: str
    params: dict[str, str]
    uuids: list[str]
    discord_key: Ed25519PrivateKey
    mos_secret: str = MOS_SECRET
    upload_limit: int = UPLOAD_LIMIT
    # Set: requests go over HTTP to this port (a production web unit) instead of Django's test client.
    port: int | None = None

    def template(self, route: Route) -> Any:
        if route.name == "discord-interactions":
            return {
                "id": fresh_key(),
                "application_id": "app-1",
                "type": 2,
                "token": "tok-" + fresh_key(),
                "channel_id": DISCORD_CHANNEL,
                "member": {"user": {"id": DISCORD_USER, "username": "owner"}},
                "data": {
                    "name": "tess",
                    "options": [{"name": "ask", "type": 1, "options": [{"name": "text", "type": 3, "value": "hi"}]}],
                },
            }
        if route.name == "handoff-result":
            return {"status": "completed", "result": {"summary": "done", "files": ["a.py"]}}
        return body_template(route, self.uuids)

    def path(self, route: Route, value: Callable[[str], str] | None = None) -> str:
        path = route.template
        for param in route.params:
            path = path.replace("{" + param + "}", value(param) if value else self.params.get(param, fresh_key()))
        return path

    def headers(self, route: Route, body: bytes) -> dict[str, str]:
        if route.name == "handoff-result":
            return {SIGNATURE_HEADER: sign(self.mos_secret, body)}
        if route.name == "discord-interactions":
            ts = str(int(time.time()))
            return {
                "X-Signature-Ed25519": self.discord_key.sign(ts.encode() + body).hex(),
                "X-Signature-Timestamp": ts,
            }
        return {"Authorization": f"Bearer {self.token}", "Idempotency-Key": fresh_key()}

    def send(self, request: Request) -> Any:
        if self.port is not None:
            return self._send_http(request)
        # raise_request_exception=False: a server error becomes the 500 a client would see, not a test crash.
        client = Client(raise_request_exception=False)
        path = request.path + (f"?{request.query}" if request.query else "")
        headers = {**self.headers(request.route, request.body), **request.headers}
        return client.generic(
            request.route.method.upper(), path, request.body, content_type=request.content_type, headers=headers
        )

    def _send_http(self, request: Request) -> HttpAnswer:
        path = request.path + (f"?{request.query}" if request.query else "")
        headers = {
            **PRODUCTION_HEADERS,
            "Content-Type": request.content_type,
            **self.headers(request.route, request.body),
            **request.headers,
        }
        conn = http.client.HTTPConnection("127.0.0.1", self.port or 0, timeout=30)
        try:
            # A server may answer (413) and close before the whole body is sent: its answer is read all the same.
            with contextlib.suppress(BrokenPipeError):
                conn.request(request.route.method.upper(), path, body=request.body, headers=headers)
            response = conn.getresponse()
            return HttpAnswer(response.status, response.read())
        finally:
            conn.close()


@dataclass
class HttpAnswer:
    """What the checks read of an answer, as the test client's response offers it."""

    status_code: int
    content: bytes


# Production redirects plain HTTP: the request says it came over HTTPS through the (loopback) proxy.
PRODUCTION_HEADERS = {"Host": "tess.example.com", "X-Forwarded-Proto": "https"}
PRODUCTION_UPLOAD_LIMIT = global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # production keeps Django's default


def discord_public_key(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


@pytest.fixture(name="world")
def world_fixture(cast: Cast, token_for: Any, settings: Any) -> World:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = UPLOAD_LIMIT
    settings.TESS_MOS_WEBHOOK_SECRET = MOS_SECRET
    key = Ed25519PrivateKey.generate()
    settings.TESS_DISCORD_PUBLIC_KEY = discord_public_key(key)
    settings.TESS_DISCORD_APPLICATION_ID = "app-1"
    return make_world(cast, token_for, key)


@dataclass(frozen=True)
class ProductionUnit:
    """A production web unit (``tests.tess_site.production``) that knows the bad-input suite's Discord key."""

    port: int
    credentials: Path
    discord_key: Ed25519PrivateKey


def production_world(cast: Cast, token_for: Any, unit: ProductionUnit) -> World:
    """The same caller and objects, sent over HTTP to ``unit`` (rows it must see: ``transaction=True``)."""
    world = make_world(cast, token_for, unit.discord_key)
    world.port = unit.port
    world.mos_secret = (unit.credentials / "mos_webhook_secret").read_text().strip()
    world.upload_limit = PRODUCTION_UPLOAD_LIMIT
    return world


def make_world(cast: Cast, token_for: Any, key: Ed25519PrivateKey) -> World:
    for role in (Role.APPROVER, Role.AUDITOR, Role.ADMIN):
        accounts.membership_grant(tenant=cast.acme, user=cast.owner, role=role)
    scope = scope_of(cast.owner, cast.acme)
    session = Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="bad input", provider_instance="nowhere", runtime_id="$bad"
    )
    other = Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="other", provider_instance="elsewhere", runtime_id="$other"
    )
    session_services.ingress_bind(scope=scope, session_id=session.pk, channel="discord", external_ref=DISCORD_CHANNEL)
    ExternalIdentity.objects.create(tenant=cast.acme, user=cast.owner, provider="discord", external_id=DISCORD_USER)
    card = memory_propose(scope, data={"op": "remember", "category": "preferences", "value": "be terse"})
    entry = coding_memory_write(
        scope, data={"workspace_key": "tess", "kind": "fact", "statement": "s", "evidence": "e"}
    )
    handoff = handoff_create(scope, session_id=str(session.pk), summary="review", payload={"request": "review"})
    record = (
        operator_memory_plugin()
        .capture(scope.for_session(str(session.pk)), source="session.ended", text="rollout done")
        .record
    )
    params = {
        "record_id": str(record.id),
        "session_id": str(session.pk),
        "card_id": str(card.pk),
        "entry_id": str(entry.pk),
        "handoff_id": str(handoff.pk),
    }
    return World(cast, token_for(cast.owner), params, [str(other.pk)], key)
