#!/usr/bin/env bash
# Measures `strata verify`, `inspect`, `diff` and `replay` on 1 M-event stores: builds the release
# `strata` and the harness (Tools/Benchmarks, strata-cli-bench), then runs it. Extra arguments go to
# the harness (--quick, --events N, --objects N, --data DIR, --keep).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/ensure-deps.sh
swift build -c release --traits Server --product strata --scratch-path .build-release
swift build -c release --package-path Tools/Benchmarks --scratch-path .build-bench --product strata-cli-bench
.build-bench/release/strata-cli-bench --strata .build-release/release/strata "$@"
