#!/usr/bin/env bash
# The production shape's two services on this machine: PostgreSQL and Redis on loopback, from
# Debian's packages, started without systemd. Used by .ci/run and by people (`make services`).
#
#   scripts/services.sh up       # install what is absent, start what is stopped, wait for both
#   scripts/services.sh down     # stop both (Redis keeps nothing; PostgreSQL keeps its cluster)
#   scripts/services.sh status   # one line each; exit 1 unless both answer
#   scripts/services.sh env      # the export lines for the tests and `make run`:
#                                #   eval "$(scripts/services.sh env)"
#
# Settings (environment variables):
#   SERVICES_PG_PORT      5432     PostgreSQL's port on 127.0.0.1
#   SERVICES_DB           test     the database DATABASE_URL names (created when absent)
#   SERVICES_REDIS_PORT   6379     Redis's port on 127.0.0.1
#   SERVICES_DIR          var/services   Redis's log and pid file (it keeps no data on disk)
#   SERVICES_TIMEOUT      30       seconds to wait for each service to answer
#
# `up` is idempotent: where both already answer it changes nothing. PostgreSQL's cluster is the
# Debian one (`pg_lsclusters`), created when the package left none; tests connect as `postgres`
# over TCP without a password, so when that is refused `up` adds `trust` lines for the
# `postgres` user from 127.0.0.1 and ::1 at the top of its pg_hba.conf (marked, once) and
# reloads. Anything that cannot be brought up ends the script non-zero with the reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_PORT="${SERVICES_PG_PORT:-5432}"
DB="${SERVICES_DB:-test}"
REDIS_PORT="${SERVICES_REDIS_PORT:-6379}"
DIR="${SERVICES_DIR:-$ROOT/var/services}"
TIMEOUT="${SERVICES_TIMEOUT:-30}"
HBA_MARK="# aiperf-web scripts/services.sh: the tests connect as postgres over loopback"

say() { echo "services: $*"; }
die() { echo "services: error: $*" >&2; exit 1; }

# Root runs the system commands directly; anyone else through sudo, when there is one.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "'$*' needs root (run as root, or install sudo)"
  fi
}

APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || die "$* not installed and no apt-get here: install $* by hand"
  export DEBIAN_FRONTEND=noninteractive
  if [ "$APT_UPDATED" = 0 ]; then
    as_root apt-get update -q || die "apt-get update failed"
    APT_UPDATED=1
  fi
  say "installing $* (apt-get)"
  as_root apt-get install -y -q "$@" || die "apt-get install $* failed"
}

