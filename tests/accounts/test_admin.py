"""Tokens in the admin: made by tenant admins for members, shown once, revocable, never editable."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tess_site.accounts.models import PersonalToken

pytestmark = pytest.mark.django_db


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_tenant_admin_makes_a_token_and_sees_it_once(cast):
    client = admin_client(cast.admin_user)
    response = client.post(
        "/admin/accounts/personaltoken/add/",
        {"tenant": cast.acme.pk, "user": cast.owner.pk, "name": "laptop", "days": 30},
        follow=True,
    )
    assert response.status_code == 200
    shown = re.search(r"tess_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}", response.content.decode())
    assert shown, "the new token is shown once"
    token = PersonalToken.objects.get(name="laptop")
    assert token.user == cast.owner and token.tenant == cast.acme
    page = client.get(f"/admin/accounts/personaltoken/{token.pk}/change/").content.decode()
    assert shown.group(0) not in page and token.token_hash not in page


def test_an_admin_cannot_make_a_token_for_another_tenants_user(cast):
    client = admin_client(cast.admin_user)
    response = client.post(
        "/admin/accounts/personaltoken/add/",
        {"tenant": cast.acme.pk, "user": cast.outsider.pk, "name": "sneaky", "days": 30},
    )
    assert response.status_code == 200  # the form comes back with an error
    assert not PersonalToken.objects.filter(name="sneaky").exists()


def test_an_admin_cannot_pick_another_tenant(cast):
    client = admin_client(cast.admin_user)
    client.post(
        "/admin/accounts/personaltoken/add/",
        {"tenant": cast.globex.pk, "user": cast.outsider.pk, "name": "cross", "days": 30},
    )
    assert not PersonalToken.objects.filter(name="cross").exists()


def test_revoking_in_the_admin_refuses_the_token_afterwards(cast, token_for):
    plaintext = token_for(cast.owner)
    token = PersonalToken.objects.get(user=cast.owner)
    client = admin_client(cast.admin_user)
    client.post(
        "/admin/accounts/personaltoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    token.refresh_from_db()
    assert token.revoked_at is not None
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/me/", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 401


def test_operators_do_not_see_tokens_in_the_admin(cast, token_for):
    token_for(cast.owner)
    response = admin_client(cast.owner).get("/admin/accounts/personaltoken/")
    assert response.status_code == 403


def test_an_admin_sees_only_its_tenants_tokens(cast, token_for):
    token_for(cast.outsider, cast.globex)
    token_for(cast.owner)
    page = admin_client(cast.admin_user).get("/admin/accounts/personaltoken/").content.decode()
    assert "outsider" not in page and "owner" in page


def test_the_login_page_renders_for_anonymous_visitors(db):
    assert Client().get("/admin/login/").status_code == 200


@pytest.mark.parametrize("who", ["owner", "approver", "auditor", "admin_user"])
def test_every_role_can_open_the_admin_index(cast, who):
    assert admin_client(getattr(cast, who)).get("/admin/").status_code == 200


def test_the_tenant_filter_names_only_the_admins_tenants(cast, token_for):
    token_for(cast.outsider, cast.globex)
    token_for(cast.owner)
    page = admin_client(cast.admin_user).get("/admin/accounts/membership/").content.decode()
    assert "globex" not in page.lower()


@pytest.mark.parametrize("page", ["/admin/accounts/membership/add/", "/admin/accounts/personaltoken/add/"])
def test_a_tenant_admin_is_offered_only_users_of_their_tenants(cast, page):
    html = admin_client(cast.admin_user).get(page).content.decode()
    offered = set(re.findall(r'<option value="\d+"[^>]*>([^<]+)</option>', html))
    assert {"owner", "teammate", "approver", "auditor", "admin_user"} <= offered
    assert "outsider" not in offered


def test_a_tenant_admin_cannot_grant_their_tenant_to_another_tenants_user(cast):
    from tess_site.accounts.models import Membership

    response = admin_client(cast.admin_user).post(
        "/admin/accounts/membership/add/", {"tenant": cast.acme.pk, "user": cast.outsider.pk, "role": "operator"}
    )
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not Membership.objects.filter(tenant=cast.acme, user=cast.outsider).exists()


def test_a_superuser_is_offered_every_user(cast):
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root", password="root-pass-1234")
    html = admin_client(root).get("/admin/accounts/membership/add/").content.decode()
    assert "outsider" in html and "owner" in html
