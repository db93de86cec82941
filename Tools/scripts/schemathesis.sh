#!/usr/bin/env bash
# Checks Tools/openapi/openapi.yaml against a live `strata serve`: schemathesis generates requests
# for every operation of the document (valid and invalid ones) and checks that every answer is
# allowed by it — no 5xx, a documented status, media type, headers and body.
#
#   bash Tools/scripts/schemathesis.sh            # after `swift build --traits Server` (uses .build/debug/strata)
#   STRATA_SCHEMATHESIS_EXAMPLES=200 STRATA_SCHEMATHESIS_SEED=1 STRATA_SCHEMATHESIS_REPORT_DIR=/tmp/st \
#       bash Tools/scripts/schemathesis.sh
#
# Installs schemathesis from PyPI when it is missing. Starts the server on a free port of
# 127.0.0.1 with a temporary data directory and users file, seeds it (zones of two users, real
# transactions, a compacted snapshot) so that generated requests reach real zones, runs
# schemathesis with alice's token, stops the server with SIGTERM and prints the run's figures.
# Exits non-zero on any failure (a failed check, a server that does not start or does not stop
# cleanly).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

SCHEMATHESIS_VERSION=4.32.5
# Generated test cases per operation (besides the coverage phase's and the stateful phase's).
EXAMPLES=${STRATA_SCHEMATHESIS_EXAMPLES:-150}
SEED=${STRATA_SCHEMATHESIS_SEED:-}
PYTHON=${PYTHON:-python3}
# Where the runs' NDJSON event logs go (alice.ndjson, unauthenticated.ndjson; kept when set, a
# temporary directory otherwise).
REPORT_DIR=${STRATA_SCHEMATHESIS_REPORT_DIR:-}
STRATA=${STRATA:-$ROOT/.build/debug/strata}

say() { printf 'schemathesis.sh: %s\n' "$*" >&2; }

if ! "$PYTHON" -m schemathesis.cli --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
    say "installing schemathesis $SCHEMATHESIS_VERSION"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
if [ ! -x "$STRATA" ]; then
    say "building strata"
    swift build --traits Server --product strata
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-schemathesis.XXXXXX")
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
REPORT_DIR=${REPORT_DIR:-$WORK}
mkdir -p "$REPORT_DIR"

# Users: tokens are random per run; the users file holds their SHA-256 (hex).
ALICE_TOKEN="alice-$("$PYTHON" -c 'import secrets; print(secrets.token_hex(16))')"
BOB_TOKEN="bob-$("$PYTHON" -c 'import secrets; print(secrets.token_hex(16))')"
digest() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat > "$WORK/users.json" <<EOF
{"users": [{"name": "alice", "tokenSHA256": "$(digest "$ALICE_TOKEN")"},
           {"name": "bob", "tokenSHA256": "$(digest "$BOB_TOKEN")"}]}
EOF

# The server: defaults, except long polls capped at 1 s (a generated `wait` of 60 would hold each
# pull a minute) and streams of database changes ended after 0.3 s (each would last an hour),
# compaction every second keeping 2 transactions (so that zones have snapshots),
# and limits low enough for generated requests to meet them: bodies of at most 200 bytes (the
# sample push has 139; random ones reach 256) for `413 tooLarge`, 4 grants per zone and 40 zones
# per user for `403 quotaExceeded`. (A `strata serve` without `--limit` holds long polls up to its
# 60 s maximum: requests get more time.)
LIMITS=()
REQUEST_TIMEOUT=30
# The help read whole first: `grep -q` quits at its first match, and under `pipefail` the help
# cut short by that (SIGPIPE) would fail the test and leave the server without its limits (its
# streams then last an hour, and each generated one waits out the request timeout).
SERVE_HELP=$("$STRATA" serve --help 2>&1 || true)
if grep -q -- '--limit' <<<"$SERVE_HELP"; then
    LIMITS=(--limit maxWait=1 --limit maxStreamDuration=0.3 --limit streamHeartbeat=0.1 --limit maxBodyBytes=200 --limit maxGrantsPerZone=4 --limit maxZonesPerUser=40)
