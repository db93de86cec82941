#!/usr/bin/env bash
# The test command of README.md (and of CI): installs missing system libraries, builds, runs every
# test. STRATA_CRASH_ROUNDS (default 200) sets the rounds of the SIGKILL crash test.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/ensure-deps.sh
swift build --build-tests
swift test --skip-build "$@"
