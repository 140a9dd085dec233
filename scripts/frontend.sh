# Sourced: install the browser libraries Tess serves itself (frontend/package-lock.json, pinned) with npm ci,
# skipping the install when the lock has not changed since the last one (no network needed then).
frontend_install() {
  local stamp
  stamp="frontend/node_modules/.installed-$(sha256sum frontend/package-lock.json | cut -c1-16)"
  [ -f "$stamp" ] && return 0
  if ! command -v npm >/dev/null; then
    echo "WARNING: NPM IS NOT INSTALLED (apt-get install npm): THE DRAWER SHOWS OUTPUT AS TEXT, NOT AS A TERMINAL." >&2
    return 1
  fi
  npm ci --prefix frontend --no-audit --no-fund --loglevel=error >/dev/null || return 1
  touch "$stamp"
}
