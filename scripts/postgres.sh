#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the history tests (tests/store/test_postgres.py): a new data
# directory in a temp folder, listening on a unix socket there only (no TCP port to collide with),
# password (SCRAM) authentication, a role `perfgate` that may create databases.
#
#   scripts/postgres.sh start   prints `export PERFGATE_TEST_POSTGRES=postgresql://...` and
#                               `export PERFGATE_TEST_POSTGRES_DIR=...` (eval it)
#   scripts/postgres.sh stop DIR   stops that cluster and removes its folder (idempotent)
#
# Binaries: Debian's `postgresql` package (/usr/lib/postgresql/<version>/bin), installed with apt-get
# when missing and running as root. As root, the cluster runs as the `postgres` user (PostgreSQL
# refuses to run as root); otherwise as the calling user.
set -euo pipefail

pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [[ -z "$d" ]] && command -v initdb >/dev/null 2>&1; then d=$(dirname "$(command -v initdb)"); fi
  echo "$d"
}

as_owner() {  # run a command as the cluster's owner
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local bin
  bin=$(pg_bin)
  if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
      echo "postgres.sh: installing Debian's postgresql package" >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 \
        || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
      bin=$(pg_bin)
    fi
  fi
  [[ -n "$bin" && -x "$bin/initdb" ]] || { echo "postgres.sh: no PostgreSQL server binaries (apt-get install postgresql)" >&2; return 1; }
  local dir pw su_pw
  dir=$(mktemp -d /tmp/perfgate-pg.XXXXXX)
  chmod 755 "$dir"
  pw=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  su_pw=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s\n' "$su_pw" >"$dir/pwfile"
  chmod 600 "$dir/pwfile"
  if [[ $(id -u) == 0 ]]; then chown -R postgres: "$dir"; fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --pwfile="$dir/pwfile" --auth=scram-sha-256 \
    --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; return 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c max_connections=200 -c fsync=off" start >&2 \
    || { cat "$dir/server.log" >&2; rm -rf "$dir"; return 1; }
  PGPASSWORD="$su_pw" "$bin/psql" -h "$dir" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
    -c "CREATE ROLE perfgate LOGIN CREATEDB PASSWORD '$pw'" -c "CREATE DATABASE perfgate OWNER perfgate" >&2
  echo "export PERFGATE_TEST_POSTGRES='postgresql://perfgate:$pw@/perfgate?host=$dir'"
  echo "export PERFGATE_TEST_POSTGRES_DIR='$dir'"
}

stop() {
  local dir=${1:-}
  [[ -n "$dir" && -d "$dir" && "$dir" == /tmp/perfgate-pg.* ]] || return 0
  local bin
  bin=$(pg_bin)
  if [[ -f "$dir/data/postmaster.pid" && -n "$bin" ]]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: scripts/postgres.sh start | stop DIR" >&2; exit 2 ;;
esac