pg_answers() { pg_isready -q -h 127.0.0.1 -p "$PG_PORT" 2>/dev/null; }
pg_sql() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -w -X -q -At "$@"; }
redis_answers() {
  [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

wait_for() {  # wait_for WHAT CHECK...
  local what="$1"; shift
  for _ in $(seq 1 "$((TIMEOUT * 5))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

# The newest PostgreSQL server version the packages installed (a folder with bin/postgres).
pg_version() {
  local v
  v=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | while read -r d; do
        [ -x "/usr/lib/postgresql/$d/bin/postgres" ] && echo "$d"; done | tail -1 || true)
  [ -n "$v" ] && echo "$v"
}

# The cluster on our port: "VERSION NAME", or nothing.
pg_cluster() {
  pg_lsclusters -h 2>/dev/null | awk -v port="$PG_PORT" '$3 == port { print $1, $2; exit }'
}

postgres_up() {
  if ! command -v pg_lsclusters >/dev/null || [ -z "$(pg_version)" ]; then
    apt_install postgresql
  fi
  command -v pg_isready >/dev/null || apt_install postgresql-client
  local cluster version name
  cluster=$(pg_cluster)
  if [ -z "$cluster" ]; then
    version=$(pg_version) || die "no PostgreSQL server binaries under /usr/lib/postgresql"
    # Debian's own cluster is `main`; one for another port, beside it, is named after the port.
    name=main
    if pg_lsclusters -h 2>/dev/null | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
      name="port$PG_PORT"
    fi
    say "creating PostgreSQL $version cluster '$name' on port $PG_PORT"
    as_root pg_createcluster "$version" "$name" --port "$PG_PORT" >/dev/null \
      || die "pg_createcluster $version $name --port $PG_PORT failed"
    cluster=$(pg_cluster)
    [ -n "$cluster" ] || die "pg_createcluster made no cluster on port $PG_PORT"
  fi
  read -r version name <<<"$cluster"
  if ! pg_answers; then
    say "starting PostgreSQL $version/$name"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$name" start \
      || die "pg_ctlcluster $version $name start failed: see /var/log/postgresql/postgresql-$version-$name.log"
    wait_for PostgreSQL pg_answers \
      || die "PostgreSQL $version/$name did not answer on 127.0.0.1:$PG_PORT within ${TIMEOUT} s"
  fi
  if ! pg_sql -d postgres -c 'select 1' >/dev/null 2>&1; then
    local hba
    hba="/etc/postgresql/$version/$name/pg_hba.conf"
    [ -f "$hba" ] || die "PostgreSQL refuses postgres@127.0.0.1 and $hba is not there"
    if ! as_root grep -qF "$HBA_MARK" "$hba"; then
      say "letting postgres connect over loopback without a password ($hba)"
      local tmp
      tmp=$(mktemp)
      { echo "$HBA_MARK"
        echo "host all postgres 127.0.0.1/32 trust"
        echo "host all postgres ::1/128 trust"
        as_root cat "$hba"; } >"$tmp"
      as_root cp "$tmp" "$hba"
      rm -f "$tmp"
    fi
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$name" reload
    wait_for "PostgreSQL login" pg_sql -d postgres -c 'select 1' \
      || die "PostgreSQL still refuses postgres@127.0.0.1:$PG_PORT: $(pg_sql -d postgres -c 'select 1' 2>&1 | head -1)"
  fi
  if [ "$(pg_sql -d postgres -c "select 1 from pg_database where datname = '$DB'")" != 1 ]; then
    say "creating database '$DB'"
    pg_sql -d postgres -c "create database \"$DB\"" || die "could not create database '$DB'"
  fi
}

redis_up() {
  command -v redis-server >/dev/null || apt_install redis-server
  redis_answers && return 0
  mkdir -p "$DIR"
  say "starting Redis on 127.0.0.1:$REDIS_PORT (nothing kept on disk)"
  # `-::1`: listen on IPv6 loopback too where the machine has it, and go on where it has not.
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
    --save "" --appendonly no --dir "$DIR" \
    --logfile "$DIR/redis-$REDIS_PORT.log" --pidfile "$DIR/redis-$REDIS_PORT.pid" \
    || die "redis-server did not start: see $DIR/redis-$REDIS_PORT.log"
  wait_for Redis redis_answers \
    || die "Redis did not answer on 127.0.0.1:$REDIS_PORT within ${TIMEOUT} s: $(tail -3 "$DIR/redis-$REDIS_PORT.log" 2>/dev/null)"
}

env_lines() {
  echo "export DATABASE_URL=postgresql://postgres@127.0.0.1:$PG_PORT/$DB"
  echo "export REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0"
}

status() {
  local rc=0
  if command -v pg_isready >/dev/null && pg_answers; then
    say "PostgreSQL: answering on 127.0.0.1:$PG_PORT"
  else
    say "PostgreSQL: not answering on 127.0.0.1:$PG_PORT"; rc=1
  fi
  if command -v redis-cli >/dev/null && redis_answers; then
    say "Redis: answering on 127.0.0.1:$REDIS_PORT"
  else
    say "Redis: not answering on 127.0.0.1:$REDIS_PORT"; rc=1
  fi
  return "$rc"
}

case "${1:-}" in
  up)
    postgres_up
    redis_up
    say "up: PostgreSQL on 127.0.0.1:$PG_PORT (database '$DB'), Redis on 127.0.0.1:$REDIS_PORT"
    say "use them with: eval \"\$(scripts/services.sh env)\""
    ;;
  down)
    if command -v redis-cli >/dev/null && redis_answers; then
      redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
      say "Redis stopped"
    fi
    cluster=$(pg_cluster || true)
    if [ -n "$cluster" ] && pg_answers; then
      read -r version name <<<"$cluster"
      as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$name" stop
      say "PostgreSQL $version/$name stopped"
    fi
    ;;
  status) status ;;
  env) env_lines ;;
  *)
    echo "usage: scripts/services.sh up|down|status|env" >&2
    exit 2
    ;;
esac
