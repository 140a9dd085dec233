"""Provisioning commands: tenants, users with roles and a token printed once, and the demo accounts."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from tess_site.accounts.models import Membership, PersonalToken, Tenant

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_tess_tenant_creates_and_lists():
    assert "created tenant acme" in run("tess_tenant", "create", "acme", "--name", "Acme Inc")
    assert "acme\tAcme Inc" in run("tess_tenant", "list")


def test_tess_tenant_refuses_a_duplicate_and_a_bad_slug():
    run("tess_tenant", "create", "acme")
    with pytest.raises(CommandError, match="already exists"):
        run("tess_tenant", "create", "acme")
    with pytest.raises(CommandError):
        run("tess_tenant", "create", "Not A Slug")


def test_tess_user_adds_roles_and_prints_a_working_token_once():
    run("tess_tenant", "create", "acme")
    out = run(
        "tess_user",
        "add",
        "--tenant",
        "acme",
        "--username",
        "alice",
        "--role",
        "operator",
        "--role",
        "approver",
        "--token",
    )
    assert "created alice in acme: approver, operator" in out
    token = out.strip().rsplit(" ", 1)[-1]
    assert token.startswith("tess_")
    assert set(Membership.objects.filter(user__username="alice").values_list("role", flat=True)) == {
        "operator",
        "approver",
    }
    assert PersonalToken.objects.get().token_hash != token
    response = APIClient().get("/api/v1/me/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.json()["roles"] == ["approver", "operator"]


def test_tess_user_names_a_missing_tenant():
    with pytest.raises(CommandError, match="no tenant 'nope'"):
        run("tess_user", "add", "--tenant", "nope", "--username", "alice", "--role", "operator")


def test_tess_demo_is_idempotent_and_prints_passwords_only_when_it_makes_them():
    first = run("tess_demo")
    passwords = {line.split()[0]: line.split()[1] for line in first.splitlines() if line.startswith("  ")}
    assert set(passwords) == {"operator", "approver", "auditor"}
    for username, password in passwords.items():
        assert authenticate(username=username, password=password) is not None
    second = run("tess_demo")
    assert all(password not in second for password in passwords.values())
    assert "(unchanged)" in second
    assert Tenant.objects.filter(slug="demo").count() == 1
    assert Membership.objects.filter(tenant__slug="demo").count() == 3


def test_tess_demo_gives_the_demo_accounts_e_mail_so_approval_links_are_delivered():
    from django.contrib.auth.models import User

    run("tess_demo")
    emails = dict(
        User.objects.filter(username__in=["operator", "approver", "auditor"]).values_list("username", "email")
    )
    assert emails == {name: f"{name}@demo.tess.invalid" for name in ("operator", "approver", "auditor")}
    User.objects.filter(username="approver").update(email="me@example.org")
    run("tess_demo")  # an address someone set is kept
    assert User.objects.get(username="approver").email == "me@example.org"
