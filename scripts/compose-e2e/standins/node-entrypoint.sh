#!/bin/sh
# The node stand-in's entrypoint: `docker run IMAGE script.js` or `IMAGE --version` run node; a
# command that is a program on the PATH runs as it is.
set -e
first=${1:-}
case "$first" in
  -*) set -- node "$@" ;;
  *)
    if [ -z "$first" ] || ! command -v "$first" >/dev/null 2>&1; then
      set -- node "$@"
    fi
    ;;
esac
exec "$@"
