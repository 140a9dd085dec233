#!/usr/bin/env bash
# Installs the Matrix homeserver the Matrix provider's tests run against, in a virtual environment of its
# own (var/synapse-venv) so its pins never meet Tess's. Idempotent: does nothing when that exact version
# is already installed. SYNAPSE_VENV overrides the folder; the tests read the same variable.
set -euo pipefail
cd "$(dirname "$0")/.."
SYNAPSE_VERSION=1.163.2
venv=${SYNAPSE_VENV:-var/synapse-venv}
stamp="$venv/.installed-matrix-synapse-$SYNAPSE_VERSION"
[ -f "$stamp" ] && exit 0
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "matrix-synapse==$SYNAPSE_VERSION"
touch "$stamp"
