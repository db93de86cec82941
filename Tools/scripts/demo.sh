#!/usr/bin/env bash
# The main job of README.md: installs missing system libraries, then runs `strata demo`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/ensure-deps.sh
swift run --traits Server strata demo "$@"
