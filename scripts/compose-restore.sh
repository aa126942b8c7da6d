#!/usr/bin/env bash
# Restores a full backup (the Settings page's download, stavrobot-full-*.tar.gz) into the compose
# stack's directories. Run it from the directory holding docker-compose.yml, with the stack
# stopped (`docker compose down`):
#
#   scripts/compose-restore.sh [--force] ARCHIVE
#
# The archive is laid out as an `npm start` data directory; each part goes where the compose file
# mounts it: main/config.toml to data/main, main/internal-secret to data/secrets, the plugins, the
# coder's and the channels' state to data/<the same name>, everything else to data/app. The
# database on the PostgreSQL server is not in the archive: restore it with pg-restore.sh from
# pg-backup's backups (scripts/README.md). Nothing is replaced without --force; with it, what is
# replaced is kept beside it as <name>.replaced-<time>.
set -euo pipefail

die() {
  printf 'compose-restore: %s\n' "$*" >&2
  exit 1
}

usage() {
  printf 'usage: scripts/compose-restore.sh [--force] stavrobot-full-<time>.tar.gz\n' >&2
  exit 2
}

# The archive's top-level directories that compose mounts from data/<the same name>.
readonly SIBLINGS=" plugins plugin-data plugin-runner coder coder-state signal-cli signal-bridge whatsapp-bridge "
staging=""

main() {
  local force=false archive=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --force) force=true ;;
      -h | --help) usage ;;
      -*) usage ;;
      *)
        [ -z "$archive" ] || usage
        archive=$1
        ;;
    esac
    shift
  done
  [ -n "$archive" ] || usage
  [ -f docker-compose.yml ] || die "run it from the directory holding docker-compose.yml"
  [ -f "$archive" ] || die "no such file: $archive"
  gzip -t -- "$archive" 2>/dev/null || die "$archive is not a complete gzip file (a damaged or partial download?)"

  mkdir -p data
  staging=$(mktemp -d data/.restoring-XXXXXX)
  trap 'rm -rf -- "$staging"' EXIT
  tar -xzf "$archive" -C "$staging" --no-same-owner
  grep -q '"format": "stavrobot-full"' "$staging/stavrobot-backup.json" 2>/dev/null ||
    die "$archive is not a full backup (a database backup goes to pg-restore.sh, see scripts/README.md)"
  rm -f "$staging/stavrobot-backup.json"
  if [ -d "$staging/pglite" ]; then
    printf 'compose-restore: the archive holds an embedded database, which compose does not use: it is left out; the rest is restored\n' >&2
    rm -rf -- "${staging:?}/pglite"
  fi

  # Each part and where it goes: "<path in the staging directory> <target>".
  local -a moves=()
  local entry name
  if [ -d "$staging/main" ]; then
    for entry in "$staging"/main/* "$staging"/main/.[!.]*; do
      [ -e "$entry" ] || continue
      name=${entry##*/}
      if [ "$name" = internal-secret ]; then moves+=("$entry data/secrets/$name"); else moves+=("$entry data/main/$name"); fi
    done
    rmdir -- "$staging/main" 2>/dev/null || true
  fi
  for entry in "$staging"/* "$staging"/.[!.]*; do
    [ -e "$entry" ] || continue
    name=${entry##*/}
    [ "$name" = main ] && continue
    if [[ $SIBLINGS == *" $name "* ]]; then moves+=("$entry data/$name"); else moves+=("$entry data/app/$name"); fi
  done

  local move target present=()
  for move in "${moves[@]}"; do
    target=${move##* }
    if [ -e "$target" ] && { [ ! -d "$target" ] || [ -n "$(ls -A -- "$target")" ]; }; then present+=("$target"); fi
  done
  if [ ${#present[@]} -gt 0 ] && ! $force; then
    die "already present: ${present[*]}. Restore into a new directory, or pass --force to replace them (what is replaced is kept beside it, renamed)."
  fi

  local stamp
  stamp=$(date -u +%Y-%m-%dT%H-%M-%SZ)
  for move in "${moves[@]}"; do
    entry=${move% *}
    target=${move##* }
    mkdir -p -- "$(dirname -- "$target")"
    if [ -d "$target" ] && [ -z "$(ls -A -- "$target")" ]; then
      rmdir -- "$target"
    elif [ -e "$target" ]; then
      mv -- "$target" "$target.replaced-$stamp"
    fi
    mv -- "$entry" "$target"
  done
  chmod 700 data/secrets data/main 2>/dev/null || true
  printf 'compose-restore: restored %s: %s\n' "$archive" "$(for move in "${moves[@]}"; do printf '%s ' "${move##* }"; done)"
  printf 'compose-restore: the database is restored apart (pg-restore.sh); then start the stack: docker compose up -d\n'
}

main "$@"
