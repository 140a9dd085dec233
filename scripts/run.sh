#!/usr/bin/env bash
# make run: the embedded default — SQLite under var/, in-process channel layer and tasks, no worker.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
venv_install requirements.txt
. scripts/frontend.sh
frontend_install || true  # without npm the drawer still works, showing output as text
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-tess_site.settings.dev}"
export TESS_DEMO_SESSION="${TESS_DEMO_SESSION:-1}"
export TESS_PUBLIC_URL="${TESS_PUBLIC_URL:-http://127.0.0.1:${PORT:-8000}}"  # approval links open this server
mkdir -p var
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py tess_demo
.venv/bin/python manage.py tess_demo_session
echo "Tess is at http://127.0.0.1:${PORT:-8000}/admin/  (Ctrl-C stops it)"
exec .venv/bin/python manage.py runserver "127.0.0.1:${PORT:-8000}"
