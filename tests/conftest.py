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
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from rest_framework.test import APIClient

from tess_site.accounts import services as accounts
from tess_site.accounts.models import Membership, Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Role, Scope

AUDIT_TABLE = "approvals_app_auditevent"
AUDIT_HEAD_TABLE = "approvals_app_auditchainhead"
# Content types and permissions come from the code, not from tests: the flush's post_migrate signal would only
# insert again, app by app, the rows the flush deleted. The flush keeps them (tables that refer to them go).
KEPT_BY_FLUSH = ("django_content_type", "auth_permission")


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


def _template_name(controller_pid: int) -> str:
    """The run's migrated template database, named like the test databases (``scripts/services.sh`` drops it if
    the run that made it is gone)."""
    return f"test_{connection.settings_dict['NAME']}_template_{controller_pid}"


def _quoted(name: str) -> str:
    return connection.ops.quote_name(name)


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's test databases, except that parallel workers on PostgreSQL migrate only once per run.

    The first worker to get here builds a template database with every migration; each worker then clones it
    (``CREATE DATABASE ... TEMPLATE``), which costs a fraction of migrating. An advisory lock on the server
    orders the workers, and the template has no connection left open when it is cloned, as PostgreSQL requires.
    """
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _get_databases_for_setup

    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None or connection.vendor != "postgresql" or aliases - {"default"}:
        with django_db_blocker.unblock():
            config = setup_databases(
                verbosity=request.config.option.verbose,
                interactive=False,
                aliases=aliases,  # type: ignore[arg-type]  # any collection of aliases, as pytest-django passes
                serialized_aliases=serialized_aliases,
            )
        yield
        with django_db_blocker.unblock():
            _end_connections_left_open()
            teardown_databases(config, verbosity=request.config.option.verbose)
        return

    # The controller (scripts/test.sh's pytest) is every worker's parent; it drops the template at the end.
    template = _template_name(os.getppid())
    original_name = connection.settings_dict["NAME"]
    test_name = connection.settings_dict["TEST"]["NAME"]  # tess_site/settings/test.py names it, with _gw<n>
    with django_db_blocker.unblock():
        with connection._nodb_cursor() as lock:
            lock.execute("SELECT pg_advisory_lock(hashtext(%s))", [template])
            try:
                lock.execute("SELECT 1 FROM pg_database WHERE datname = %s", [template])
                if lock.fetchone() is None:
                    _build_template(connection, template)
                lock.execute(f"DROP DATABASE IF EXISTS {_quoted(test_name)}")
                lock.execute(f"CREATE DATABASE {_quoted(test_name)} TEMPLATE {_quoted(template)}")
            finally:
                lock.execute("SELECT pg_advisory_unlock(hashtext(%s))", [template])
        connection.close()
        from django.conf import settings

        settings.DATABASES["default"]["NAME"] = connection.settings_dict["NAME"] = test_name
        if "default" in serialized_aliases:
            connection._test_serialized_contents = connection.creation.serialize_db_to_string()  # type: ignore[attr-defined]
    yield
    with django_db_blocker.unblock():
        _end_connections_left_open()
        connection.creation.destroy_test_db(original_name, verbosity=request.config.option.verbose)


LEFT_OPEN = Path(__file__).resolve().parents[1] / "var" / "test-artifacts" / "connections-left-open.txt"


def _end_connections_left_open() -> None:
    """A connection that a test left open (a thread's own, still alive) keeps PostgreSQL from dropping the test
    database at the end, and the run fails there. Each one is ended, and named with its last statement in
    ``LEFT_OPEN`` (the output of a session's last teardown is not shown) so that its test can be found."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, left(query, 300) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        left = cursor.fetchall()
        for pid, _, _ in left:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    if not left:
        return
    lines = [f"A TEST LEFT A DATABASE CONNECTION OPEN (backend {pid}, {state}): {query}" for pid, state, query in left]
    LEFT_OPEN.parent.mkdir(parents=True, exist_ok=True)
    with LEFT_OPEN.open("a") as out:
        out.write("\n".join(lines) + "\n")


def _build_template(connection: BaseDatabaseWrapper, template: str) -> None:
    """Create and migrate ``template`` as a test database, then close every connection to it."""
    test_settings = connection.settings_dict["TEST"]
    test_name = test_settings["NAME"]
    original_name = connection.settings_dict["NAME"]
    test_settings["NAME"] = template
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    except BaseException:
        connection.close()
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(template)}")
        raise
    finally:
        test_settings["NAME"] = test_name
        connection.close()
        from django.conf import settings

        settings.DATABASES["default"]["NAME"] = connection.settings_dict["NAME"] = original_name


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller of a parallel run drops the template its workers cloned (they have all finished)."""
    if hasattr(session.config, "workerinput") or not getattr(session.config.option, "numprocesses", None):
        return
    if connection.vendor != "postgresql":
        return
    from pytest_django.plugin import blocking_manager_key

    with session.config.stash[blocking_manager_key].unblock(), connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(_template_name(os.getpid()))}")
    connection.close()


# A table with more rows than this is emptied by TRUNCATE, the rest by DELETE (see below).
TRUNCATE_FROM_ROWS = 5000


@pytest.fixture(scope="session", autouse=True)
def _flush_transactional_tests_by_delete(django_db_setup: None, django_db_blocker: object) -> Iterator[None]:
    """Transactional tests are reset by deleting rows, not by Django's TRUNCATE of every table.

    TRUNCATE gives each of the ~55 tables and their indexes new files, and cost about 185 ms a test here, against
    about 10 ms for DELETE on the few rows a test writes (277 transactional tests: most of a minute of the run).
    Every foreign key Django makes on PostgreSQL is deferrable, so the deletes may go in any order within the
    flush's one transaction. A table holding many rows (a size test's 100,000 sessions) is still truncated,
    which is cheaper there and leaves no dead rows for the next test's plans.

    The audit tables' triggers rightly refuse DELETE and TRUNCATE; only this harness's flush disables their user
    triggers, for the duration of that one transaction. Nothing in the product has such a path.
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
        tables = [table for table in tables if table not in KEPT_BY_FLUSH]
        if reset_sequences or not tables:
            statements = original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        else:
            statements = _emptying(self.connection, tables)
        guarded = [table for table in (AUDIT_TABLE, AUDIT_HEAD_TABLE) if table in tables]
        return [
            *(f'ALTER TABLE "{table}" DISABLE TRIGGER USER;' for table in guarded),
            *statements,
            *(f'ALTER TABLE "{table}" ENABLE TRIGGER USER;' for table in guarded),
        ]

    # A live server child (browser and websocket tests) may still be writing when the harness empties the
    # tables; PostgreSQL then breaks the lock cycle by failing one side. The flush is retried rather than lost.
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


