#!/usr/bin/env bash
# Prints the backups to DELETE, one name per line, oldest first. Deletes nothing itself.
#
#   backup-retention.sh DIR      considers the files in DIR
#   backup-retention.sh < names  considers the names read from stdin
#
# Kept: the 30 newest backups; the newest backup of each of the last 12 calendar months (the
# current month included, UTC); the newest backup of every year, forever. Only names of the form
# stavrobot-YYYY-MM-DDTHH-MM-SSZ.sql.gz or ...Z.pglite.tar.gz are considered; other files are
# never listed. BACKUP_NOW=YYYY-MM-DDTHH:MM:SSZ replaces the current time (for tests).
#
# The same rule is app/src/db/backup-retention.ts; app/test/backup.test.ts checks they agree.
set -euo pipefail

readonly KEEP_NEWEST=30
readonly KEEP_MONTHS=12
readonly NAME_RE='^stavrobot-[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3])-[0-5][0-9]-[0-5][0-9]Z\.(sql\.gz|pglite\.tar\.gz)$'

die() {
  printf 'backup-retention: %s\n' "$*" >&2
  exit 2
}

# The current month as YYYY-MM (UTC), from BACKUP_NOW when set.
current_month() {
  if [ -n "${BACKUP_NOW:-}" ]; then
    [[ $BACKUP_NOW =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] ||
      die "BACKUP_NOW must look like 2025-01-31T23:59:59Z, got: $BACKUP_NOW"
    printf '%s\n' "${BACKUP_NOW:0:7}"
  else
    date -u +%Y-%m
  fi
}

# The candidate names, one per line.
list_names() {
  if [ $# -eq 0 ]; then
    cat
    return
  fi
  [ -d "$1" ] || die "not a directory: $1"
  local path
  for path in "$1"/stavrobot-*; do
    [ -f "$path" ] && printf '%s\n' "${path##*/}"
  done
  return 0
}

main() {
  [ $# -le 1 ] || die "usage: backup-retention.sh [DIR] (or names on stdin)"
  local month
  month=$(current_month)
  # "stamp name" lines, newest first; the stamp (YYYY-MM-DDTHH-MM-SS) sorts in time order.
  list_names "$@" |
    { grep -E "$NAME_RE" || true; } |
    LC_ALL=C sort -u |
    awk '{ print substr($0, 11, 19), $0 }' |
    LC_ALL=C sort -r |
    awk -v keep_newest="$KEEP_NEWEST" -v keep_months="$KEEP_MONTHS" \
      -v now_year="${month:0:4}" -v now_month="${month:5:2}" '
      {
        year = substr($1, 1, 4); month = substr($1, 1, 7)
        newest_of_year = !(year in seen_year); seen_year[year] = 1
        newest_of_month = !(month in seen_month); seen_month[month] = 1
        age = (now_year * 12 + now_month) - (year * 12 + substr($1, 6, 2))
        in_window = age >= 0 && age < keep_months
        if (!(NR <= keep_newest || newest_of_year || (newest_of_month && in_window))) doomed[++n] = $2
      }
      END { for (i = n; i >= 1; i--) print doomed[i] }'
}

main "$@"
