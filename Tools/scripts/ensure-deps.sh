#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test Strata: liblz4 headers (and pkg-config to
# find them); openssl and curl, which the TLS tests use to make a certificate and to talk HTTPS.
set -euo pipefail

have_lz4() {
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists liblz4
}

have_tools() {
    command -v openssl >/dev/null 2>&1 && command -v curl >/dev/null 2>&1
}

if have_lz4 && have_tools; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

if command -v apt-get >/dev/null 2>&1; then
    echo "ensure-deps: installing liblz4-dev, pkg-config, openssl and curl" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq liblz4-dev pkg-config openssl curl >/dev/null
elif command -v brew >/dev/null 2>&1; then
    brew install lz4 pkg-config openssl curl
else
    echo "ensure-deps: please install liblz4 (headers) and pkg-config" >&2
    exit 1
fi
have_lz4 || { echo "ensure-deps: liblz4 still not found by pkg-config" >&2; exit 1; }
have_tools || { echo "ensure-deps: openssl or curl still missing" >&2; exit 1; }
