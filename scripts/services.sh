# Sourced by scripts/test.sh and .ci/run: find or start PostgreSQL and Redis, and export their URLs.
# Functions return non-zero when a service cannot be had; callers decide whether that is fatal.

PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_PORT=6379

pg_up() { pg_isready -q -h "$PG_HOST" -p "${1:-$PG_PORT}" 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p "${1:-$REDIS_PORT}" ping 2>/dev/null | grep -q PONG; }

start_postgres() {
  pg_up && return 0
  command -v pg_ctlcluster >/dev/null 2>&1 || return 1
  local version
  for version in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
  done
  for _ in $(seq 1 30); do pg_up && return 0; sleep 1; done
  return 1
}

# A throwaway cluster under var/ from the OS binaries, for machines without a running server.
start_throwaway_postgres() {
  local initdb dir port=54329
  initdb=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)
  [ -n "$initdb" ] || return 1
  pg_up "$port" && { PG_PORT=$port; return 0; }
  dir="$PWD/var/pg-throwaway"
  local run=()
  if [ "$(id -u)" = 0 ]; then id postgres >/dev/null 2>&1 || return 1; run=(runuser -u postgres --); fi
  mkdir -p "$dir" && [ "$(id -u)" = 0 ] && chown postgres "$dir"
  if [ ! -f "$dir/PG_VERSION" ]; then
    "${run[@]}" "$initdb" -D "$dir" -U postgres --auth=trust >/dev/null || return 1
  fi
  "${run[@]}" "$(dirname "$initdb")/pg_ctl" -D "$dir" -o "-p $port -k /tmp -h 127.0.0.1" -l "$dir/log" -w start >/dev/null || return 1
  PG_PORT=$port
}

start_redis() {
  redis_up && return 0
  command -v redis-server >/dev/null 2>&1 || return 1
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null 2>&1 ||
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no >/dev/null 2>&1 ||
    return 1
  for _ in $(seq 1 20); do redis_up && return 0; sleep 0.5; done
  return 1
}

ensure_database() {
  local name=$1
  psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$name'" 2>/dev/null |
    grep -q 1 || createdb -h "$PG_HOST" -p "$PG_PORT" -U postgres "$name"
}

# Test databases are named test_<db>_<pid> (tess_site/settings/test.py), with _gw<n> after it for each
# parallel worker, and a parallel run's migrated template test_<db>_template_<pid> (tests/conftest.py); drop
# those whose process is gone.
drop_stale_test_databases() {
  local name pid
  for name in $(psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -tAc \
    "SELECT datname FROM pg_database WHERE datname ~ '^test_tess.*_[0-9]+(_gw[0-9]+)?$'" 2>/dev/null); do
    pid=${name%_gw*}; pid=${pid##*_}
    kill -0 "$pid" 2>/dev/null || dropdb -h "$PG_HOST" -p "$PG_PORT" -U postgres --if-exists "$name" 2>/dev/null || true
  done
}

# The test drivers' service bootstrap: export DATABASE_URL and REDIS_URL (kept if already set) from the local
# servers, started if down (or a throwaway PostgreSQL cluster). Names what could not be had in `missing`.
ensure_test_services() {
  missing=()
  if [ -z "${DATABASE_URL:-}" ]; then
    if start_postgres || start_throwaway_postgres; then
      ensure_database tess
      drop_stale_test_databases
      export DATABASE_URL="postgres://postgres@$PG_HOST:$PG_PORT/tess"
    else
      missing+=("POSTGRESQL")
    fi
  fi
  if [ -z "${REDIS_URL:-}" ]; then
    # Database 15 belongs to the suite: it starts empty, so a killed run's queued tasks and channel groups
    # cannot reach the next run's servers.
    if start_redis; then
      export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/15"
      redis-cli -h 127.0.0.1 -p "$REDIS_PORT" -n 15 flushdb >/dev/null
    else
      missing+=("REDIS")
    fi
  fi
}
