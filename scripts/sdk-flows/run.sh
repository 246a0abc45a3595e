#!/usr/bin/env bash
# The official OJS SDKs' README flows (python_flow.py, js-flow.mjs) against `stagecoach admin`
# on a loopback port, under a prefix of their own (README.md beside this file). Each flow runs
# when its SDK is at hand and is skipped, saying so, when it is not: neither SDK is a dependency.
# Exits 1 when a flow that ran failed a step.
set -uo pipefail
cd "$(dirname "$0")/../.."

PORT=${SDK_FLOWS_PORT:-9642}
PREFIX=${STAGECOACH_PREFIX:-ojs-sdk-flows}
export STAGECOACH_PREFIX=$PREFIX
export STAGECOACH_ADMIN_TOKEN=${STAGECOACH_ADMIN_TOKEN:-sdk-flows-$(node -e 'console.log(require("crypto").randomBytes(16).toString("hex"))')}
PYTHON=${OJS_PYTHON:-python3}
URL="http://127.0.0.1:$PORT"

LOG=$(mktemp -d)
# The queue settings (`small`'s max_size) are policies that provision puts on the broker.
node bin/stagecoach.js provision --config scripts/sdk-flows/stagecoach.json >"$LOG/provision.log" 2>&1 ||
  { echo "sdk-flows: provision failed" >&2; cat "$LOG/provision.log" >&2; exit 1; }
node bin/stagecoach.js admin --config scripts/sdk-flows/stagecoach.json --host 127.0.0.1 --port "$PORT" >"$LOG/server.log" 2>&1 &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null
  wait "$SERVER" 2>/dev/null
  node --input-type=module -e "import { deletePrefix } from './dist/src/testing/delete-prefix.js'; await deletePrefix('amqp://guest:guest@127.0.0.1:5672/', 'http://guest:guest@127.0.0.1:15672/', '$PREFIX');" ||
    echo "sdk-flows: could not delete the queues of prefix $PREFIX" >&2
}
trap cleanup EXIT
for _ in $(seq 1 60); do
  curl -sf "$URL/ojs/v1/health" >/dev/null 2>&1 && break
  sleep 0.5
done
export OJS_URL=$URL OJS_TOKEN=$STAGECOACH_ADMIN_TOKEN
OJS_ACME_TOKEN=$(node bin/stagecoach.js credentials acme --role http --config scripts/sdk-flows/stagecoach.json)
export OJS_ACME_TOKEN

status=0
if "$PYTHON" -c 'import ojs, httpx' 2>/dev/null; then
  "$PYTHON" scripts/sdk-flows/python_flow.py || status=1
else
  echo "python: skipped (no ojs SDK and httpx for $PYTHON; set OJS_PYTHON to an interpreter that has them)"
fi
if [ -n "${OJS_JS_SDK:-}" ] || node -e 'import("@openjobspec/sdk")' 2>/dev/null; then
  node scripts/sdk-flows/js-flow.mjs || status=1
else
  echo "js: skipped (set OJS_JS_SDK to the SDK's dist/esm/index.js, or install @openjobspec/sdk)"
fi
[ $status -eq 0 ] || tail -20 "$LOG/server.log" >&2
exit $status
