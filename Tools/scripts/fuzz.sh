#!/usr/bin/env bash
# Builds the libFuzzer targets of Tools/Fuzz (release, `--sanitize=fuzzer`, scratch path .build-fuzz)
# and runs each for STRATA_FUZZ_RUNS executions (default 100000) over its committed corpus
# (Tools/Fuzz/Corpus/<target>/). Prints the executions and the time of each target; exits non-zero
# when any target crashes, times out on an input (STRATA_FUZZ_TIMEOUT seconds, default 10) or
# exceeds its memory limit (2 GB), after printing the fuzzer's report and where the input was saved.
#
#     bash Tools/scripts/fuzz.sh                          # every target
#     bash Tools/scripts/fuzz.sh fuzz-transaction         # some targets
#     STRATA_FUZZ_RUNS=10000000 bash Tools/scripts/fuzz.sh
#     bash Tools/scripts/fuzz.sh --seeds [target…]        # rewrite the seed corpus from the targets
#
# New inputs the fuzzer finds go to a scratch directory, never into the committed corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."

ALL=(fuzz-log-record fuzz-log-segment fuzz-transaction fuzz-adoption fuzz-snapshot fuzz-change-token
     fuzz-push-frames fuzz-store-identity fuzz-sync-cursor fuzz-users-file fuzz-state-upload fuzz-packed-log)
RUNS="${STRATA_FUZZ_RUNS:-100000}"
TIMEOUT="${STRATA_FUZZ_TIMEOUT:-10}"
SCRATCH=".build-fuzz"
CORPUS="Tools/Fuzz/Corpus"

seeds=0
if [ "${1:-}" = "--seeds" ]; then seeds=1; shift; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${ALL[@]}"); fi
for t in "${targets[@]}"; do
    case " ${ALL[*]} " in *" $t "*) ;; *) echo "fuzz: unknown target $t (known: ${ALL[*]})" >&2; exit 2 ;; esac
done

# -enable-testing: some decoders are internal (the record decoder, the identity and cursor files,
# the users file) and the targets reach them with @testable import.
build=(swift build -c release --sanitize=fuzzer -Xswiftc -enable-testing --package-path Tools/Fuzz --scratch-path "$SCRATCH")
# Runs a build, prints its output less the noise, and returns the build's own status. (It was
# `build | grep … || true` and then PIPESTATUS: under pipefail a failed build made the pipe fail,
# `|| true` ran, and PIPESTATUS was true's — a build that failed went on to fuzz the old binaries.)
quiet_build() {
    local out status
    out="$(mktemp)"
    "$@" > "$out" 2>&1 && status=0 || status=$?
    grep -Ev "^warning: '|^    /|Compiling|^\[" "$out" || true
    rm -f "$out"
    return "$status"
}
start=$(date +%s)
if [ ${#targets[@]} -eq ${#ALL[@]} ]; then
    quiet_build "${build[@]}" || { echo "fuzz: the build failed" >&2; exit 1; }
else
    for t in "${targets[@]}"; do
        quiet_build "${build[@]}" --product "$t" || { echo "fuzz: the build of $t failed" >&2; exit 1; }
    done
fi
bin="$("${build[@]}" --show-bin-path)"
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - start )) s"

if [ $seeds = 1 ]; then
    for t in "${targets[@]}"; do
        rm -f "$CORPUS/$t"/seed-*
        STRATA_FUZZ_SEEDS="$CORPUS/$t" "$bin/$t"
    done
    exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/strata-fuzz.XXXXXX")"
failed=()
printf '%-22s %12s %8s %10s  %s\n' target executions seconds "exec/s" result
for t in "${targets[@]}"; do
    [ -d "$CORPUS/$t" ] || { echo "fuzz: no corpus at $CORPUS/$t" >&2; exit 1; }
    mkdir -p "$work/$t/new" "$work/$t/artifacts"
    t0=$(date +%s%N)
    set +e
    # Without the Swift runtime's backtracer, libFuzzer handles the crash and saves the input.
    SWIFT_BACKTRACE=enable=no "$bin/$t" -runs="$RUNS" -timeout="$TIMEOUT" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/$t/artifacts/" "$work/$t/new" "$CORPUS/$t" >"$work/$t/log" 2>&1
    rc=$?
    set -e
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    seconds="$((ms / 1000)).$((ms % 1000 / 100))"
    executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t/log" | grep -o '[0-9]*$' || echo "?")
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$work/$t/log" | grep -o '[0-9]*$' || echo "?")
    if [ $rc = 0 ] && [ "$executed" != "?" ] && [ "$executed" -ge "$RUNS" ]; then
        result=ok
    else
        result="FAILED (exit $rc)"
        failed+=("$t")
    fi
    printf '%-22s %12s %8s %10s  %s\n' "$t" "$executed" "$seconds" "$rate" "$result"
    if [ "$result" != ok ]; then
        echo "---- $t: the fuzzer's report (full log: $work/$t/log) ----" >&2
        grep -v '^#[0-9]' "$work/$t/log" | tail -40 >&2
        echo "---- the failing input: $(ls "$work/$t/artifacts/" 2>/dev/null | sed "s|^|$work/$t/artifacts/|" | tr '\n' ' ') ----" >&2
        echo "     reproduce: $bin/$t <that file>" >&2
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (logs and inputs under $work)" >&2
    exit 1
fi
rm -rf "$work"
echo "fuzz: ${#targets[@]} targets, $RUNS executions each, no crash, timeout or memory failure"
