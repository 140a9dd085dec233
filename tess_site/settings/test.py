"""Settings for the test suite. ``DATABASE_URL``/``REDIS_URL`` come from ``make test`` (real PostgreSQL and Redis)."""

import os
import tempfile

from .base import *  # noqa: F403
from .base import CHANNEL_LAYERS, INSTALLED_APPS, REDIS_URL
from .derived import databases
from .env import env_str

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed; tests never store real passwords
# Tasks run in the calling process in tests unless a test starts a real worker itself.
CELERY_TASK_ALWAYS_EAGER = True
# Parallel test processes (pytest-xdist workers) share one Redis. Channel groups are named after database ids,
# which every worker's own database numbers from 1, so each worker's channel layer gets its own prefix. A child
# process the tests start (a server, a worker) is handed the parent's prefix (tests/tess_site/children.py).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TESS_CHANNEL_PREFIX = env_str("TESS_CHANNEL_PREFIX") or (f"tess-test-{_WORKER}" if _WORKER else "tess-test")
if REDIS_URL:
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"{TESS_CHANNEL_PREFIX}:asgi"
# Each test starts with an empty cache (tests/conftest.py); a process-local one keeps parallel runs apart.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tess-test"}}

# The suite's own process and the children it starts on the test settings keep no pool unless TESS_DB_POOL
# asks for one: the test database is dropped at the end of the run, and a pool would hold backends open on it.
DATABASES = databases(os.environ, VAR_DIR / "tess.sqlite3", pool_default=False)  # noqa: F405

# One test database per test process, so several suites (a developer's and CI's, or parallel checks)
# can run on one PostgreSQL server without dropping each other's database. A killed run may leave its
# database behind; `scripts/test.sh` drops stale ones.
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}

# Rows built by tests/factories.py are bound to the instance "nowhere": a configured tmux instance whose
# server never runs, so a session on it answers nothing, yet may be asked to terminate (an unconfigured
# instance offers no terminate, and the request fails closed before any approver is asked). Its socket path is
# absolute and short: a child server resolves a relative one under its own (long) state directory.
_NOWHERE = os.path.join(tempfile.gettempdir(), f"tess-nowhere-{os.getpid()}.sock")  # never created
TESS_RUNTIME_PROVIDERS.setdefault("nowhere", {"kind": "tmux", "socket": _NOWHERE})  # noqa: F405
