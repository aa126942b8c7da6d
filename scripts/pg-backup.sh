#!/usr/bin/env bash
# Backs up the PostgreSQL database: pg_dump | gzip into
# $BACKUP_DIR/stavrobot-YYYY-MM-DDTHH-MM-SSZ.sql.gz (UTC), then deletes old backups by the rule in
# backup-retention.sh. Runs forever, one backup every BACKUP_INTERVAL_SECONDS (the first at start);
# `--once` makes a single backup and exits non-zero if it failed.
#
# Connection: DATABASE_URL when set, otherwise the standard PG* variables (PGHOST, PGPORT, PGUSER,
# PGPASSWORD, PGDATABASE). A backup is written under a temporary name and renamed only when both
# pg_dump and gzip succeeded, so a failure never leaves a partial backup behind.
set -euo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
readonly script_dir
readonly backup_dir="${BACKUP_DIR:-/backups}"
readonly interval="${BACKUP_INTERVAL_SECONDS:-86400}"
# After a failed backup, try again sooner than a whole interval (the database may just be restarting).
readonly retry_seconds=300
partial=""
sleep_pid=""

log() {
  printf '%s pg-backup: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"
}

fail() {
  log "error: $*" >&2
}

usage() {
  printf 'usage: pg-backup.sh [--once]\n' >&2
  exit 2
}

remove_partial() {
  if [ -n "$partial" ]; then
    rm -f -- "$partial"
    partial=""
  fi
}

# One backup; returns non-zero (having removed its temporary file) when anything failed.
backup_once() {
  local name final
  name="stavrobot-$(date -u +%Y-%m-%dT%H-%M-%SZ).sql.gz"
  final="$backup_dir/$name"
  partial="$backup_dir/.$name.partial"
  local -a target=()
  if [ -n "${DATABASE_URL:-}" ]; then
    target=(--dbname "$DATABASE_URL")
  fi
  # --no-owner/--no-privileges: the backup restores into any database, whoever owns it.
  if ! pg_dump --no-owner --no-privileges "${target[@]}" | gzip -c >"$partial"; then
    remove_partial
    fail "backup failed; no file written"
    return 1
  fi
  if ! mv -f -- "$partial" "$final"; then
    remove_partial
    fail "could not rename the backup to $final"
    return 1
  fi
  partial=""
  log "wrote $final ($(wc -c <"$final" | tr -d ' ') bytes)"
}

# Deletes the backups the retention rule no longer keeps, logging each one.
apply_retention() {
  local doomed name
  if ! doomed=$("$script_dir/backup-retention.sh" "$backup_dir"); then
    fail "retention failed; nothing deleted"
    return 1
  fi
  while IFS= read -r name; do
    [ -n "$name" ] || continue
    rm -f -- "${backup_dir:?}/$name"
    log "deleted old backup $name"
  done <<<"$doomed"
}

# TERM/INT: as PID 1 in a container a signal does nothing unless trapped, so stop promptly.
stop() {
  if [ -n "$sleep_pid" ]; then
    kill "$sleep_pid" 2>/dev/null || true
  fi
  log "stopping"
  exit 143
}

main() {
  local once=false
  case "${1:-}" in
    "") ;;
    --once) once=true ;;
    *) usage ;;
  esac
  [ $# -le 1 ] || usage
  command -v pg_dump >/dev/null || {
    fail "pg_dump not found: install the PostgreSQL client tools (package postgresql-client)"
    exit 2
  }
  umask 077
  mkdir -p -- "$backup_dir"
  trap 'remove_partial' EXIT
  trap 'stop' TERM INT

  if $once; then
    backup_once
    apply_retention
    return
  fi
  [[ $interval =~ ^[1-9][0-9]*$ ]] || {
    fail "BACKUP_INTERVAL_SECONDS must be a positive number of seconds, got: $interval"
    exit 2
  }
  log "backing up to $backup_dir every $interval seconds"
  # A container killed mid-dump (SIGKILL cannot be trapped) leaves its temporary file behind.
  local stale
  while IFS= read -r stale; do
    log "removed unfinished backup $stale"
  done < <(find "$backup_dir" -maxdepth 1 -name '.stavrobot-*.partial' -type f -print -delete)
  while true; do
    local wait_seconds=$interval
    if backup_once; then
      apply_retention || true
    elif [ "$retry_seconds" -lt "$interval" ]; then
      wait_seconds=$retry_seconds
      log "retrying in $wait_seconds seconds"
    fi
    # In the background, so a TERM is handled at once instead of after the sleep.
    sleep "$wait_seconds" &
    sleep_pid=$!
    wait "$sleep_pid" || true
    sleep_pid=""
  done
}

main "$@"
