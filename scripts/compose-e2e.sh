#!/usr/bin/env bash
# The compose stack end to end (`npm run test:compose`; .ci/run runs it after the other tests):
#
#   1. installs the Docker engine, docker-compose and debootstrap when missing (Debian packages);
#   2. starts `dockerd` unless one already answers, saving the firewall and forwarding state it
#      changes; on exit, also after a failure, it is stopped by its pid and that state restored;
#   3. makes sure the base images exist, building local stand-ins where no registry answers
#      (compose-e2e/standins.sh says which);
#   4. builds the default profile's images, the coder's and the whatsapp-bridge's from a copy of
#      this working tree, and signal-bridge where its download is reachable and its checksum set;
#   5. runs the stack from that copy (profiles coder and whatsapp; WhatsApp stays unlinked: no
#      phone here) with fake model and speech services, a file server and a git server on the
#      compose network, and checks it as its owner would (compose-e2e/checks.ts);
#   6. prints how long each step and check took and each image's size; exits non-zero when any
#      check failed.
#
# Needs root (to install and run the engine), Node.js with this repository's npm dependencies
# installed (tsx, esbuild), git, gcc and zip (the Osaurus check builds its plugin). Port 10567
# must be free. E2E_KEEP=1 leaves the stack and its directory as they are at the end, to look into
# (only with an engine this script did not start).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
readonly repo
readonly here=$repo/scripts/compose-e2e
readonly project=stavrobot-e2e
readonly app_budget_mb=400
# The optional services the stack runs besides the default ones (signal-bridge is built, not run).
readonly profiles=coder,whatsapp
work=""
engine_pid=""
containerd_pids=""
state=""
stack_started=""
timings=()

log() {
  printf '[compose-e2e] %s\n' "$*"
}

die() {
  log "error: $*" >&2
  exit 1
}

now() {
  date +%s.%N
}

seconds_since() {
  awk -v start="$1" -v end="$(now)" 'BEGIN { printf "%.1f", end - start }'
}

# Runs a step, noting how long it took; its output goes to a log shown only when it fails.
step() {
  local what=$1 started output status=0
  shift
  started=$(now)
  output="$work/logs/$(tr -c 'a-zA-Z0-9' '-' <<<"$what").log"
  "$@" >"$output" 2>&1 || status=$?
  timings+=("$(printf '%7s s  %s' "$(seconds_since "$started")" "$what")")
  if [ "$status" != 0 ]; then
    log "$what failed; the end of its output:"
    tail -n 40 "$output" >&2
    return "$status"
  fi
  log "$what: $(seconds_since "$started") s"
}

compose() {
  (cd "$work/stavrobot" && COMPOSE_PROFILES=$profiles docker-compose -p "$project" \
    -f docker-compose.yml -f e2e/override.yml "$@")
}

install_packages() {
  local need=()
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  command -v git >/dev/null 2>&1 || need+=(git)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  [ "${#need[@]}" -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || die "missing ${need[*]}; run as root to install them"
  log "installing ${need[*]}"
  # Installing must not start the engine as a service: this script starts and stops its own.
  local policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  if [ -n "$policy" ]; then rm -f "$policy"; fi
}

start_engine() {
  if docker info >/dev/null 2>&1; then
    log "using the Docker engine already running (it is left running)"
    return
  fi
  [ "$(id -u)" = 0 ] || die "no Docker engine answers, and starting one needs root"
  state="$work/host-state"
  mkdir -p "$state"
  iptables-save >"$state/iptables" 2>/dev/null || : >"$state/iptables"
  nft list tables >"$state/nft-tables" 2>/dev/null || : >"$state/nft-tables"
  cat /proc/sys/net/ipv4/ip_forward >"$state/ip_forward"
  ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' >"$state/links"
  dockerd --storage-driver overlay2 >"$work/logs/dockerd.log" 2>&1 &
  engine_pid=$!
  local tries=0
  until docker info >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 120 ] || ! kill -0 "$engine_pid" 2>/dev/null; then
      tail -n 20 "$work/logs/dockerd.log" >&2
      die "dockerd did not start"
    fi
    sleep 0.5
  done
  containerd_pids=$(pgrep -P "$engine_pid" containerd || true)
  log "started dockerd (pid $engine_pid)"
}

