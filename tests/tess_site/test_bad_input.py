"""Bad input on every mutating REST route: never a 5xx, never a partial write.

The routes come from the URL resolver and their bodies from the OpenAPI schema, so a route added later is
covered without touching this file. Path parameters name real objects of the caller (a session, a pending
card, a coding-memory entry, a hand-off), and the signed routes (Mos results, Discord interactions) are
signed, so bad input reaches the views' real work instead of stopping at a 404 or a signature check. Every
refused request must leave every table as it was (row counts of all of them, the audit feed included).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.cache import cache

from tess_site.middleware import IDENTITY_FIELDS

from .bad_input import (
    UPLOAD_LIMIT,
    ProductionUnit,
    Request,
    Route,
    World,
    as_json,
    changed,
    discord_public_key,
    documented,
    mutating_routes,
    production_world,
    replace_strings,
    table_counts,
    world_fixture,  # noqa: F401  (the ``world`` fixture)
)
from .children import Child
from .conftest import start_child as start_child
from .production import start_production_web

pytestmark = pytest.mark.django_db

ROUTES = mutating_routes()


def test_the_walk_finds_every_kind_of_mutating_route():
    found = {str(r) for r in ROUTES}
    for expected in (
        "POST /api/v1/sessions/{session_id}/turns/",
        "POST /api/v1/sessions/{session_id}/cutover/",
        "DELETE /api/v1/memory/",
        "POST /api/v1/cards/{card_id}/confirm/",
        "POST /api/v1/handoffs/{handoff_id}/result/",
        "POST /integrations/discord/interactions/",
    ):
        assert expected in found
    # Every API route is in the OpenAPI schema, so its body fields are known (not a generic guess).
    assert [str(r) for r in ROUTES if r.template.startswith("/api/") and not documented(r)] == []


# --- the cases: (what to send, what must come back) ------------------------------------------------------

Make = Callable[[World, Route], Request]


def json_case(transform: Callable[[Any], Any]) -> Make:
    def make(world: World, route: Route) -> Request:
        template = world.template(route)
        if replace_strings(template, "?") == template:  # no string to spoil (e.g. only an integer field)
            template = {**template, "text": "plain text"}
        return Request(route, world.path(route), as_json(transform(template)))

    return make


def raw_case(body: bytes, content_type: str = "application/json") -> Make:
    def make(world: World, route: Route) -> Request:
        return Request(route, world.path(route), body, content_type=content_type)

    return make


def oversized(world: World, route: Route) -> Request:
    template = world.template(route)
    padded = {**template, "padding": "x" * (world.upload_limit + 1)} if isinstance(template, dict) else template
    return Request(route, world.path(route), as_json(padded))


def forged_identity_body(world: World, route: Route) -> Request:
    forged = {field: world.cast.teammate.pk for field in IDENTITY_FIELDS}
    return Request(route, world.path(route), as_json({**world.template(route), **forged}))


def with_query(query: str) -> Make:
    def make(world: World, route: Route) -> Request:
        return Request(route, world.path(route), as_json(world.template(route)), query=query)

    return make


def nul_in_path(world: World, route: Route) -> Request:
    return Request(route, world.path(route, lambda _: "a%00b"), as_json(world.template(route)))


def nested(depth: int) -> bytes:
    return b'{"text": ' + b"[" * depth + b"]" * depth + b"}"


ANY_CLIENT_ERROR = None  # any status below 500 will do (some of these may even succeed)

# name -> (builder, the status every route must answer, the error code, routes the expectation skips)
CASES: dict[str, tuple[Make, int | None, str | None]] = {
    "nul_in_every_string": (json_case(lambda t: replace_strings(t, "a\x00b")), 400, "invalid_characters"),
    "lone_surrogate_in_every_string": (
        json_case(lambda t: replace_strings(t, "a\ud800b")),
        400,
        "invalid_characters",
    ),
    "nul_in_a_key": (json_case(lambda t: {**t, "k\x00": 1}), 400, "invalid_characters"),
    "control_characters": (
        json_case(lambda t: replace_strings(t, "\x01\x07\x1b[2J\x7f\u2028\u202e\ufeff")),
        ANY_CLIENT_ERROR,
        None,
    ),
    "malformed_json": (raw_case(b'{"text": "unterminated'), 400, None),
    "invalid_utf8": (raw_case(b'{"text": "\xff\xfe\xc3"}'), 400, None),
    "nan_and_infinity": (raw_case(b'{"text": NaN, "n": Infinity}'), 400, "parse_error"),
    "nested_past_the_limit": (raw_case(nested(100)), 400, "parse_error"),
    "nested_past_pythons_recursion_limit": (raw_case(nested(30_000)), 400, "parse_error"),
    "top_level_array": (raw_case(b"[1, 2, 3]"), ANY_CLIENT_ERROR, None),
    "top_level_scalars": (raw_case(b'"just a string"'), ANY_CLIENT_ERROR, None),
    "null_body": (raw_case(b"null"), ANY_CLIENT_ERROR, None),
    "objects_where_strings_go": (
        json_case(lambda t: replace_strings(t, {"nested": [1, None]})),
        ANY_CLIENT_ERROR,
        None,
    ),
    "huge_numbers_everywhere": (json_case(lambda t: replace_strings(t, 2**70)), ANY_CLIENT_ERROR, None),
    "negative_numbers_everywhere": (json_case(lambda t: replace_strings(t, -(2**63) - 1)), ANY_CLIENT_ERROR, None),
    # Long, but well under the upload limit even with several fields, so they reach the views.
    "very_long_strings": (json_case(lambda t: replace_strings(t, "é" * 1_500)), ANY_CLIENT_ERROR, None),
    "oversized_body": (oversized, 413, "request_too_large"),
    "wrong_content_type": (raw_case(b"text=hello", "text/plain"), ANY_CLIENT_ERROR, None),
    "nul_in_a_form_body": (raw_case(b"text=a%00b", "application/x-www-form-urlencoded"), 400, "invalid_characters"),
    "nul_in_the_query": (with_query("q=a%00b"), 400, "invalid_characters"),
    "nul_in_path_parameters": (nul_in_path, 400, "invalid_characters"),
    "forged_identity_in_the_body": (forged_identity_body, 400, "identity_field_forbidden"),
    "forged_identity_in_the_query": (
        with_query("owner=teammate&tenant_id=2&actor_id=3"),
        400,
        "identity_field_forbidden",
    ),
}

# Routes authenticated by a signature take identity from the signature alone (DESIGN.md): outside /api/ a
# body's "owner" is data, neither refused nor believed. A route without path parameters has none to spoil.
SKIPS: dict[str, Callable[[Route], bool]] = {
    "forged_identity_in_the_body": lambda r: not r.template.startswith("/api/"),
    "forged_identity_in_the_query": lambda r: not r.template.startswith("/api/"),
    "nul_in_path_parameters": lambda r: not r.params,
}


def check(world: World, request: Request, status: int | None, code: str | None) -> str | None:
    """What is wrong with the answer to ``request`` (None: nothing)."""
    cache.clear()  # rate limits count per test; many routes in one test must not trip them
    before = table_counts()
    response = world.send(request)
    where = str(request.route)
    if response.status_code >= 500:
        return f"{where}: {response.status_code} {response.content[:300]!r}"
    if status is not None and response.status_code != status:
        return f"{where}: expected {status}, got {response.status_code} {response.content[:300]!r}"
    if response.status_code >= 400:
        if request.path.startswith(("/api/", "/integrations/")):
            try:
                error = json.loads(response.content)["error"]
            except (ValueError, KeyError, TypeError):
                return f"{where}: {response.status_code} without the error envelope: {response.content[:200]!r}"
            if code is not None and error["code"] != code:
                return f"{where}: expected code {code}, got {error['code']}"
        writes = changed(before, table_counts())
        if writes:
            return f"{where}: refused with {response.status_code} but wrote {writes}"
    return None


def failures(world: World, case: str) -> list[str]:
    make, status, code = CASES[case]
    skip = SKIPS.get(case, lambda r: False)
    return [
        problem
        for route in ROUTES
        if not skip(route)
        for problem in [check(world, make(world, route), status, code)]
        if problem
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_never_errors_and_never_writes_partially(world, case):
    assert failures(world, case) == []


@pytest.fixture(scope="module")
def production_unit(
    django_db_setup: None, start_child: Callable[..., Child], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProductionUnit]:
    """One production web unit for the module; each test's rows reach it through the shared database."""
    key = Ed25519PrivateKey.generate()
    web = start_production_web(
        start_child, tmp_path_factory.mktemp("production"), TESS_DISCORD_PUBLIC_KEY=discord_public_key(key)
    )
    # Straight to gunicorn: these pin Tess's answers, and nginx refuses some of the cases (a NUL in the path)
    # with its own 400 page before Tess sees them.
    yield ProductionUnit(web.http_port, web.credentials, key)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_the_same_way_under_production_settings(cast, token_for, production_unit, case):
    """The same cases over HTTP against the production HTTP server (gunicorn, production settings and middleware
    order, real Redis): what the test settings prove must hold where it runs."""
    assert failures(production_world(cast, token_for, production_unit), case) == []


def plausible_bodies_reach_the_views(world: World) -> None:
    for route in ROUTES:
        cache.clear()
        response = world.send(Request(route, world.path(route), as_json(world.template(route))))
        assert response.status_code < 500, (str(route), response.content[:300])
        if response.status_code == 400:
            assert json.loads(response.content)["error"]["code"] not in (
                "invalid_characters",
                "parse_error",
                "identity_field_forbidden",
            ), str(route)


def test_the_plausible_bodies_reach_the_views(world):
    """The baseline: the ordinary template bodies are not refused by the guard (else the cases prove little)."""
    plausible_bodies_reach_the_views(world)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_plausible_bodies_reach_the_views_under_production_settings(cast, token_for, production_unit):
    plausible_bodies_reach_the_views(production_world(cast, token_for, production_unit))


def test_an_oversized_body_is_413_even_without_a_json_content_type(world):
    route = next(r for r in ROUTES if str(r) == "POST /api/v1/sessions/{session_id}/turns/")
    request = Request(route, world.path(route), b"x" * (UPLOAD_LIMIT + 1), content_type="application/octet-stream")
    response = world.send(request)
    assert response.status_code == 413
    assert json.loads(response.content)["error"]["code"] == "request_too_large"
