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
    policy = directives(client.get("/admin/"))
    assert policy["script-src"] == "script-src 'self'"
    assert "'unsafe-inline'" not in policy["style-src"]
    assert policy["connect-src"] == "connect-src 'self'"
    assert policy["frame-ancestors"] == "frame-ancestors 'none'"


def test_the_api_docs_load_their_script_from_a_url_not_inline(cast):
    client = Client()
    client.force_login(cast.owner)
    html = client.get("/api/docs/").content.decode()
    assert not re.search(r"<script>\s*\S", html), "an inline script would be blocked by the policy"


def test_the_drawer_is_on_admin_pages_of_signed_in_users_only(cast):
    client = Client()
    login = client.get("/admin/login/").content.decode()
    assert 'id="tess-root"' not in login and "tess/drawer.js" not in login
    client.force_login(cast.owner)
    page = client.get("/admin/").content.decode()
    assert 'id="tess-root"' in page
    assert 'src="/static/tess/drawer.js" defer' in page
    assert not re.search(r"<script>\s*\S", page)
