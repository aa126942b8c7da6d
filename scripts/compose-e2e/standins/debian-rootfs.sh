#!/usr/bin/env bash
# Makes the root file system of the `debian:bookworm-slim` stand-in in DIR, as the official slim
# image is made: debootstrap's minbase variant, the three bookworm suites in deb822 form, no
# documentation, manual pages or translations, no apt lists or package cache.
#   debian-rootfs.sh DIR
# Needs root and debootstrap; reaches Debian's archive over plain http.
set -euo pipefail

rootfs=${1:?usage: debian-rootfs.sh DIR}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null

rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES

# What the official slim images leave out, for every package installed later too.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
DPKG
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
printf 'Acquire::Languages "none";\n' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
printf 'Apt::AutoRemove::SuggestsImportant "false";\n' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"

find "$rootfs/usr/share/doc" -mindepth 2 -not -name copyright -not -type d -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda,locale}/* \
  "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/tmp/* "$rootfs"/root/.cache
find "$rootfs/var/log" -type f -delete
# A fresh machine id for each container, as in the official image.
: >"$rootfs/etc/machine-id"
