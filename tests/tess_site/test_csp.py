"""The Content-Security-Policy on every page, and the drawer's markup on admin pages for members only."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def directives(response) -> dict[str, str]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part for part in (p.strip() for p in policy.split(";")) if part}


def test_admin_pages_allow_only_scripts_served_by_tess(cast):
    client = Client()
    client.force_login(cast.owner)
    response = client.get("/admin/")
    assert response.status_code == 200
    policy = directives(response)
    assert policy["script-src"] == "script-src 'self'"
    assert "'unsafe-inline'" not in policy["style-src"]
    assert policy["connect-src"] == "connect-src 'self'"
    assert policy["frame-ancestors"] == "frame-ancestors 'none'"


def test_the_api_docs_load_their_script_from_a_url_not_inline(cast):
    client = Client()
    client.force_login(cast.owner)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert "script-src 'self'" in response["Content-Security-Policy"]
    html = response.content.decode()
    assert not re.search(r"<script>\s*\S", html), "an inline script would be blocked by the policy"


def test_the_drawer_is_on_admin_pages_of_signed_in_users_only(cast):
    client = Client()
    signed_out = client.get("/admin/login/")
    assert signed_out.status_code == 200
    login = signed_out.content.decode()
    assert 'id="tess-root"' not in login and "tess/drawer.js" not in login
    client.force_login(cast.owner)
    signed_in = client.get("/admin/")
    assert signed_in.status_code == 200
    page = signed_in.content.decode()
    assert 'id="tess-root"' in page
    assert 'src="/static/tess/drawer.js" defer' in page
    assert not re.search(r"<script>\s*\S", page)
