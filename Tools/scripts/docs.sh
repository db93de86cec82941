#!/usr/bin/env bash
# Builds the documentation of every public module (swift-docc-plugin) and fails on any DocC
# warning — a broken symbol link, an undocumented parameter — so the catalogs stay clean. The
# archives land in .build/plugins/Swift-DocC/outputs/.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=(StrataLog StrataCore Strata StrataProtocol StrataSync StrataSyncAsyncHTTPClient StrataServer StrataPostgres)
args=()
for target in "${targets[@]}"; do args+=(--target "$target"); done
STRATA_DOCC_PLUGIN=1 swift package --traits Server --disable-sandbox generate-documentation "${args[@]}" --warnings-as-errors
