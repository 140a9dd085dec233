#!/usr/bin/env bash
# make test: install, lint, type-check and run the whole suite against real PostgreSQL and Redis.
# Uses DATABASE_URL/REDIS_URL if set; otherwise the local servers (started if down, or a throwaway
# PostgreSQL cluster). Only without CI=true may it fall back to SQLite / no Redis, and then it says so.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh
. scripts/venv.sh
venv_install requirements-dev.txt
. scripts/frontend.sh
if ! frontend_install && [ "${CI:-}" = "true" ]; then echo "CI=true: the browser tests need frontend/ installed (npm)" >&2; exit 1; fi
bash scripts/synapse-venv.sh  # the Matrix provider's tests run a real Synapse from its own venv
if command -v npm >/dev/null; then  # the pi provider's RPC smoke test runs the real pi (no model call)
  bash tests/providers_app/install_pi.sh >/dev/null 2>&1 || echo "WARNING: COULD NOT INSTALL PI; ITS RPC SMOKE TEST IS SKIPPED (FAILS WITH CI=true)."
fi

ci=false; [ "${CI:-}" = "true" ] && ci=true
ensure_test_services
if [ ${#missing[@]} -gt 0 ]; then
  if $ci; then
    echo "CI=true and ${missing[*]} cannot be found or started: failing instead of falling back." >&2; exit 1
  fi
  echo "WARNING: NO ${missing[*]} AVAILABLE. FALLING BACK; THE TESTS THAT NEED IT ARE SKIPPED AND LISTED BELOW."
fi
echo "database: ${DATABASE_URL:-sqlite (fallback)}; redis: ${REDIS_URL:-none (fallback)}"

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy .
echo "== import-linter"; .venv/bin/lint-imports --no-cache
# The suite runs in parallel (pytest-xdist): each worker has its own test database and Redis channel prefix
# (tess_site/settings/test.py). Many tests wait on child servers and workers, so more workers than cores
# pays; TESS_TEST_WORKERS overrides the count (0 runs in this one process). The 25 slowest tests are listed.
workers="${TESS_TEST_WORKERS:-4}"
# Bytecode caches on, whatever the environment says: without them every worker re-compiles (and pytest
# re-rewrites the asserts of) every test module, and every child process every module it imports, each run.
# They go to the ignored __pycache__/ directories.
unset PYTHONDONTWRITEBYTECODE
echo "== pytest ($workers workers)"
# Database connections that tests left open are ended before the test databases are dropped, and listed here.
left_open=var/test-artifacts/connections-left-open.txt
rm -f "$left_open"
status=0
.venv/bin/pytest -n "$workers" --dist loadfile --durations=25 "$@" || status=$?
if [ -s "$left_open" ]; then
  echo "== database connections that tests left open (tests/conftest.py ended them):"
  cat "$left_open"
fi
exit "$status"
