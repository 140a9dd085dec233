"""Shared fixtures: the standing cast of every test, and the guard that keeps CI on real services.

The cast, in tenant ``acme``: ``owner`` (operator), ``teammate`` (another operator), ``approver``,
``auditor``, ``admin_user``; and ``outsider``, an operator of another tenant ``globex``. Every
endpoint has a test that the teammate and the outsider are refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from tess_site.accounts import services as accounts
from tess_site.accounts.models import Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Role, Scope

AUDIT_TABLE = "approvals_app_auditevent"
AUDIT_HEAD_TABLE = "approvals_app_auditchainhead"


# The files that take longest (each starts servers, peers or many examples). Parallel workers take whole files
# (scripts/test.sh: --dist loadfile); these start first, so no worker is left running one alone at the end.
LONGEST_FILES = (
    "tests/providers_app/test_contract.py",
    "tests/providers_app/test_matrix.py",
    "tests/api/test_schemathesis.py",
    "tests/cli/test_commands.py",
    "tests/tess_site/test_preflight.py",
    "tests/sessions_app/test_stream_websocket.py",
    "tests/api/test_identity_fields.py",
    "tests/browser/test_drawer_page.py",
    "tests/cli/test_stream.py",
    "tests/browser/test_drawer_memory.py",
    "tests/memory_app/coding/test_ingest.py",
    "tests/tess_site/test_bad_input.py",
)


def _longest_first(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``postgres``/``redis`` need the real service. CI fails without them; a laptop skips loudly."""
    from django.conf import settings

    _longest_first(items)

    missing = []
    if not (settings.DATABASES["default"]["ENGINE"].endswith("postgresql")):
        missing.append("postgres")
    if not settings.REDIS_URL:
        missing.append("redis")
    if not missing:
        return
    skipped = [item for item in items if any(item.get_closest_marker(m) for m in missing)]
    if not skipped:
        return
    if os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError(f"CI=true but {', '.join(missing)} is not configured; refusing to skip tests")
    banner = f"SKIPPING {len(skipped)} TESTS THAT NEED {' AND '.join(m.upper() for m in missing)}:"
    print("\n" + banner + "\n" + "\n".join(f"  SKIPPED: {item.nodeid}" for item in skipped))
    for item in skipped:
        item.add_marker(pytest.mark.skip(reason=f"NEEDS {' AND '.join(m.upper() for m in missing)}"))


@pytest.fixture(scope="session", autouse=True)
def _allow_flushing_audit_between_transactional_tests(
    django_db_setup: None, django_db_blocker: object
) -> Iterator[None]:
    """Transactional tests reset the database with TRUNCATE, which the audit triggers rightly refuse.

    Only the test harness's flush disables the table's user triggers for the duration of that one
    statement; nothing in the product has such a path.
    """
    if connection.vendor != "postgresql":
        yield
        return
    # Patched on the backend's class: tests that run inside an event loop (browsers, websockets) may get
    # another connection object than the one this fixture sees.
    ops_class = type(connection.ops)
    original = ops_class.sql_flush
    original_execute = ops_class.execute_sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        statements = original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        guarded = [table for table in (AUDIT_TABLE, AUDIT_HEAD_TABLE) if table in tables]
        return [
            *(f'ALTER TABLE "{table}" DISABLE TRIGGER USER;' for table in guarded),
            *statements,
            *(f'ALTER TABLE "{table}" ENABLE TRIGGER USER;' for table in guarded),
        ]

    # A live server child (browser and websocket tests) may still be writing when the harness truncates;
    # PostgreSQL then breaks the lock cycle by failing one side. The flush is retried rather than lost.
    def execute_sql_flush(self, sql_list):
        from django.db import OperationalError

        for attempt in range(8):
            try:
                return original_execute(self, sql_list)
            except OperationalError as exc:
                if "deadlock detected" not in str(exc) or attempt == 7:
                    raise
                time.sleep(0.2 * (attempt + 1))

    ops_class.sql_flush = sql_flush  # type: ignore[method-assign]
    ops_class.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        ops_class.sql_flush = original  # type: ignore[method-assign]
        ops_class.execute_sql_flush = original_execute  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    """Throttle counters and other cached state never leak from one test into the next."""
    from django.core.cache import cache

    cache.clear()


def require_or_skip(message: str) -> None:
    """A test needs something installed on this machine: under CI=true its absence fails the run (.ci/run
    installs it); a local run skips, saying ``message`` in capitals."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: .ci/run installs it)")
    pytest.skip(message)


@dataclass
class Cast:
    acme: Tenant
    globex: Tenant
    owner: User
    teammate: User
    approver: User
    auditor: User
    admin_user: User
    outsider: User


def _member(tenant: Tenant, username: str, *roles: Role) -> User:
    user, _ = accounts.user_ensure(username=username, password=f"{username}-pass-1234")
    for role in roles:
        accounts.membership_grant(tenant=tenant, user=user, role=role)
    return user


@pytest.fixture
def cast(db: None) -> Cast:
    acme = accounts.tenant_create(slug="acme", name="Acme")
    globex = accounts.tenant_create(slug="globex", name="Globex")
    return Cast(
        acme=acme,
        globex=globex,
        owner=_member(acme, "owner", Role.OPERATOR),
        teammate=_member(acme, "teammate", Role.OPERATOR),
        approver=_member(acme, "approver", Role.APPROVER),
        auditor=_member(acme, "auditor", Role.AUDITOR),
        admin_user=_member(acme, "admin_user", Role.ADMIN, Role.OPERATOR),
        outsider=_member(globex, "outsider", Role.OPERATOR, Role.AUDITOR, Role.ADMIN),
    )


def scope_of(
    user: User, tenant: Tenant, channel: Channel = Channel.WEB, correlation_id: str = "test-correlation"
) -> Scope:
    """The Scope the server would derive for ``user`` in ``tenant``."""
    return Scope(
        tenant=tenant,
        actor=user,
        channel=channel,
        correlation_id=correlation_id,
        roles=roles_for(user=user, tenant=tenant),
    )


@pytest.fixture
def token_for(cast: Cast) -> Callable[..., str]:
    """Make a personal token for a user in a tenant (default acme) and return its plaintext."""

    def make(user: User, tenant: Tenant | None = None, days: int | None = None) -> str:
        scope = scope_of(user, tenant or cast.acme, Channel.CLI)
        return accounts.token_issue(scope=scope, name="test", days=days).plaintext

    return make


@pytest.fixture
def api_as(token_for: Callable[..., str]) -> Callable[..., APIClient]:
    """An API client authenticated with a fresh personal token of ``user``."""

    def make(user: User, tenant: Tenant | None = None) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user, tenant)}")
        return client

    return make


@pytest.fixture
def browser_as() -> Callable[[User], APIClient]:
    """An API client logged in with a Django session (the browser's way), CSRF checks on."""

    def make(user: User) -> APIClient:
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    return make


def csrf_token(client: APIClient) -> str:
    """Load an admin page like a browser does and return the CSRF cookie it sets."""
    client.get("/admin/")
    return client.cookies["csrftoken"].value
