"""The OpenAPI schema names every error answer an operation can give, with the one error envelope as its body,
and the list filters refuse what the schema says they refuse (an empty value where it claims minLength)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from tests.api.test_error_envelope import assert_envelope

ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
METHODS = ("get", "post", "put", "patch", "delete")


@cache
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in schema()["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_the_error_envelope_is_one_component():
    components = schema()["components"]["schemas"]
    assert components["ErrorEnvelope"]["required"] == ["error"]
    assert set(components["ErrorBody"]["properties"]) == {"code", "message", "correlation_id", "details"}


def test_every_operation_documents_the_answers_any_route_can_give():
    missing = []
    for path, method, operation in operations():
        responses = operation["responses"]
        expected = {"400", "503"}
        if method != "get":
            expected.add("413")
        security = operation.get("security") or []
        if security and {} not in security:
            expected |= {"401", "403"}
        if "{" in path:
            expected.add("404")
        if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", [])):
            expected |= {"409", "422"}
        missing += [f"{method.upper()} {path} {code}" for code in sorted(expected - set(responses))]
    assert missing == []


def test_error_answers_carry_the_envelope_and_retry_after_where_it_applies():
    for path, method, operation in operations():
        for code, response in operation["responses"].items():
            if code < "400" or "content" not in response:
                continue  # a view's own description-only answer (health's 503 is its report)
            if response["content"]["application/json"]["schema"] == ENVELOPE and code in ("429", "503"):
                assert "Retry-After" in response.get("headers", {}), (method, path, code)


@pytest.mark.parametrize(
    ("path", "method", "codes"),
    [
        ("/api/v1/auth/token/", "post", {"401", "429"}),
        ("/api/v1/handoffs/{handoff_id}/result/", "post", {"403", "409"}),
        ("/api/v1/sessions/{session_id}/cutover/", "post", {"409", "501"}),
        ("/api/v1/memory/", "delete", {"409"}),
        ("/api/v1/memory/operational/{record_id}/", "delete", {"501"}),
        ("/api/v1/cards/{card_id}/confirm/", "post", {"409"}),
        ("/api/v1/coding-memory/{entry_id}/apply/", "post", {"409"}),
        ("/api/v1/sessions/discovered/", "get", {"501"}),
        ("/api/v1/sessions/", "post", {"404", "409", "501", "502"}),  # an unknown provider instance: 404
        ("/api/v1/me/tenant/", "post", {"404"}),
        ("/api/v1/memory/", "delete", {"404"}),
    ],
)
def test_a_view_adds_the_refusals_only_it_can_give(path, method, codes):
    responses = schema()["paths"][path][method]["responses"]
    assert codes <= set(responses)
    assert all(responses[code]["content"]["application/json"]["schema"] == ENVELOPE for code in codes)


def test_existing_success_answers_are_unchanged():
    responses = schema()["paths"]["/api/v1/sessions/"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/SessionList"}
    assert schema()["paths"]["/api/v1/sessions/"]["get"]["operationId"] == "api_v1_sessions_list"


def _min_length_filters() -> list[tuple[str, str]]:
    return [
        (path, parameter["name"])
        for path, method, operation in operations()
        if method == "get"
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query" and parameter["schema"].get("minLength")
    ]


def test_the_filters_with_a_min_length_are_the_list_filters():
    assert sorted(_min_length_filters()) == [
        ("/api/v1/approvals/", "status"),
        ("/api/v1/cards/", "kind"),
        ("/api/v1/cards/", "status"),
        ("/api/v1/coding-memory/", "status"),
        ("/api/v1/coding-memory/", "workspace"),
        ("/api/v1/handoffs/", "session_id"),
        ("/api/v1/handoffs/", "status"),
        ("/api/v1/sessions/", "agent_state"),
        ("/api/v1/sessions/", "owned_by"),
        ("/api/v1/sessions/", "provider"),
        ("/api/v1/sessions/", "q"),
        ("/api/v1/usage/", "group_by"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "name"), _min_length_filters())
@pytest.mark.parametrize("value", ["", "%20"])
def test_an_empty_filter_is_refused_as_the_schema_says(cast, api_as, path, name, value):
    body = assert_envelope(api_as(cast.owner).get(f"{path}?{name}={value}"), 400, "validation_error")
    assert name in body["error"]["details"]["fields"]


@pytest.mark.django_db
def test_a_filled_filter_still_filters(cast, api_as):
    response = api_as(cast.owner).get("/api/v1/approvals/?status=pending")
    assert response.status_code == 200, response.content
