#!/bin/sh
# The postgres stand-in's entrypoint. For `postgres`: as root, make PGDATA the postgres user's and
# start again as that user; on an empty PGDATA, initdb with POSTGRES_USER and POSTGRES_PASSWORD
# (password logins over TCP from anywhere, trust on the local socket), create POSTGRES_DB, run the
# *.sh, *.sql and *.sql.gz of /docker-entrypoint-initdb.d against it, then run the server. Any
# other command runs as it is.
set -eu

if [ "${1:-}" != postgres ]; then
  exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres stand-in: POSTGRES_PASSWORD is not set" >&2
    exit 1
  fi
  password_file=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$password_file"
  initdb --username="$user" --pwfile="$password_file" --auth-local=trust --auth-host=scram-sha-256 \
    --pgdata="$PGDATA" >/dev/null
  rm -f "$password_file"
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  # A first start on the socket only, to create the database and run the init scripts.
  pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait --silent start
  if [ "$database" != postgres ]; then
    # psql quotes the name itself (:"db"); it does so only in commands it reads, not in -c.
    printf 'CREATE DATABASE :"db";\n' |
      psql -X -q -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres --set=db="$database"
  fi
  for file in /docker-entrypoint-initdb.d/*; do
    case "$file" in
      *.sh) . "$file" ;;
      *.sql) psql -X -q -v ON_ERROR_STOP=1 --username="$user" --dbname="$database" -f "$file" ;;
      *.sql.gz) gunzip -c "$file" | psql -X -q -v ON_ERROR_STOP=1 --username="$user" --dbname="$database" ;;
    esac
  done
  pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
  echo "postgres stand-in: initialised $PGDATA for user $user, database $database"
fi
exec "$@"