stop_engine() {
  [ -n "$engine_pid" ] || return 0
  kill -TERM "$engine_pid" 2>/dev/null || true
  local tries=0
  while kill -0 "$engine_pid" 2>/dev/null && [ "$tries" -lt 60 ]; do
    sleep 0.5
    tries=$((tries + 1))
  done
  kill -KILL "$engine_pid" 2>/dev/null || true
  local pid
  for pid in $containerd_pids; do kill -KILL "$pid" 2>/dev/null || true; done
  log "stopped dockerd (pid $engine_pid)"
  engine_pid=""
  restore_host
}

# Puts back what dockerd changed: iptables (it sets FORWARD to DROP and adds chains), forwarding,
# and the bridges it leaves behind.
restore_host() {
  local table link
  for table in filter nat; do
    if ! grep -q "^\*$table" "$state/iptables"; then
      iptables -t "$table" -F 2>/dev/null || true
      iptables -t "$table" -X 2>/dev/null || true
    fi
  done
  iptables -P FORWARD ACCEPT 2>/dev/null || true
  if [ -s "$state/iptables" ]; then iptables-restore <"$state/iptables" || log "iptables-restore failed"; fi
  # With the nf_tables backend the tables dockerd created stay, empty: remove those that were not there.
  if command -v nft >/dev/null 2>&1; then
    nft list tables 2>/dev/null | while read -r _ family name; do
      grep -qx "table $family $name" "$state/nft-tables" || nft delete table "$family" "$name" 2>/dev/null || true
    done
  fi
  cat "$state/ip_forward" >/proc/sys/net/ipv4/ip_forward
  for link in $(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
    if ! grep -qx "$link" "$state/links" && [[ $link =~ ^(docker0|br-|veth) ]]; then
      ip link delete "$link" 2>/dev/null || true
    fi
  done
  log "restored the firewall, forwarding and network links as they were"
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "${E2E_KEEP:-}" ] && [ -z "$engine_pid" ]; then
    log "E2E_KEEP: the stack and $work are left as they are"
    exit "$status"
  fi
  if [ -n "$stack_started" ]; then
    compose down --timeout 10 >/dev/null 2>&1 || log "docker-compose down failed"
  fi
  stop_engine
  if [ -n "$work" ]; then rm -rf -- "$work"; fi
  exit "$status"
}

# A copy of this working tree (tracked and new files, as git sees them): what a user would clone.
copy_sources() {
  mkdir -p "$work/stavrobot"
  (cd "$repo" && git ls-files -z -co --exclude-standard) |
    (cd "$repo" && tar -c --null --ignore-failed-read -T - 2>/dev/null) | tar -x -C "$work/stavrobot"
}

# The stack's config (the model and speech services are the fakes), the override that adds the
# fakes and the git server, and the fakes' program.
prepare_project() {
  local dir=$work/stavrobot password
  password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  printf '%s\n' "$password" >"$work/password"
  mkdir -p "$dir/data/main" "$dir/e2e/repos" "$dir/e2e/files"
  cat >"$dir/data/main/config.toml" <<EOF
provider = "anthropic"
model = "claude-sonnet-4-5"
baseUrl = "http://fake-services:8080"
api = "anthropic-messages"
apiKey = "sk-ant-e2e-test"
password = "$password"

[queue]
maxRetries = 1
retryDelaySeconds = 1

[stt]
apiKey = "sk-e2e-test"
model = "gpt-4o-transcribe"
baseUrl = "http://fake-services:8081/v1"

# The checks install plugins after run_python's output is in the conversation: the trust gate
# would ask the owner first (app/test/trust*.test.ts test that); here the stack is under test.
[trust]
allow = ["manage_plugins"]

# The whatsapp-bridge runs, unlinked: the checks see its state through the app.
[whatsapp]
EOF
  cat >"$dir/e2e/override.yml" <<'EOF'
# The end-to-end test's additions: the fake internet services (with a file server), a git server.
services:
  fake-services:
    image: node:22-slim
    command: ["node", "/e2e/fake-services.mjs"]
    volumes:
      - ./e2e/fake-services.mjs:/e2e/fake-services.mjs:ro
      - ./e2e/files:/e2e/files:ro
    networks: [services]
    ports:
      - "127.0.0.1::8090"
  git-server:
    image: stavrobot-e2e_plugin-runner
    entrypoint: ["git", "daemon", "--export-all", "--reuseaddr", "--base-path=/repos", "/repos"]
    volumes:
      - ./e2e/repos:/repos:ro
    networks: [services]
EOF
  # CommonJS libraries in it call require (for Node's own modules), which ES modules lack.
  "$repo/node_modules/.bin/esbuild" "$here/fake-services.ts" --bundle --platform=node --format=esm \
    --target=node20 --conditions=source --log-level=warning --outfile="$dir/e2e/fake-services.mjs" \
    '--banner:js=import { createRequire } from "node:module"; const require = createRequire(import.meta.url);'

}

