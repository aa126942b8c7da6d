#!/bin/sh
# Runs as root only long enough to make the mounted directories usable by the unprivileged
# `node` user and to keep config.toml private, then drops privileges for the app itself.
set -eu
mkdir -p /srv/config /srv/data /srv/secrets
chown node:node /srv/config /srv/data /srv/secrets
chown -R node:node /srv/data
[ -f /srv/config/config.toml ] && chown node:node /srv/config/config.toml && chmod 600 /srv/config/config.toml
[ -f /srv/secrets/internal-secret ] && chown node:node /srv/secrets/internal-secret && chmod 600 /srv/secrets/internal-secret
exec setpriv --reuid=node --regid=node --init-groups "$@"
