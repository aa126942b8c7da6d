#!/usr/bin/env bash
# Restores a pg-backup.sh backup (a gzip-compressed plain SQL dump) into the database named by
# DATABASE_URL or the standard PG* variables.
#
#   pg-restore.sh [--force] FILE.sql.gz
#
# The database should be empty (freshly created). If it already has tables the restore is refused,
# unless --force: then schema public is dropped and recreated first. Either way everything runs in
# ONE transaction, so a failed restore changes nothing — not even the drop.
set -euo pipefail

die() {
  printf 'pg-restore: %s\n' "$*" >&2
  exit 1
}

usage() {
  printf 'usage: pg-restore.sh [--force] FILE.sql.gz\n' >&2
  exit 2
}

main() {
  local force=false file=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --force) force=true ;;
      -h | --help) usage ;;
      -*) usage ;;
      *)
        [ -z "$file" ] || usage
        file=$1
        ;;
    esac
    shift
  done
  [ -n "$file" ] || usage
  command -v psql >/dev/null || die "psql not found: install the PostgreSQL client tools (package postgresql-client)"
  [ -f "$file" ] || die "no such file: $file"
  # Check the whole archive before touching the database.
  gzip -t -- "$file" 2>/dev/null || die "$file is not a complete gzip file (a damaged or partial backup?)"

  local -a target=()
  if [ -n "${DATABASE_URL:-}" ]; then
    target=(--dbname "$DATABASE_URL")
  fi
  local -a psql_cmd=(psql -X -q -v ON_ERROR_STOP=1 "${target[@]}")

  local database relations
  database=$("${psql_cmd[@]}" -At -c 'SELECT current_database()') || die "cannot connect to the database"
  relations=$("${psql_cmd[@]}" -At -c "
    SELECT count(*) FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'")
  if [ "$relations" != 0 ] && ! $force; then
    die "database \"$database\" is not empty (it has $relations tables, views or sequences). Restore into a \
newly created database, or pass --force to drop and recreate its schema public first (its data is lost)."
  fi

  {
    if $force; then
      printf 'SET client_min_messages = warning;\nDROP SCHEMA IF EXISTS public CASCADE;\nCREATE SCHEMA public;\n'
    fi
    gunzip -c -- "$file"
  } | "${psql_cmd[@]}" --single-transaction >/dev/null || die "restore failed; the database is unchanged"
  printf 'pg-restore: restored %s into database "%s"\n' "$file" "$database"
}

main "$@"
