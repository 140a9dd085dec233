"""Caller-supplied identity is refused on every API route, present and future.

The routes are read from the URL configuration itself, so a route added later is covered without
touching this file.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tess_site.middleware import IDENTITY_FIELDS

pytestmark = pytest.mark.django_db

# Fixed values: the test ids are built from them, and parallel workers must collect the same ids.
_CONVERTERS = {"int": "1", "uuid": str(uuid.UUID(int=1)), "slug": "x", "str": "x", "path": "x"}


def _walk(patterns: list[URLPattern | URLResolver], prefix: str = "") -> Iterator[str]:
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, route)
        else:
            yield route


def _concrete(route: str) -> str:
    route = route.lstrip("^").rstrip("$")

    def sample(match: re.Match[str]) -> str:
        return _CONVERTERS[match.group(1) or "str"]

    return "/" + re.sub(r"<(?:(\w+):)?\w+>", sample, route)


API_ROUTES = sorted({_concrete(r) for r in _walk(get_resolver().url_patterns) if r.startswith("api/")})
FIELDS = sorted(IDENTITY_FIELDS)


def test_the_walk_finds_the_api_routes():
    assert "/api/v1/auth/token/" in API_ROUTES and "/api/v1/audit/" in API_ROUTES


@pytest.mark.parametrize("path", API_ROUTES)
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_identity_in_the_body_is_refused(path, method, cast, api_as):
    field = FIELDS[hash((path, method)) % len(FIELDS)]
    response = getattr(api_as(cast.owner), method)(path, {field: cast.teammate.pk}, format="json")
    assert response.status_code == 400, (path, method, response.content[:200])
    body = response.json()
    assert body["error"]["code"] == "identity_field_forbidden"
    assert body["error"]["details"]["fields"] == [field]


@pytest.mark.parametrize("path", API_ROUTES)
def test_identity_in_the_query_is_refused(path, cast, api_as):
    response = api_as(cast.owner).get(path, {"owner_id": cast.teammate.pk})
    assert response.status_code == 400, path
    assert response.json()["error"]["code"] == "identity_field_forbidden"


@pytest.mark.parametrize("field", FIELDS)
def test_every_identity_field_is_refused(field, cast, api_as):
    response = api_as(cast.owner).post("/api/v1/me/tenant/", {"slug": "acme", field: "x"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["fields"] == [field]


def test_identity_in_a_form_body_is_refused(cast, api_as):
    response = api_as(cast.owner).post("/api/v1/auth/token/", {"username": "owner", "tenant_id": "2"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "identity_field_forbidden"


def test_it_is_refused_before_authentication(db):
    from rest_framework.test import APIClient

    response = APIClient().post("/api/v1/auth/token/", {"username": "a", "password": "b", "actor": "x"}, format="json")
    assert response.status_code == 400


LOGIN = {"username": "owner", "password": "owner-pass-1234"}


def test_nested_keys_are_data_not_identity(cast):
    """Only top-level keys name the caller; a nested ``owner`` (say, of a repository) is ordinary data."""
    from rest_framework.test import APIClient

    response = APIClient().post("/api/v1/auth/token/", {**LOGIN, "meta": {"owner": "x"}}, format="json")
    assert response.status_code == 201


def test_explicit_target_fields_are_not_identity_fields(cast):
    from rest_framework.test import APIClient

    response = APIClient().post("/api/v1/auth/token/", {**LOGIN, "assignee": "teammate"}, format="json")
    assert response.status_code == 201
