#!/usr/bin/env bash
# The test command of README.md (and of CI): installs missing system libraries, builds, runs every
# test, then checks the OpenAPI document against a live server (Tools/scripts/schemathesis.sh;
# STRATA_SCHEMATHESIS=0 skips that) and builds the documentation with DocC warnings as errors
# (Tools/scripts/docs.sh; STRATA_DOCS=0 skips that). STRATA_CRASH_ROUNDS (default 200) sets the rounds of the
# SIGKILL crash test.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/ensure-deps.sh
swift build --build-tests
swift test --skip-build "$@"
# The OpenAPI document (Tools/openapi/openapi.yaml) against a live `strata serve`.
if [ "${STRATA_SCHEMATHESIS:-1}" != 0 ]; then
    bash Tools/scripts/schemathesis.sh
fi
# The documentation of every public module, with no DocC warning.
if [ "${STRATA_DOCS:-1}" != 0 ]; then
    bash Tools/scripts/docs.sh
fi
