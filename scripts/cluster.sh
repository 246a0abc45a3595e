#!/usr/bin/env bash
# A 3-node RabbitMQ cluster on this machine for local use (docs/cluster.md):
#   scripts/cluster.sh up [--management]   # nodes on 127.0.0.1:5681-5683 (CLUSTER_PORTS), prints AMQP_URL
#   scripts/cluster.sh status
#   scripts/cluster.sh down                # stops the nodes, deletes CLUSTER_DIR (/tmp/stagecoach-cluster)
# Needs rabbitmq-server and root. The same helper starts the cluster of test/integration/cluster.test.ts.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f dist/scripts/cluster.js ] || [ scripts/cluster.ts -nt dist/scripts/cluster.js ]; then
  npm run --silent build:all >&2
fi
exec node dist/scripts/cluster.js "$@"
