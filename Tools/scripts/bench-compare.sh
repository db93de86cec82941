#!/usr/bin/env bash
# Strata next to SQLite (GRDB), side by side in one run: builds the benchmark package in release,
# runs strata-sync-bench (W3: catch-up over loopback HTTP) and strata-vs-sqlite (W1: durable
# appends, W2: cold opens), and writes the combined table into the DocC article
# Sources/Strata/Strata.docc/Benchmarks.md, between its marker comments. A full run takes about
# 5–10 minutes after the build (the first release build of the package takes longer).
#
#   bash Tools/scripts/bench-compare.sh            # full run; updates the article
#   bash Tools/scripts/bench-compare.sh --quick    # smoke run (small sizes); prints, leaves the article alone
#
# BENCH_SCRATCH sets the build's scratch path (default .build-bench); BENCH_DIR the parent of the
# runs' data directories (default <repo>/.build-bench-data; never tmpfs).
set -euo pipefail
cd "$(dirname "$0")/../.."

QUICK=()
for argument in "$@"; do
    case "$argument" in
        --quick) QUICK=(--quick) ;;
        -h|--help) sed -n 2,13p "$0"; exit 0 ;;
        *) echo "bench-compare: unknown argument $argument (only --quick)" >&2; exit 2 ;;
    esac
done

bash Tools/scripts/ensure-deps.sh
if [ ! -e /usr/include/sqlite3.h ] && ! pkg-config --exists sqlite3 2>/dev/null; then
    SUDO=""; if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    if command -v apt-get >/dev/null 2>&1; then
        echo "bench-compare: installing libsqlite3-dev (GRDB builds on the system SQLite)" >&2
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libsqlite3-dev >/dev/null
    else
        echo "bench-compare: please install SQLite's headers (libsqlite3-dev)" >&2
        exit 1
    fi
fi

SCRATCH="${BENCH_SCRATCH:-.build-bench}"
DIR_ARGS=()
if [ -n "${BENCH_DIR:-}" ]; then DIR_ARGS=(--dir "$BENCH_DIR"); fi

echo "bench-compare: building Tools/Benchmarks in release (scratch path $SCRATCH)…" >&2
swift build -c release --package-path Tools/Benchmarks --scratch-path "$SCRATCH" \
    --product strata-sync-bench >&2
swift build -c release --package-path Tools/Benchmarks --scratch-path "$SCRATCH" \
    --product strata-vs-sqlite >&2
BIN="$(swift build -c release --package-path Tools/Benchmarks --scratch-path "$SCRATCH" --show-bin-path)"

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "bench-compare: W3 — strata-sync-bench (catch-up)…" >&2
"$BIN/strata-sync-bench" "${QUICK[@]}" "${DIR_ARGS[@]}" > "$OUT/sync.md"

ARTICLE=()
if [ ${#QUICK[@]} -eq 0 ]; then ARTICLE=(--article Sources/Strata/Strata.docc/Benchmarks.md); fi
echo "bench-compare: W1, W2 — strata-vs-sqlite…" >&2
"$BIN/strata-vs-sqlite" "${QUICK[@]}" "${DIR_ARGS[@]}" --catch-up "$OUT/sync.md" "${ARTICLE[@]}"
if [ ${#ARTICLE[@]} -ne 0 ]; then
    echo "bench-compare: the table is in Sources/Strata/Strata.docc/Benchmarks.md" >&2
fi
