"""No log line carries a live credential: approval-link tokens and personal tokens are masked everywhere.

The unit tests pin the masking; the last test runs the production web tier (nginx with
``deploy/nginx/tess.conf`` in front of gunicorn for HTTP and daphne for websockets, production settings and
logging), walks a whole approval flow and a refused ``?token=`` request, and scans every line any of them
wrote: both servers' access logs and nginx's access and error logs.
"""

from __future__ import annotations

import http.client
import json
import logging
import uuid
from collections.abc import Callable
from urllib.parse import quote, urlparse

import pytest
from django.conf import settings as django_settings
from django.test import Client
from websockets.sync.client import connect

from tess_site.logging import RedactingFormatter, RedactingJsonFormatter, redact
from tests.factories import SessionFactory
from tests.tess_site.children import Child
from tests.tess_site.production import start_production_web
from tests.waiting import wait_for

APPROVAL_TOKEN = "Zq3" + "x" * 40  # the shape of secrets.token_urlsafe(32): 43 URL-safe characters
PERSONAL_TOKEN = "tess_abcd1234_" + "s" * 32


@pytest.mark.parametrize(
    "line",
    [
        f'127.0.0.1:5 - - [x] "GET /approvals/{APPROVAL_TOKEN}/" 200 10',
        f'"GET /admin/login/?next=/approvals/{APPROVAL_TOKEN}/" 200',
        f"GET /admin/login/?next=%2Fapprovals%2F{APPROVAL_TOKEN}%2F",
        f"Forbidden (CSRF cookie not set.): /approvals/{APPROVAL_TOKEN}/",
        f"Unauthorized: /api/v1/me/?token={PERSONAL_TOKEN}",
    ],
)
def test_tokens_in_logged_urls_are_masked(line):
    masked = redact(line)
    assert APPROVAL_TOKEN not in masked and PERSONAL_TOKEN not in masked
    assert "[redacted]" in masked


def test_ids_in_api_urls_stay_readable():
    line = f"GET /api/v1/approvals/{uuid.uuid4()}/"
    assert redact(line) == line


@pytest.mark.parametrize("formatter", [RedactingFormatter("%(message)s %(request)s"), RedactingJsonFormatter()])
def test_the_formatters_mask_what_extra_fields_add(formatter):
    # Django's request logging passes the request as an extra field; its repr carries the query string.
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Unauthorized", None, None)
    record.request = f"<ASGIRequest: GET '/api/v1/me/?token={PERSONAL_TOKEN}'>"
    record.correlation_id = "-"
    assert PERSONAL_TOKEN not in formatter.format(record)


def _request(port: int, method: str, path: str, headers: dict[str, str], body: str = "") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        base = {"Host": "tess.example.com", "X-Forwarded-Proto": "https"}
        conn.request(method, path, body=body or None, headers={**base, **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _browser_cookie(user) -> str:
    browser = Client()
    browser.force_login(user)
    name = django_settings.SESSION_COOKIE_NAME
    return f"{name}={browser.cookies[name].value}"


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_whole_approval_flow_under_production_logging_leaves_no_live_token_in_any_line(
    tmp_path, cast, token_for, settings, start_child: Callable[..., Child]
):
    mail = {"EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend", "EMAIL_FILE_PATH": str(tmp_path)}
    web = start_production_web(start_child, tmp_path / "web", turns=True, **mail)
    port, child = web.port, web.child
    type(cast.approver).objects.filter(pk=cast.approver.pk).update(email="approver@example.com")
    owner_token, approver_token = token_for(cast.owner), token_for(cast.approver)
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="logs")

    # The owner asks; the approver's own drawer socket receives the one-time link.
    me = connect(
        f"ws://127.0.0.1:{port}/ws/me/", additional_headers={"Authorization": f"Bearer {approver_token}"}, proxy=None
    )
    with me:
        asked = _request(
            port,
            "POST",
            f"/api/v1/sessions/{session.pk}/terminate/",
            {"Authorization": f"Bearer {owner_token}", "Content-Type": "application/json", "Idempotency-Key": "k1"},
            "{}",
        )
        assert asked[0] == 202, asked
        while (frame := json.loads(me.recv(timeout=30)))["kind"] != "approval.link":
            pass
    link = frame["body"]["url"]
    token = urlparse(link).path.rstrip("/").rsplit("/", 1)[-1]
    assert len(token) >= 40

    page = f"/approvals/{token}/"
    assert _request(port, "GET", page, {})[0] in (200, 302)  # a mail scanner following the link
    assert _request(port, "GET", f"/admin/login/?next={quote(page)}", {})[0] == 200  # anonymous, sent to log in
    assert _request(port, "POST", page, {"Content-Type": "application/x-www-form-urlencoded"}, "decision=approve")[
        0
    ] in (302, 403)  # no session, no CSRF token
    # The session's auth hash is keyed by the server's SECRET_KEY: sign the approver in under the child's.
    settings.SECRET_KEY = web.secret("secret_key")
    cookie = _browser_cookie(cast.approver)
    status, html, cookies = _page(port, page, cookie)
    assert status == 200, html[:300]
    csrf = html.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    csrf_cookie = next(part.split("=", 1)[1] for part in cookies if part.startswith("csrftoken="))
    decided = _request(
        port,
        "POST",
        page,
        {
            "Cookie": f"{cookie}; csrftoken={csrf_cookie}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "https://tess.example.com",
            "Referer": "https://tess.example.com" + page,
        },
        f"decision=approve&csrfmiddlewaretoken={csrf}",
    )
    assert decided[0] in (200, 302), decided
    # A personal token put in the URL is refused, and must not be logged either.
    assert _request(port, "GET", f"/api/v1/me/?token={owner_token}", {})[0] in (400, 401)
    assert _request(port, "GET", "/healthz", {})[0] == 200  # the access log of the last request is written

    assert wait_for(lambda: "/api/v1/me/?token=" in child.wrote(), timeout=10), child.output()[-3000:]
    lines = web.log_lines()
    # Each access log saw the flow: gunicorn's and daphne's through Tess's logging, nginx's in its own file.
    http_access = [line for line in lines if '"logger": "tess.access"' in line and "/approvals/" in line]
    assert any("/approvals/[redacted]" in line for line in http_access), lines[-20:]
    assert any('"logger": "tess.access"' in line and "/ws/me/" in line for line in lines), lines[-20:]
    nginx_access = (tmp_path / "web" / "nginx" / "tess.access.log").read_text().splitlines()
    assert any('"GET /approvals/[redacted]/"' in line for line in nginx_access), nginx_access[-5:]
    for secret in (token, owner_token, approver_token, link):
        leaked = [line for line in lines if secret in line]
        assert not leaked, leaked[:3]


def _page(port: int, path: str, cookie: str) -> tuple[int, str, list[str]]:
    """A page as the signed-in browser loads it: status, HTML, and the cookies it sets (the form's CSRF cookie)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request("GET", path, headers={"Host": "tess.example.com", "X-Forwarded-Proto": "https", "Cookie": cookie})
        response = conn.getresponse()
        html = response.read().decode()
        cookies = [header.split(";", 1)[0] for header in response.headers.get_all("Set-Cookie") or []]
        return response.status, html, cookies
    finally:
        conn.close()
