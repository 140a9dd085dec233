#!/usr/bin/env bash
# make bench: performance figures as ratios against baselines measured in the same run, on real PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh
. scripts/venv.sh
venv_install requirements-dev.txt
. scripts/frontend.sh
frontend_install || true
if [ -z "${DATABASE_URL:-}" ]; then
  start_postgres || start_throwaway_postgres || { echo "make bench needs PostgreSQL" >&2; exit 1; }
  # One database per checkout: two checkouts' benchmarks at once must not share (or drop) each other's.
  name="tess_bench_$(pwd | cksum | cut -d' ' -f1)"
  ensure_database "$name"
  export DATABASE_URL="postgres://postgres@$PG_HOST:$PG_PORT/$name"
fi
PYTHONPATH=. DJANGO_SETTINGS_MODULE=tess_site.settings.test .venv/bin/python bench/run.py
