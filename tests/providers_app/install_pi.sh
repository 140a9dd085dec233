#!/usr/bin/env bash
# Installs the pi coding agent for the RPC smoke test in tests/providers_app/test_pi.py, into var/node
# (ignored by git; nothing is committed). The version is pinned; the test makes no model call.
# Run from anywhere: bash tests/providers_app/install_pi.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.73.1
if [ "$(var/node/node_modules/.bin/pi --version 2>&1)" = "$VERSION" ]; then exit 0; fi  # pi prints it on stderr
mkdir -p var/node
npm install --prefix var/node --no-audit --no-fund --no-save "@mariozechner/pi-coding-agent@$VERSION"
var/node/node_modules/.bin/pi --version
