#!/usr/bin/env bash
# strata-postgres-bench on a throwaway PostgreSQL cluster: initdb in a fresh directory (as
# `nobody` when run as root: initdb refuses root), the server on a free port of 127.0.0.1 with
# PostgreSQL's default durability (fsync and synchronous_commit on), the release benchmark
# against a database in it, then the cluster stopped and removed — also when the run fails.
#
#   bash Tools/scripts/postgres-bench.sh            # full run (about 2–4 minutes after the build)
#   bash Tools/scripts/postgres-bench.sh --quick    # smoke run
#
# BENCH_PRODUCT names another benchmark that takes --postgres URL (strata-asset-bench:
#   BENCH_PRODUCT=strata-asset-bench bash Tools/scripts/postgres-bench.sh --only upload,fetch).
# BENCH_SCRATCH sets the build's scratch path (default .build-bench); STRATA_PG_BIN the
# directory of initdb and pg_ctl (default: PATH, then /usr/lib/postgresql/*/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/ensure-deps.sh

# The first directory holding initdb, pg_ctl and psql together.
BIN=""
for candidate in ${STRATA_PG_BIN:-} $(echo "$PATH" | tr ':' ' ') $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ] && [ -x "$candidate/psql" ]; then BIN="$candidate"; break; fi
done
[ -n "$BIN" ] || { echo "postgres-bench: no directory with initdb, pg_ctl and psql (install postgresql, or set STRATA_PG_BIN)" >&2; exit 2; }

CLUSTER="$(mktemp -d /var/tmp/strata-pg-bench-XXXXXX)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
AS=()
if [ "$(id -u)" = "0" ]; then chown nobody "$CLUSTER"; AS=(runuser -u nobody --); fi
cleanup() {
    "${AS[@]}" "$BIN/pg_ctl" -D "$CLUSTER/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$CLUSTER"
}
trap cleanup EXIT
"${AS[@]}" "$BIN/initdb" -D "$CLUSTER/data" -U strata --auth=trust -E UTF8 --no-instructions >/dev/null
"${AS[@]}" "$BIN/pg_ctl" -D "$CLUSTER/data" -l "$CLUSTER/log" -w \
    -o "-p $PORT -k $CLUSTER -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=256MB" start >/dev/null
"$BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U strata -d postgres -c "CREATE DATABASE bench" >/dev/null

SCRATCH="${BENCH_SCRATCH:-.build-bench}"
PRODUCT="${BENCH_PRODUCT:-strata-postgres-bench}"
swift build -c release --package-path Tools/Benchmarks --scratch-path "$SCRATCH" --product "$PRODUCT"
${BENCH_WRAP:-} "$SCRATCH/release/$PRODUCT" --postgres "postgres://strata@127.0.0.1:$PORT/bench?sslmode=disable" "$@"
