"""Settings for the test suite. ``DATABASE_URL``/``REDIS_URL`` come from ``make test`` (real PostgreSQL and Redis)."""

import os

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed; tests never store real passwords
# Tasks run in the calling process in tests unless a test starts a real worker itself.
CELERY_TASK_ALWAYS_EAGER = True
TESS_CHANNEL_PREFIX = "tess-test"
# Each test starts with an empty cache (tests/conftest.py); a process-local one keeps parallel runs apart.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tess-test"}}

# One test database per test process, so several suites (a developer's and CI's, or parallel checks)
# can run on one PostgreSQL server without dropping each other's database. A killed run may leave its
# database behind; `scripts/test.sh` drops stale ones.
if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}  # noqa: F405
