#!/usr/bin/env bash
# Container smoke test: builds the image with the project's Dockerfile, runs docker-compose.yml
# (broker, provision, every stage, admin, the two scans) and checks that it works end to end:
#   1. both tenants' scans come out in results/<tenant>.jsonl (one line per sample document);
#   2. a stage container (converter-acme) stops on SIGTERM within its stop_grace_period with exit
#      code 0, starts again and becomes healthy (/readyz);
#   3. a second acme scan, with a document above payloads.threshold (1 MiB) added, comes out too:
#      the restarted stage serves, and the payload store volume is shared by the stages.
# Then it tears down its containers, network and volumes (`down -v`).
#
# Exit codes: 0 passed; 3 skipped (no Docker daemon can be had here, or no base image: the reason
# is printed); anything else failed. `.ci/run` runs it after the tests.
#
# Where the base images of the Dockerfile and docker-compose.yml (node:20-slim,
# rabbitmq:3.13-management) cannot be pulled, it builds stand-ins under those names from Debian's
# packages: a minimal bookworm (debootstrap, imported once as stagecoach-standin/debian:bookworm),
# with this machine's Node.js (Debian's is older than the >= 20.19 the project needs) for node,
# and Debian's rabbitmq-server with the management plugin for rabbitmq. They are labelled
# `stagecoach.standin` and kept between runs (`docker rmi` them to build them anew);
# CONTAINER_SMOKE_PULL=1 tries `docker pull` first.
#
# Environment: CONTAINER_SMOKE_BUDGET (seconds, default 2400) bounds the whole run; the broker's
# and admin's host ports are picked free on 127.0.0.1 (the machine's own broker keeps 5672).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PROJECT=stagecoach-smoke
NODE_IMAGE=node:20-slim
RABBIT_IMAGE=rabbitmq:3.13-management
BASE_IMAGE=stagecoach-standin/debian:bookworm
APP_IMAGE=stagecoach:local
START=$(date +%s)
BUDGET=${CONTAINER_SMOKE_BUDGET:-2400}
DEADLINE=$((START + BUDGET))

log() { echo "container-smoke: $* (+$(($(date +%s) - START)) s)"; }
skip() {
  echo "container-smoke: SKIPPED: $*"
  exit 3
}
fail() {
  echo "container-smoke: FAILED: $*" >&2
  exit 1
}
remaining() { echo $((DEADLINE - $(date +%s))); }
# bounded SECONDS CMD...: runs CMD for at most SECONDS, and never past the budget.
bounded() {
  local limit=$1 left
  shift
  left=$(remaining)
  ((left > 0)) || fail "out of time (CONTAINER_SMOKE_BUDGET=${BUDGET} s)"
  ((limit < left)) || limit=$left
  timeout --kill-after=20 "$limit" "$@"
}
# wait_for SECONDS WHAT CMD...: polls CMD every 3 s until it succeeds, at most SECONDS.
wait_for() {
  local limit=$1 what=$2 until
  shift 2
  until=$(($(date +%s) + limit))
  ((until < DEADLINE)) || until=$DEADLINE
  while ! "$@" >/dev/null 2>&1; do
    (($(date +%s) < until)) || return 1
    sleep 3
  done
  log "$what"
}

WORK=$(mktemp -d /tmp/stagecoach-smoke.XXXXXX)
STARTED_DAEMON=
COMPOSE_UP=

compose() { "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" "$@"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$COMPOSE_UP" ]; then
    if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
      echo "container-smoke: the services' last log lines:" >&2
      timeout 60 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" ps >&2 || true
      timeout 60 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" logs --no-color --tail 25 >&2 || true
    fi
    log "tearing down (containers, network, volumes)"
    timeout 180 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" down -v --remove-orphans -t 60 >/dev/null 2>&1 || true
  fi
  if [ -n "$STARTED_DAEMON" ]; then
    log "stopping the Docker daemon it started (pid $STARTED_DAEMON)"
    kill "$STARTED_DAEMON" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$STARTED_DAEMON" 2>/dev/null || break; sleep 1; done
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# The daemon and compose.

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  bounded 300 apt-get update -q >"$WORK/apt.log" 2>&1 || true
  bounded 600 apt-get install -y -q --no-install-recommends "$@" >>"$WORK/apt.log" 2>&1
}

