#!/usr/bin/env bash
# The public OJS conformance suite (shared/tools/ojs-conformance, v0.4.0) against `stagecoach admin
# --test-reset --no-auth` on a loopback port, levels 0 to 4 and the extension suites
# (docs/http-binding.md, Conformance).
# Prints each level's summary lines; exits 1 when fewer level-0 cases pass than MIN_LEVEL0 (65: all;
# a warm-up push declares the ladder and the `default` queue first, so that no case's first
# declarations run into the runner's 30 s), and fewer level-1 cases than MIN_LEVEL1 (23: 24 pass,
# one of slack, and a level that falls short runs once more, both printed: several of its cases
# time retries and visibility to the second, which a loaded 2-core machine can miss); the case
# still failing is named in docs/http-binding.md. Level 2 (scheduled: delays, expiry, cron; about
# 4 minutes, two cases wait for real minute ticks) must pass MIN_LEVEL2 (13: all), with the same
# second run when it falls short; level 3 (workflows) MIN_LEVEL3 (14: all); level 4 MIN_LEVEL4 (16:
# all). Then each extension suite (`ext-*`, whose cases say
# `level: ext` or 0: run with `-level -1`) must pass at least its count in EXT_MINS, the cases it
# passes now; a suite not listed is run and printed only.
# Needs a built tree (dist/) and the broker; the runner and its cases are not part of the repository.
set -uo pipefail
cd "$(dirname "$0")/.."

SUITE=${OJS_CONFORMANCE_DIR:-../shared/tools/ojs-conformance}
PORT=${OJS_CONFORMANCE_PORT:-9591}
MIN_LEVEL0=${MIN_LEVEL0:-65}
MIN_LEVEL1=${MIN_LEVEL1:-23}
MIN_LEVEL2=${MIN_LEVEL2:-13}
MIN_LEVEL3=${MIN_LEVEL3:-14}
MIN_LEVEL4=${MIN_LEVEL4:-16}
# suite:minimum. The cases still failing, and why, are in docs/http-binding.md (Conformance).
EXT_MINS=${EXT_MINS:-ext-backpressure:5 ext-progress:3 ext-rate-limiting:4 ext-middleware:3 ext-observability:2 ext-multi-tenancy:7 ext-fair-scheduling:3 ext-admin-api:3 ext-webhooks:5}
# OJS_CONFORMANCE_ONLY: folder names to run (say "level-4-advanced ext-webhooks"); all when empty.
ONLY=${OJS_CONFORMANCE_ONLY:-}
selected() { [ -z "$ONLY" ] || printf '%s\n' $ONLY | grep -qx "$1"; }
URL="http://127.0.0.1:$PORT"
# The broker prefix of the run (the configuration's, unless STAGECOACH_PREFIX overrides it, as it
# does for `stagecoach admin`): two runs on one broker need two prefixes and two ports.
PREFIX=${STAGECOACH_PREFIX:-ojs-conformance}
export STAGECOACH_PREFIX=$PREFIX

if [ ! -x "$SUITE/bin/ojs-conformance" ]; then
  echo "conformance: no runner at $SUITE/bin/ojs-conformance; skipped"
  exit 0
fi

LOG=$(mktemp -d)
# The server runs on a copy: the cases change queue configurations (PUT .../config writes the file).
cp conformance/stagecoach.json "$LOG/stagecoach.json"
node bin/stagecoach.js admin --config "$LOG/stagecoach.json" --host 127.0.0.1 --port "$PORT" --test-reset --no-auth >"$LOG/server.log" 2>&1 &
SERVER=$!
# The queues the cases made (non-durable, one set per queue name) go with the run.
cleanup() {
  kill "$SERVER" 2>/dev/null
  wait "$SERVER" 2>/dev/null
  node --input-type=module -e "import { deletePrefix } from './dist/src/testing/delete-prefix.js'; await deletePrefix('amqp://guest:guest@127.0.0.1:5672/', 'http://guest:guest@127.0.0.1:15672/', '$PREFIX');" ||
    echo "conformance: could not delete the queues of prefix $PREFIX" >&2
}
trap cleanup EXIT
for _ in $(seq 1 60); do
  curl -sf "$URL/ojs/v1/health" >/dev/null 2>&1 && break
  sleep 0.5
done

# Warm-up: the first push declares the delay ladder and the `default` queue (slow on a busy broker);
# the runner resets before each case, so this job is gone before the first one.
curl -s -o /dev/null --max-time 120 -X POST -H 'Content-Type: application/openjobspec+json' \
  -d '{"type":"warm.up","args":[]}' "$URL/ojs/v1/jobs" || true
curl -s -o /dev/null --max-time 120 -X POST "$URL/ojs/v1/admin/reset" || true

passed() { sed -n 's/.*Total: [0-9]* | Passed: \([0-9]*\) .*/\1/p' "$1" | tail -1; }
run_level() {
  timeout 900 "$SUITE/bin/ojs-conformance" -url "$URL" -suites "$1" -level "$2" -reset-url "$URL/ojs/v1/admin/reset" -timeout 30 >"$3" 2>&1
  grep -E ' (FAIL|ERR) +[0-9]+ms' "$3" | sed 's/^/  /'
  grep -E 'Total:' "$3" | sed 's/^ */  /'
}
status=0
for level in 0 1 2 3 4; do
  folder=$(ls -d "$SUITE"/suites/level-"$level"-* | head -1)
  selected "$(basename "$folder")" || continue
  case "$level" in 0) min=$MIN_LEVEL0 ;; 1) min=$MIN_LEVEL1 ;; 2) min=$MIN_LEVEL2 ;; 3) min=$MIN_LEVEL3 ;; *) min=$MIN_LEVEL4 ;; esac
  echo "conformance level $level ($(basename "$folder")):"
  run_level "$folder" "$level" "$LOG/level-$level.txt"
  got=$(passed "$LOG/level-$level.txt")
  if [ "$level" != 0 ] && [ -n "$got" ] && [ "$got" -lt "$min" ]; then
    # Levels 1 and 2 time retries, visibility and schedules to the second: one more run, both printed.
    echo "conformance level $level: $got passed, fewer than $min; once more (its cases time jobs to the second):"
    run_level "$folder" "$level" "$LOG/level-$level-again.txt"
    got=$(passed "$LOG/level-$level-again.txt")
  fi
  if [ -z "$got" ] || [ "$got" -lt "$min" ]; then
    echo "conformance: level $level passed ${got:-no} cases, fewer than the $min it passed before (server log: $LOG/server.log)" >&2
    tail -20 "$LOG/server.log" >&2
    status=1
  fi
done
for folder in "$SUITE"/suites/ext-*; do
  suite=$(basename "$folder")
  selected "$suite" || continue
  min=$(printf '%s\n' $EXT_MINS | sed -n "s/^$suite:\([0-9]*\)$/\1/p")
  echo "conformance $suite:"
  run_level "$folder" -1 "$LOG/$suite.txt"
  got=$(passed "$LOG/$suite.txt")
  if [ -n "$min" ] && { [ -z "$got" ] || [ "$got" -lt "$min" ]; }; then
    echo "conformance: $suite passed ${got:-no} cases, fewer than the $min it passed before (server log: $LOG/server.log)" >&2
    status=1
  fi
done
exit $status