else
    REQUEST_TIMEOUT=90
fi
"$STRATA" serve --data "$WORK/data" --port 0 --users "$WORK/users.json" --retain 2 --compact-every 1 \
    "${LIMITS[@]}" > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVER_PID=$!
URL=""
for _ in $(seq 1 300); do
    URL=$(sed -n 's/^listening on //p' "$WORK/serve.out" | head -n 1)
    [ -n "$URL" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$URL" ]; then
    say "strata serve did not start:"
    cat "$WORK/serve.err" >&2
    exit 1
fi
say "strata serve at $URL (data in $WORK/data)"

api() { # METHOD PATH TOKEN [curl arguments…]: the status; fails on a transport error
    local method=$1 path=$2 token=$3
    shift 3
    curl --silent --show-error --output "$WORK/last.body" --write-out '%{http_code}' -X "$method" \
        -H "Authorization: Bearer $token" "$@" "$URL$path"
}
expect() { # STATUS WHAT COMMAND…
    local want=$1 what=$2
    shift 2
    local got
    got=$("$@")
    if [ "$got" != "$want" ]; then
        say "seeding failed: $what answered $got, expected $want: $(cat "$WORK/last.body")"
        exit 1
    fi
}

# Seed: alice's `notes` (shared, bob may push) with real transactions and a snapshot; bob's public
# `board`, which alice may read but not change (her `read` grant on it is a share she may accept
# and leave: generated `accept` and `leave` requests reach a real share).
expect 201 "PUT notes" api PUT /v1/zones/notes "$ALICE_TOKEN" -H 'Content-Type: application/json' \
    --data '{"access": "shared", "grants": {"bob": "readWrite"}}'
expect 201 "PUT board" api PUT /v1/zones/board "$BOB_TOKEN" -H 'Content-Type: application/json' --data '{"access": "public", "grants": {"alice": "read"}}'
cat > "$WORK/schema.json" <<'EOF'
{"entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string", "default": ""}]}]}
EOF
"$STRATA" init "$WORK/store" --schema "$WORK/schema.json" > /dev/null
for title in Milk Eggs Bread Butter; do
    printf '{"op": "insert", "entity": "Note", "values": {"title": "%s"}}\n' "$title" > "$WORK/change.jsonl"
    "$STRATA" apply "$WORK/store" "$WORK/change.jsonl" > /dev/null
done
STRATA_TOKEN=$ALICE_TOKEN "$STRATA" sync "$WORK/store" --server "$URL" --zone notes > /dev/null
STRATA_TOKEN=$BOB_TOKEN "$STRATA" sync "$WORK/store" --server "$URL" --zone board > "$WORK/sync.out" 2>&1 || true
# Samples for the generated bodies: the zone's transactions as a pull answers them, and its
# snapshot once the compactor has written one.
SNAPSHOT_TOKEN=""
for _ in $(seq 1 100); do
    if [ "$(api GET /v1/zones/notes/snapshot "$ALICE_TOKEN" --dump-header "$WORK/snapshot.headers")" = 200 ]; then
        cp "$WORK/last.body" "$WORK/sample.snapshot"
        SNAPSHOT_TOKEN=$(sed -n 's/^[Ss]trata-[Ss]napshot-[Tt]oken: *\([^[:space:]]*\).*/\1/p' "$WORK/snapshot.headers")
        break
    fi
    sleep 0.1
done
if [ -z "$SNAPSHOT_TOKEN" ]; then
    say "seeding failed: zone notes got no snapshot"
    exit 1
