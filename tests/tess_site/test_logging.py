"""Log lines carry the correlation id of what they belong to, and never a credential.

Records are read through a handler wired exactly like the configured console handler (its filters and
formatter), so these tests check the LOGGING setting as well as the filters.
"""

from __future__ import annotations

import http.client
import logging
import re
from collections.abc import Iterator

import pytest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client, override_settings
from django.urls import path

from tess_site.context import reset_correlation_id, set_correlation_id
from tess_site.logging import CorrelationIdFilter, RedactSecretsFilter
from tests.waiting import wait_for

logger = logging.getLogger("tess.test.logging")

TOKEN = "tess_AbCd1234_" + "Zy9-" * 10 + "xyz"
INCOMING_ID = "req-7f3a9c2e-client"


def _logs_something(request: HttpRequest) -> HttpResponse:
    logger.warning("handling %s", request.path)
    return JsonResponse({"ok": True})


def _breaks(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("something broke")


urlpatterns = [
    path("chores/", _logs_something),
    path("api/v1/chores/", _logs_something),
    path("api/v1/broken/", _breaks),
]


class Captured(logging.Handler):
    """Formats every record it sees, as the console would print it."""

    def __init__(self, template: logging.Handler) -> None:
        super().__init__(level=logging.DEBUG)
        self.filters = list(template.filters)
        self.setFormatter(template.formatter)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


def _console_handler() -> logging.Handler:
    handlers = [*logging.getLogger().handlers]
    for handler in handlers:
        kinds = {type(f) for f in handler.filters}
        if {CorrelationIdFilter, RedactSecretsFilter} <= kinds:
            return handler
    raise AssertionError(f"no root handler has the correlation and redaction filters: {handlers}")


@pytest.fixture
def captured() -> Iterator[Captured]:
    handler = Captured(_console_handler())
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)


@override_settings(ROOT_URLCONF=__name__)
def test_log_lines_during_a_request_carry_its_correlation_id(captured):
    response = Client().get("/chores/", headers={"X-Correlation-ID": INCOMING_ID})
    assert response.status_code == 200
    [record] = [r for r in captured.records if r.name == logger.name]
    assert record.correlation_id == INCOMING_ID
    assert f"[{INCOMING_ID}] handling /chores/" in captured.text()


@override_settings(ROOT_URLCONF=__name__)
def test_log_lines_of_a_request_without_an_id_carry_the_one_it_was_given(captured):
    response = Client().get("/chores/")
    made = response.headers["X-Correlation-ID"]
    [record] = [r for r in captured.records if r.name == logger.name]
    assert record.correlation_id == made


@override_settings(ROOT_URLCONF=__name__)
def test_two_requests_do_not_share_a_correlation_id(captured):
    first = Client().get("/chores/").headers["X-Correlation-ID"]
    second = Client().get("/chores/").headers["X-Correlation-ID"]
    assert first != second
    ids = [r.correlation_id for r in captured.records if r.name == logger.name]
    assert ids == [first, second]


@override_settings(ROOT_URLCONF=__name__)
def test_an_unhandled_api_error_is_logged_with_the_requests_correlation_id(captured):
    response = Client().get("/api/v1/broken/", headers={"X-Correlation-ID": INCOMING_ID})
    assert response.status_code == 500
    assert response.headers["X-Correlation-ID"] == INCOMING_ID
    [record] = [r for r in captured.records if r.name == "tess.request"]
    assert record.correlation_id == INCOMING_ID
    assert "something broke" not in response.content.decode()


@pytest.mark.django_db
def test_djangos_own_response_log_line_carries_the_requests_correlation_id(captured):
    # Django logs 4xx/5xx responses (django.request) after the whole middleware chain has returned.
    response = Client().get("/api/v1/health/", headers={"X-Correlation-ID": INCOMING_ID})
    assert response.status_code == 401
    [record] = [r for r in captured.records if r.name == "django.request"]
    assert record.correlation_id == INCOMING_ID


@override_settings(ROOT_URLCONF=__name__)
def test_a_requests_correlation_id_does_not_outlive_it(captured):
    Client().get("/chores/", headers={"X-Correlation-ID": INCOMING_ID})
    logger.warning("later, unrelated")
    assert captured.records[-1].correlation_id == "-"