build_images() {
  local service
  for service in app plugin-runner python-runner coder whatsapp-bridge; do
    step "build $service" compose build "$service"
  done
}

# signal-bridge downloads signal-cli from GitHub and needs its checksum (signal-bridge/Dockerfile).
build_signal_bridge() {
  local why=""
  if [ -z "${SIGNAL_CLI_SHA256:-}" ]; then
    why="SIGNAL_CLI_SHA256 is not set (the Dockerfile refuses to build without the release's checksum)"
  elif ! curl -sS -o /dev/null --max-time 15 https://github.com/AsamK/signal-cli/releases 2>"$work/logs/github"; then
    why="github.com, where signal-cli's release is, cannot be reached from here ($(tail -n 1 "$work/logs/github"))"
  fi
  if [ -n "$why" ]; then
    log "signal-bridge: not built: $why"
    return
  fi
  step "build signal-bridge" compose --profile signal build signal-bridge
}

image_sizes() {
  local image size app_size=""
  log "image sizes (the bases are stand-ins where standins.sh said so):"
  for image in "$project"_app "$project"_plugin-runner "$project"_python-runner "$project"_coder \
    "$project"_signal-bridge "$project"_whatsapp-bridge node:22-slim pgvector/pgvector:pg17 postgres:17; do
    size=$(docker image inspect -f '{{.Size}}' "$image" 2>/dev/null) || continue
    printf '  %-32s %5d MB\n' "$image" "$((size / 1000000))"
    [ "$image" != "$project"_app ] || app_size=$((size / 1000000))
  done
  if [ -n "$app_size" ] && [ "$app_size" -gt "$app_budget_mb" ]; then
    log "the app image is $app_size MB, over its budget of $app_budget_mb MB"
    return 1
  fi
}

run_checks() {
  if (exec 3<>/dev/tcp/127.0.0.1/10567) 2>/dev/null; then
    die "port 10567, which the stack publishes, is already in use here"
  fi
  stack_started=1
  E2E_DIR="$work/stavrobot" \
    E2E_COMPOSE="[\"docker-compose\",\"-p\",\"$project\",\"-f\",\"docker-compose.yml\",\"-f\",\"e2e/override.yml\"]" \
    E2E_PROJECT="$project" \
    E2E_APP_URL="http://127.0.0.1:10567" \
    E2E_PASSWORD="$(cat "$work/password")" \
    COMPOSE_PROFILES=$profiles \
    node --import tsx "$here/checks.ts"
}

main() {
  local started status=0
  started=$(now)
  work=$(mktemp -d "${TMPDIR:-/tmp}/stavrobot-compose-e2e.XXXXXX")
  mkdir -p "$work/logs"
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0

  step "install what is missing" install_packages
  start_engine
  step "base images (pulled, present or stand-ins)" "$here/standins.sh" "$repo"
  sed -n 's/^\[standins\] //p' "$work"/logs/base-images-*.log
  copy_sources
  prepare_project
  build_images
  build_signal_bridge
  image_sizes || status=1
  log "checks:"
  local checks_started
  checks_started=$(now)
  if ! run_checks; then
    status=1
    log "the services' state and the end of their logs:"
    compose ps || true
    compose logs --no-color --tail=25 || true
  fi
  timings+=("$(printf '%7s s  %s' "$(seconds_since "$checks_started")" "checks (each timed above)")")
  log "timings:"
  printf '%s\n' "${timings[@]}"
  log "total: $(seconds_since "$started") s"
  log "the database server is a stand-in where standins.sh said so (Debian's PostgreSQL 15)"
  return "$status"
}

main "$@"