fi
expect 200 "GET changes" api GET "/v1/zones/notes/changes?after=$SNAPSHOT_TOKEN" "$ALICE_TOKEN" --dump-header "$WORK/changes.headers"
NEXT_TOKEN=$(sed -n 's/^[Ss]trata-[Nn]ext-[Tt]oken: *\([^[:space:]]*\).*/\1/p' "$WORK/changes.headers")
cp "$WORK/last.body" "$WORK/sample.frames"
# A database token of alice's (the database changes after it), for generated `after`s.
expect 200 "GET database changes" api GET /v1/database/changes "$ALICE_TOKEN"
DATABASE_TOKEN=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["token"])' "$WORK/last.body")
# Assets (text, so that their chunks travel as LZ4): `notes` holds asset A (1.5 MiB, two chunks),
# uploaded whole by alice; `board` holds asset B (1 MiB + 200 bytes), uploaded by bob, and alice
# has begun B's upload into `notes` without sending a chunk — so generated requests meet a held
# asset, an asset held only elsewhere (the same 404 as an absent one) and an open upload. The
# samples for chunk bodies: B's last chunk, and the LZ4 block of it `board` answers.
"$PYTHON" - "$WORK" <<'PY'
import hashlib, json, sys
work = sys.argv[1]
def asset(name, size):
    line = f"asset {name}: the quick brown fox jumps over the lazy dog\n".encode()
    data = (line * (size // len(line) + 1))[:size]
    chunks = [data[i:i + 1048576] for i in range(0, len(data), 1048576)]
    manifest = {"sha256": hashlib.sha256(data).hexdigest(), "size": size, "chunkSize": 1048576,
                "chunks": [hashlib.sha256(c).hexdigest() for c in chunks]}
    with open(f"{work}/{name}.manifest", "w") as f: json.dump(manifest, f)
    with open(f"{work}/{name}.hash", "w") as f: f.write(manifest["sha256"])
    for i, c in enumerate(chunks):
        with open(f"{work}/{name}.{i}", "wb") as f: f.write(c)
asset("A", 1572864)
asset("B", 1048576 + 200)
PY
ASSET_A=$(cat "$WORK/A.hash")
ASSET_B=$(cat "$WORK/B.hash")
upload() { # TOKEN ZONE NAME CHUNKS: PUT the manifest, then each chunk
    local token=$1 zone=$2 name=$3 chunks=$4 hash
    hash=$(cat "$WORK/$name.hash")
    expect 200 "PUT $zone/assets/$name" api PUT "/v1/zones/$zone/assets/$hash" "$token" -H 'Content-Type: application/json' \
        --data-binary "@$WORK/$name.manifest"
    for i in $(seq 0 $((chunks - 1))); do
        expect 200 "PUT $zone/assets/$name/chunks/$i" api PUT "/v1/zones/$zone/assets/$hash/chunks/$i" "$token" \
            -H 'Content-Type: application/octet-stream' --data-binary "@$WORK/$name.$i"
    done
}
upload "$ALICE_TOKEN" notes A 2
upload "$BOB_TOKEN" board B 2
expect 200 "GET notes/assets/A" api GET "/v1/zones/notes/assets/$ASSET_A" "$ALICE_TOKEN"
expect 404 "GET notes/assets/B (held only by board)" api GET "/v1/zones/notes/assets/$ASSET_B" "$ALICE_TOKEN"
expect 200 "PUT notes/assets/B (begun only)" api PUT "/v1/zones/notes/assets/$ASSET_B" "$ALICE_TOKEN" -H 'Content-Type: application/json' \
    --data-binary "@$WORK/B.manifest"
expect 200 "GET board/assets/B/chunks/1" api GET "/v1/zones/board/assets/$ASSET_B/chunks/1?owner=bob" "$ALICE_TOKEN" --dump-header "$WORK/chunk.headers"
cp "$WORK/last.body" "$WORK/sample.chunk.lz4"
CHUNK_LZ4_LENGTH=$(sed -n 's/^[Ss]trata-[Cc]hunk-[Ll]ength: *\([0-9]*\).*/\1/p' "$WORK/chunk.headers")
if [ -z "$CHUNK_LZ4_LENGTH" ]; then
    say "seeding failed: chunk 1 of asset B did not come back as LZ4"
    exit 1
fi
cp "$WORK/B.1" "$WORK/sample.chunk"
say "seeded: zones notes (alice) and board (bob), $(wc -c < "$WORK/sample.frames") bytes of frames, $(wc -c < "$WORK/sample.snapshot") bytes of snapshot, assets $ASSET_A (notes) and $ASSET_B (board; begun in notes)"

# The runs. Checks: every answer is documented (status, media type, headers, body) and none is a
# 5xx. First as alice, every operation; then with a token the server does not know, the /v1
# operations a few times each: `401 unauthorized`, then (the address's failed-authentication
# bucket empty) `429 rateLimited` with `Retry-After` — last, since the server then refuses this
# address for a while.
SEED_ARGS=()
[ -n "$SEED" ] && SEED_ARGS=(--seed "$SEED")
run() { # NAME TOKEN [schemathesis arguments…]: the run's exit status
    local name=$1 token=$2
    shift 2
    (
        # (From the temporary directory: schemathesis keeps a .schemathesis folder where it runs.)
        cd "$WORK"
        STRATA_SAMPLE_FRAMES="$WORK/sample.frames" STRATA_SAMPLE_SNAPSHOT="$WORK/sample.snapshot" \
        STRATA_SAMPLE_ZONES=notes,board STRATA_SAMPLE_OWNERS=alice,bob STRATA_SAMPLE_TOKENS="$SNAPSHOT_TOKEN,$NEXT_TOKEN,$DATABASE_TOKEN" \
        STRATA_SAMPLE_ASSETS="$ASSET_A,$ASSET_B" STRATA_SAMPLE_MANIFESTS="$WORK/A.manifest,$WORK/B.manifest" STRATA_SAMPLE_CHUNK="$WORK/sample.chunk" \
        STRATA_SAMPLE_CHUNK_LZ4="$WORK/sample.chunk.lz4" STRATA_SAMPLE_CHUNK_LZ4_LENGTH="$CHUNK_LZ4_LENGTH" \
        SCHEMATHESIS_HOOKS="$ROOT/Tools/openapi/schemathesis_hooks.py" \
            "$PYTHON" -m schemathesis.cli run "$ROOT/Tools/openapi/openapi.yaml" \
            --url "$URL" \
            -H "Authorization: Bearer $token" \
            --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
            --generation-with-security-parameters false \
            --request-timeout "$REQUEST_TIMEOUT" \
            --workers 2 \
            --no-color \
            --report ndjson --report-ndjson-path "$REPORT_DIR/$name.ndjson" \
            "${SEED_ARGS[@]}" "$@" 2>&1 | tee "$WORK/$name.out"
        exit "${PIPESTATUS[0]}"
    )
}
set +e
run alice "$ALICE_TOKEN" --max-examples "$EXAMPLES"
STATUS=$?
run unauthenticated "not-a-token-$ALICE_TOKEN" --max-examples 5 --include-path-regex '^/v1/' --phases examples,coverage,fuzzing
UNAUTHENTICATED_STATUS=$?
set -e

# The server must still be up (nothing crashed it) and stop cleanly on SIGTERM.
SERVER_STATUS=0
if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"
    for _ in $(seq 1 300); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        say "strata serve did not exit within 30 s of SIGTERM"
        kill -KILL "$SERVER_PID"
    fi
    wait "$SERVER_PID" || SERVER_STATUS=$?
else
    wait "$SERVER_PID" || SERVER_STATUS=$?
    say "strata serve died during the run (status $SERVER_STATUS):"
    tail -n 20 "$WORK/serve.err" >&2
    SERVER_STATUS=${SERVER_STATUS:-1}
    [ "$SERVER_STATUS" = 0 ] && SERVER_STATUS=1
fi
SERVER_PID=""

echo "as alice (every operation):"
"$PYTHON" "$ROOT/Tools/openapi/schemathesis_figures.py" "$REPORT_DIR/alice.ndjson" || true
echo "with an unknown token (the /v1 operations):"
"$PYTHON" "$ROOT/Tools/openapi/schemathesis_figures.py" "$REPORT_DIR/unauthenticated.ndjson" || true
if [ "$SERVER_STATUS" != 0 ]; then
    say "strata serve exited with status $SERVER_STATUS after SIGTERM"
    exit 1
fi
if [ "$STATUS" != 0 ] || [ "$UNAUTHENTICATED_STATUS" != 0 ]; then
    say "FAILED: schemathesis found answers the document does not allow (exit $STATUS as alice, $UNAUTHENTICATED_STATUS with an unknown token)"
    exit 1
fi
say "passed"
