#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test Strata: liblz4 headers (and pkg-config to
# find them); openssl and curl, which the TLS tests use to make a certificate and to talk HTTPS;
# the PostgreSQL server binaries (initdb, pg_ctl, psql), with which the tests start a throwaway
# cluster (Tests/StrataTestSupport/PostgresCluster.swift; STRATA_PG_BIN names another place);
# Chromium, in which the operator's dashboard is tested (headless).
set -euo pipefail

have_lz4() {
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists liblz4
}

have_tools() {
    command -v openssl >/dev/null 2>&1 && command -v curl >/dev/null 2>&1
}

have_postgres() {
    local dir
    for dir in "${STRATA_PG_BIN:-}" $(echo "$PATH" | tr ':' ' ') /usr/lib/postgresql/*/bin; do
        [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/psql" ] && return 0
    done
    return 1
}

have_chromium() {
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}

if have_lz4 && have_tools && have_postgres && have_chromium; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

if command -v apt-get >/dev/null 2>&1; then
    echo "ensure-deps: installing liblz4-dev, pkg-config, openssl, curl, postgresql and chromium" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq liblz4-dev pkg-config openssl curl postgresql chromium >/dev/null
elif command -v brew >/dev/null 2>&1; then
    brew install lz4 pkg-config openssl curl postgresql@15
else
    echo "ensure-deps: please install liblz4 (headers) and pkg-config" >&2
    exit 1
fi
have_lz4 || { echo "ensure-deps: liblz4 still not found by pkg-config" >&2; exit 1; }
have_tools || { echo "ensure-deps: openssl or curl still missing" >&2; exit 1; }
have_postgres || { echo "ensure-deps: the PostgreSQL server binaries (initdb, pg_ctl, psql) are still missing" >&2; exit 1; }
if command -v apt-get >/dev/null 2>&1; then
    have_chromium || { echo "ensure-deps: chromium (for the dashboard's headless browser test) is still missing" >&2; exit 1; }
fi