@pytest.mark.postgres
def test_log_lines_of_a_request_to_the_real_asgi_server_carry_its_correlation_id(daphne):
    conn = http.client.HTTPConnection(daphne.address, timeout=10)
    try:
        conn.request("GET", "/api/v1/health/", headers={"X-Correlation-ID": INCOMING_ID})
        response = conn.getresponse()
        assert response.status == 401
        assert response.getheader("X-Correlation-ID") == INCOMING_ID
    finally:
        conn.close()
    line = f"WARNING django.request [{INCOMING_ID}] Unauthorized: /api/v1/health/"
    assert wait_for(lambda: line in daphne.child.wrote(), timeout=5), daphne.child.output()


def test_log_lines_outside_any_request_say_so(captured):
    logger.warning("background")
    assert captured.records[-1].correlation_id == "-"


def test_log_lines_carry_a_bound_correlation_id_outside_http_too(captured):
    token = set_correlation_id("task-0001-abcdef")
    try:
        logger.warning("in a task")
    finally:
        reset_correlation_id(token)
    assert captured.records[-1].correlation_id == "task-0001-abcdef"


@pytest.mark.parametrize(
    ("message", "args", "secret", "kept"),
    [
        pytest.param("got token %s", (TOKEN,), TOKEN, "got token", id="personal-token"),
        pytest.param(
            "header Authorization: Bearer %s", ("abc.DEF-ghi_jkl~mno",), "abc.DEF-ghi_jkl~mno", "Bearer", id="bearer"
        ),
        pytest.param(
            "connecting to %s",
            ("postgres://tess:hunter2-db-pass@db.internal/tess",),
            "hunter2-db-pass",
            "db.internal",
            id="database-url-password",
        ),
        pytest.param(
            "broker %s", ("redis://tess:redis-pass-42@cache:6379/0",), "redis-pass-42", "cache:6379", id="redis-url"
        ),
        pytest.param(
            "broker %s",
            ("redis://:redis-pass-41@cache:6379/0",),
            "redis-pass-41",
            "cache:6379",
            id="redis-url-password-without-user",
        ),
        pytest.param("login with password=%s failed", ("Tr0ub4dor-3",), "Tr0ub4dor", "failed", id="password"),
        pytest.param("model key %s", ("sk-test-SUPERSECRET123",), "SUPERSECRET123", "model key", id="sk-key"),
        pytest.param(
            "retrying https://api.example/v1?api_key=%s", ("abc123xyz",), "abc123xyz", "api.example", id="api-key"
        ),
    ],
)
def test_it_redacts_credentials_in_log_lines(captured, message, args, secret, kept):
    logger.warning(message, *args)
    line = captured.lines[-1]
    assert secret not in line
    assert "[redacted]" in line
    assert kept in line


def test_it_redacts_a_credential_passed_in_a_mapping_argument(captured):
    logger.warning("request %(method)s with %(auth)s", {"method": "GET", "auth": f"Bearer {TOKEN}"})
    assert TOKEN not in captured.lines[-1]
    assert captured.lines[-1].endswith("request GET with Bearer [redacted]")


def test_it_redacts_credentials_in_a_logged_exception(captured):
    try:
        raise ConnectionError("could not connect to postgres://tess:hunter2-db-pass@db.internal/tess")
    except ConnectionError:
        logger.exception("database unavailable")
    assert "hunter2-db-pass" not in captured.lines[-1]
    assert "ConnectionError" in captured.lines[-1]  # the traceback itself is kept


def test_it_echoes_a_well_formed_correlation_id():
    response = Client().get("/healthz", headers={"X-Correlation-ID": INCOMING_ID})
    assert response.headers["X-Correlation-ID"] == INCOMING_ID


@pytest.mark.parametrize(
    "incoming",
    ["short", "has spaces in it ok", "x" * 200, "<script>alert(1)</script>", "-leading-dash-1234", "naïve-ünïcode-1"],
)
def test_it_replaces_a_malformed_correlation_id(incoming):
    response = Client().get("/healthz", headers={"X-Correlation-ID": incoming})
    replaced = response.headers["X-Correlation-ID"]
    assert replaced != incoming
    assert re.fullmatch(r"[0-9a-f]{32}", replaced)


def test_it_gives_a_request_without_one_a_fresh_correlation_id():
    first = Client().get("/healthz").headers["X-Correlation-ID"]
    second = Client().get("/healthz").headers["X-Correlation-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first != second