def _emptying(connection: BaseDatabaseWrapper, tables: list[str]) -> list[str]:
    """The statements that empty ``tables``: DELETE for the ones with few rows, one TRUNCATE for the rest, in a
    transaction that holds every table's lock and whose foreign-key checks wait for its end."""
    quoted = [connection.ops.quote_name(table) for table in tables]
    probe = " UNION ALL ".join(
        f"SELECT {index} FROM (SELECT 1 FROM {name} OFFSET {TRUNCATE_FROM_ROWS} LIMIT 1) AS t{index}"
        for index, name in enumerate(quoted)
    )
    with connection.cursor() as cursor:
        cursor.execute(probe)
        many = {quoted[index] for (index,) in cursor.fetchall()}
    # Locked first, as TRUNCATE would lock them: a live server child writing meanwhile waits for the flush to end
    # (or is chosen to break a deadlock, see the retry), instead of adding a row that refers to one deleted here.
    statements = ["SET CONSTRAINTS ALL DEFERRED;", f"LOCK TABLE {', '.join(quoted)} IN ACCESS EXCLUSIVE MODE;"]
    if many:
        statements.append(f"TRUNCATE {', '.join(sorted(many))} CASCADE;")
    statements += [f"DELETE FROM {name};" for name in quoted if name not in many]
    return statements


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


# (username, tenant, roles), in the order the accounts services would make them.
_CAST = (
    ("owner", "acme", (Role.OPERATOR,)),
    ("teammate", "acme", (Role.OPERATOR,)),
    ("approver", "acme", (Role.APPROVER,)),
    ("auditor", "acme", (Role.AUDITOR,)),
    ("admin_user", "acme", (Role.ADMIN, Role.OPERATOR)),
    ("outsider", "globex", (Role.OPERATOR, Role.AUDITOR, Role.ADMIN)),
)


@pytest.fixture
def cast(db: None) -> Cast:
    """The cast, written as three bulk inserts: the very rows ``tenant_create``, ``user_ensure`` (staff, with the
    password ``<username>-pass-1234``) and ``membership_grant`` write, which touch no other table and send no
    signal. Most tests start with it, and the services' own queries (about 80) cost more than many tests do;
    the services themselves are tested in ``tests/accounts``."""
    acme, globex = Tenant.objects.bulk_create([Tenant(slug="acme", name="Acme"), Tenant(slug="globex", name="Globex")])
    tenants = {"acme": acme, "globex": globex}
    users = User.objects.bulk_create(
        [User(username=name, is_staff=True, password=make_password(f"{name}-pass-1234")) for name, _, _ in _CAST]
    )
    Membership.objects.bulk_create(
        [
            Membership(tenant=tenants[tenant], user=user, role=role.value)
            for user, (_, tenant, roles) in zip(users, _CAST, strict=True)
            for role in roles
        ]
    )
    return Cast(acme, globex, *users)


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
