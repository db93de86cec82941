#!/usr/bin/env bash
# The test command of README.md (and of CI): installs missing system libraries, builds, runs every
# test (in three rounds, see below; arguments, such as `--filter X`, run one `swift test` with them), then checks the OpenAPI document against a live server (Tools/scripts/schemathesis.sh;
# STRATA_SCHEMATHESIS=0 skips that) and builds the documentation with DocC warnings as errors
# (Tools/scripts/docs.sh; STRATA_DOCS=0 skips that), then runs every libFuzzer target of Tools/Fuzz
# over its corpus (Tools/scripts/fuzz.sh, 100,000 executions each; STRATA_FUZZ=0 skips that,
# STRATA_FUZZ_RUNS raises it). STRATA_CRASH_ROUNDS (default 200) sets the rounds of the
# SIGKILL crash test. STRATA_SIM_SCALE (default 0.2) scales the seeds of the simulations and the
# transaction property test: 1 runs the full sweeps (round 2 took 1,404 s at 1, 418 s at 0.2).
set -euo pipefail
# Files the tests write (users files among them) must not be group-writable: `strata serve` refuses
# a users file others may write. A machine whose umask is 002 would otherwise fail them.
umask 022
cd "$(dirname "$0")/../.."
bash Tools/scripts/ensure-deps.sh
# `--traits Server`: the server, the CLI and the tools (an app leaves the trait off; see README.md).
swift build --build-tests --traits Server
# The example app package that depends on Strata and StrataSync only (MinimalAppTests checks
# what it resolved, then runs it against a real server): its own scratch path, as an app's.
# A warning from the library in an app's build is a defect: fail on one.
minimal_log=$(mktemp)
rm -f Examples/MinimalApp/Package.resolved   # resolved afresh, as a new app would
swift build --package-path Examples/MinimalApp --scratch-path .build-minimal-app 2>&1 | tee "$minimal_log"
if grep -E "/(Sources|Examples)/.*warning:" "$minimal_log"; then
    echo "test.sh: the example app's build printed warnings from Strata (above)" >&2
    exit 1
fi
rm -f "$minimal_log"
if [ "$#" -gt 0 ]; then
    swift test --skip-build --traits Server "$@"
else
    # Three rounds. Swift Testing starts every test of a run at once; the long CPU-bound suites
    # (simulations, property and crash tests, memory bounds under load) then starve the tests
    # that wait on a server, a timer or a child process on a 2-core machine, until their HTTP
    # clients time out. So those run first without them, then the heavy ones together. A failure
    # in the first round still runs the second, so one run shows every failure.
    heavy='SimulationTests|AssetKillTests|ServeStateUploadBoundsTests|ServeBoundsTests|TransactionPropertyTests|ConvergenceTests|CrashTests|ConcurrencyTests|SharedStoreProcessTests'
    # The what-if merge simulation (500 pairs of devices syncing through a server, four at a time)
    # runs alone last: beside the server-waiting tests it starves them, beside the long CPU-bound
    # suites it is starved past its limit; alone it takes under a minute.
    alone='MergePreviewSyncTests'
    # Each round's output is kept, so that a failure is summed up at the end: CI shows only the
    # end of a long output, which the second round's progress would fill.
    status=0
    round1=$(mktemp)
    round2=$(mktemp)
    round3=$(mktemp)
    # Round 1 runs at most 12 tests at once (Swift Testing starts them all otherwise): on a
    # slower machine than this one, 600 tests at once starved the ones waiting on a server past
    # their HTTP clients' timeouts; bounded, the round is no slower here (189 s against 209 s).
    SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=12 swift test --skip-build --traits Server --skip "$heavy|$alone" 2>&1 | tee "$round1" || status=$?
    swift test --skip-build --traits Server --filter "$heavy" 2>&1 | tee "$round2" || status=$?
    swift test --skip-build --traits Server --filter "$alone" 2>&1 | tee "$round3" || status=$?
    if [ "$status" != 0 ]; then
        echo "test.sh: swift test failed; what failed, round by round:" >&2
        for round in "$round1" "$round2" "$round3"; do
            echo "--- $( [ "$round" = "$round1" ] && echo "round 1 (--skip heavy)" || { [ "$round" = "$round2" ] && echo "round 2 (--filter heavy)" || echo "round 3 (--filter $alone)"; } )" >&2
            grep -a -E "✘|error: |Fatal error|Exited with|signal [0-9]|Crash|timed out" "$round" | grep -a -v "^.*✔" | cut -c1-1500 | head -60 >&2 || true
        done
        exit "$status"
    fi
    rm -f "$round1" "$round2" "$round3"
fi
# Every decoder of bytes from disk or the network under libFuzzer (its own release build in .build-fuzz).
if [ "${STRATA_FUZZ:-1}" != 0 ]; then
    bash Tools/scripts/fuzz.sh
fi
# The OpenAPI document (Tools/openapi/openapi.yaml) against a live `strata serve`.
if [ "${STRATA_SCHEMATHESIS:-1}" != 0 ]; then
    bash Tools/scripts/schemathesis.sh
fi
# The documentation of every public module, with no DocC warning.
if [ "${STRATA_DOCS:-1}" != 0 ]; then
    bash Tools/scripts/docs.sh
fi