daemon_answers() { timeout 20 docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  log "installing Debian's docker.io"
  apt_install docker.io || skip "docker.io could not be installed: $(tail -n 3 "$WORK/apt.log" | tr '\n' ' ')"
fi
if ! daemon_answers; then
  command -v dockerd >/dev/null 2>&1 || skip "no dockerd on this machine"
  log "no Docker daemon answers: starting dockerd"
  dockerd >"$WORK/dockerd.log" 2>&1 &
  STARTED_DAEMON=$!
  wait_for 60 "dockerd answers" daemon_answers ||
    skip "dockerd did not answer within 60 s: $(tail -n 5 "$WORK/dockerd.log" | tr '\n' ' ')"
fi

if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
else
  if ! command -v docker-compose >/dev/null 2>&1; then
    log "installing Debian's docker-compose"
    apt_install docker-compose || skip "docker-compose could not be installed: $(tail -n 3 "$WORK/apt.log" | tr '\n' ' ')"
  fi
  COMPOSE=(docker-compose)
fi
log "using $("${COMPOSE[@]}" version 2>/dev/null | head -n 1) and Docker $(docker version --format '{{.Server.Version}}')"

# The legacy builder: it works with every daemon, and `--network host` lets builds reach the
# package registries the way this machine does.
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0

# ---------------------------------------------------------------------------------------------
# Base images: pulled (CONTAINER_SMOKE_PULL=1), found, or stand-ins built from Debian's packages.

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

base_image() {
  have_image "$BASE_IMAGE" && return 0
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap ||
    skip "debootstrap could not be installed: $(tail -n 3 "$WORK/apt.log" | tr '\n' ' ')"
  # The mirror this machine's apt uses (debootstrap's own default otherwise).
  local mirror=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  elif [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)
  fi
  log "building $BASE_IMAGE: debootstrap of a minimal bookworm (once; kept between runs)"
  local rootfs="$WORK/rootfs"
  bounded 1200 debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" ${mirror:+"$mirror"} \
    >"$WORK/debootstrap.log" 2>&1 || skip "debootstrap failed: $(tail -n 3 "$WORK/debootstrap.log" | tr '\n' ' ')"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' -c 'LABEL stagecoach.standin=debootstrap' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
}

node_standin() {
  local node version ctx="$WORK/node-standin"
  node=$(readlink -f "$(command -v node)") || skip "no node on this machine to put in the $NODE_IMAGE stand-in"
  version=$("$node" -p 'process.versions.node')
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
    skip "this machine's Node.js $version is older than the project's >= 20.19: no $NODE_IMAGE stand-in"
  local npm_dir
  npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  [ -f "$npm_dir/package.json" ] || skip "npm's folder not found beside $(command -v npm)"
  log "building a $NODE_IMAGE stand-in: $BASE_IMAGE with this machine's Node.js $version and npm"
  mkdir -p "$ctx"
  cp "$node" "$ctx/node"
  cp -a "$npm_dir" "$ctx/npm"
  # The certificate authorities this machine trusts (a TLS proxy's included): npm in the build
  # reaches the registry as this machine does.
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
  cat >"$ctx/Dockerfile" <<EOF
FROM $BASE_IMAGE
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY ca-certificates.crt /usr/local/share/stagecoach-standin/ca-certificates.crt
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/sh --create-home node \\
 && node --version && npm --version
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/stagecoach-standin/ca-certificates.crt
LABEL stagecoach.standin=node
CMD ["node"]
EOF
  bounded 600 docker build --network host -q -t "$NODE_IMAGE" "$ctx" >"$WORK/node-standin.log" 2>&1 ||
    skip "the $NODE_IMAGE stand-in could not be built: $(tail -n 5 "$WORK/node-standin.log" | tr '\n' ' ')"
}

rabbit_standin() {
  local ctx="$WORK/rabbit-standin"
  log "building a $RABBIT_IMAGE stand-in: $BASE_IMAGE with Debian's rabbitmq-server and its management plugin"
  mkdir -p "$ctx"
  # What the image's entrypoint does for docker-compose*.yml: the default user and the cookie.
  cat >"$ctx/entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
if [ -n "${RABBITMQ_DEFAULT_USER:-}" ]; then
  printf 'default_user = %s\ndefault_pass = %s\n' "$RABBITMQ_DEFAULT_USER" "${RABBITMQ_DEFAULT_PASS:-}" >/etc/rabbitmq/conf.d/05-default-user.conf
fi
if [ -n "${RABBITMQ_ERLANG_COOKIE:-}" ]; then
  printf '%s' "$RABBITMQ_ERLANG_COOKIE" >/var/lib/rabbitmq/.erlang.cookie
  chown rabbitmq:rabbitmq /var/lib/rabbitmq/.erlang.cookie
  chmod 400 /var/lib/rabbitmq/.erlang.cookie
fi
exec rabbitmq-server "$@"
EOF
  cat >"$ctx/Dockerfile" <<EOF
FROM $BASE_IMAGE
# No service starts while packages install (there is no init in a build).
RUN printf '#!/bin/sh\\nexit 101\\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \\
 && apt-get update -q \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server \\
 && rm -rf /var/lib/apt/lists/* \\
 && rabbitmq-plugins enable --offline rabbitmq_management \\
 && mkdir -p /etc/rabbitmq/conf.d \\
 && printf 'loopback_users.guest = false\nlisteners.tcp.default = 5672\nmanagement.tcp.port = 15672\n' >/etc/rabbitmq/conf.d/10-defaults.conf
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 755 /usr/local/bin/docker-entrypoint.sh
EXPOSE 5672 15672
LABEL stagecoach.standin=rabbitmq
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
EOF
  bounded 900 docker build --network host -q -t "$RABBIT_IMAGE" "$ctx" >"$WORK/rabbit-standin.log" 2>&1 ||
    skip "the $RABBIT_IMAGE stand-in could not be built: $(tail -n 5 "$WORK/rabbit-standin.log" | tr '\n' ' ')"
}

for image in "$NODE_IMAGE" "$RABBIT_IMAGE"; do
  if have_image "$image"; then
    kind=$(docker image inspect --format '{{index .Config.Labels "stagecoach.standin"}}' "$image" 2>/dev/null || true)
    log "$image is here${kind:+ (stand-in: $kind)}"
    continue
  fi
  if [ "${CONTAINER_SMOKE_PULL:-}" = 1 ] && bounded 300 docker pull -q "$image" >/dev/null 2>&1; then
    log "$image pulled"
    continue
  fi
  base_image
  case $image in
    "$NODE_IMAGE") node_standin ;;
    "$RABBIT_IMAGE") rabbit_standin ;;
  esac
done

# ---------------------------------------------------------------------------------------------
# The project's image, with its own Dockerfile (one retry: the build downloads packages).

log "building $APP_IMAGE with the project's Dockerfile"
if ! bounded 900 docker build --network host -t "$APP_IMAGE" "$ROOT" >"$WORK/build.log" 2>&1; then
  log "the build failed ($(tail -n 2 "$WORK/build.log" | tr '\n' ' ')); once more"
  bounded 900 docker build --network host -t "$APP_IMAGE" "$ROOT" >"$WORK/build.log" 2>&1 || {
    tail -n 40 "$WORK/build.log" >&2
    fail "docker build of the project's Dockerfile"
  }
fi
log "$APP_IMAGE built"

# ---------------------------------------------------------------------------------------------
# The pipeline.

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local port=$1
  while ! port_free "$port"; do port=$((port + 1)); done
  echo "$port"
}
# Host ports away from the machine's own broker (5672, 15672) and admin (9500).
STAGECOACH_AMQP_PORT=$(free_port 35672)
STAGECOACH_MANAGEMENT_PORT=$(free_port 45672)
STAGECOACH_ADMIN_PORT=$(free_port 39500)
export STAGECOACH_AMQP_PORT STAGECOACH_MANAGEMENT_PORT STAGECOACH_ADMIN_PORT
unset STAGECOACH_BROKER_USER STAGECOACH_BROKER_PASSWORD

# The results go to this run's own folder, not the checkout's ./results (see the override).
mkdir -p "$WORK/results"
# Health checks keep their commands, with room for a loaded machine: Docker does not kill a probe
# that outlives its timeout, so 5 s probes that each start a process pile up when every core is busy.
# The one-shot services (provision, scan) have theirs disabled.
{
  echo 'services:'
  for service in $("${COMPOSE[@]}" -f "$ROOT/docker-compose.yml" config --services); do
    echo "  $service:"
    case $service in
      provision | scan) echo "    restart: 'no'" ;;
      *) echo '    healthcheck: { interval: 15s, timeout: 60s, retries: 8, start_period: 120s }' ;;
    esac
    # The results go to this run's own folder.
    [ "$service" != exporter ] || echo "    volumes: ['$WORK/results:/app/results']"
  done
} >"$WORK/override.yml"

# Whatever an interrupted run left behind.
COMPOSE_UP=1
bounded 180 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" down -v --remove-orphans -t 10 >/dev/null 2>&1 || true

log "docker-compose.yml up (broker on 127.0.0.1:$STAGECOACH_AMQP_PORT)"
bounded 600 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" up -d --no-build >"$WORK/up.log" 2>&1 || {
  cat "$WORK/up.log" >&2
  fail "compose up"
}
log "compose up returned"

# Documents exported for a tenant: lines with distinct job ids (delivery is at-least-once).
lines() {
  node -e '
    const fs = require("fs");
    const file = process.argv[1];
    const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
    const id = (line) => { try { return JSON.parse(line).job_id; } catch { return undefined; } };
    const ids = new Set(text.split("\n").map(id).filter(Boolean));
    console.log(ids.size);
  ' "$WORK/results/$1.jsonl"
}
at_least() { (($(lines "$1") >= $2)); }
samples() { find "$ROOT/stages/samples/$1" -type f | wc -l; }

ACME=$(samples acme)
GLOBEX=$(samples globex)
wait_for 300 "acme's scan: $ACME documents in results/acme.jsonl" at_least acme "$ACME" ||
  fail "acme's scan: $(lines acme) of $ACME documents in results/acme.jsonl after 300 s"
wait_for 120 "globex's scan: $GLOBEX documents in results/globex.jsonl" at_least globex "$GLOBEX" ||
  fail "globex's scan: $(lines globex) of $GLOBEX documents in results/globex.jsonl"

# A stage stops on SIGTERM within its grace period, exit code 0, and comes back.
container=$(compose ps -q converter-acme)
[ -n "$container" ] || fail "no converter-acme container"
stop_start=$(date +%s)
bounded 120 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" stop converter-acme >/dev/null 2>&1 ||
  fail "compose stop converter-acme"
stopped_in=$(($(date +%s) - stop_start))
code=$(docker inspect --format '{{.State.ExitCode}}' "$container")
[ "$code" = 0 ] || fail "converter-acme exited with code $code on SIGTERM (after $stopped_in s)"
log "converter-acme stopped on SIGTERM in $stopped_in s, exit code 0"
bounded 120 "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$WORK/override.yml" start converter-acme >/dev/null 2>&1 ||
  fail "compose start converter-acme"
healthy() { [ "$(docker inspect --format '{{.State.Health.Status}}' "$container")" = healthy ]; }
wait_for 180 "converter-acme is healthy again (/readyz)" healthy ||
  fail "converter-acme not healthy 180 s after its start: $(docker inspect --format '{{.State.Health.Status}}' "$container")"

# A second acme scan through the restarted stage, with a document above payloads.threshold: it
# travels by reference through the payload store volume (explorer -> converter -> matcher).
explorer=$(compose ps -q explorer)
node -e '
  const line = "Large report: contact big.payload@example.com for the figures.\n";
  process.stdout.write(line.repeat(Math.ceil((1536 * 1024) / line.length)));
' >"$WORK/large.txt"
docker cp "$WORK/large.txt" "$explorer:/app/stages/samples/acme/large.txt"
before=$(lines acme)
bounded 120 docker exec "$explorer" node /app/bin/stagecoach.js publish scan-specs --type scan.folder --args '["acme"]' --tenant acme \
  >/dev/null || fail "publishing acme's second scan"
want=$((before + ACME + 1))
wait_for 300 "acme's second scan through the restarted converter-acme: $((ACME + 1)) documents, one of $(($(wc -c <"$WORK/large.txt") / 1024)) KiB" \
  at_least acme "$want" || fail "acme's second scan: $(($(lines acme) - before)) of $((ACME + 1)) documents after 300 s"
grep -q 'large.txt' "$WORK/results/acme.jsonl" || fail "the large document is not in results/acme.jsonl"
grep 'large.txt' "$WORK/results/acme.jsonl" | grep -q 'big.payload@example.com' || fail "the large document's finding is missing"

log "passed"
