#!/bin/sh
# Entrypoint of the postgres stand-in image (see postgres.Containerfile). On first start it
# makes the cluster in PGDATA with the superuser `postgres` and the password POSTGRES_PASSWORD
# or the content of POSTGRES_PASSWORD_FILE (one is required), password login from any host,
# and the database POSTGRES_DB; then it runs the server as PID 1, as the user postgres.
set -eu

if [ "${1:-}" != postgres ]; then
  exec "$@"
fi

# POSTGRES_PASSWORD_FILE (a secret) instead of POSTGRES_PASSWORD, read while still root.
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ] && [ -z "${POSTGRES_PASSWORD:-}" ]; then
  POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
  export POSTGRES_PASSWORD
  unset POSTGRES_PASSWORD_FILE
fi

if [ "$(id -u)" = 0 ]; then
  install -d -o postgres -g postgres -m 0700 "$PGDATA"
  install -d -o postgres -g postgres -m 2775 /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "docker-entrypoint.sh: POSTGRES_PASSWORD must be set" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username=postgres --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  db=${POSTGRES_DB:-postgres}
  if [ "$db" != postgres ]; then
    quoted=$(printf '%s' "$db" | sed 's/"/""/g')
    printf 'CREATE DATABASE "%s";\n' "$quoted" | postgres --single -j -D "$PGDATA" postgres >/dev/null
  fi
  echo "docker-entrypoint.sh: initialised $PGDATA"
fi

exec "$@"
