#!/usr/bin/env bash
# The container tests (integration-tests/src/compose.test.ts) build diffmesh's image and run
# the compose stack. This makes sure a Docker engine answers and that the local base images
# exist, and prints what the test needs as KEY=VALUE lines on stdout:
#   BASE_IMAGE=…      a Debian bookworm minbase with this machine's node, npm and Node headers
#   NATS_IMAGE=…      the same base with Debian's nats-server (a stand-in for nats:2.10-alpine)
#   COMPOSE=…         `docker compose` (v2) when the plugin is there, else `docker-compose` (v1)
# As root on Debian/Ubuntu it installs docker.io, docker-compose and debootstrap and starts
# dockerd in the background (log: /var/log/diffmesh-dockerd.log) when they are missing.
# Otherwise it says what is missing on stderr and exits 3 (the test then skips with that reason).
#
# No image registry is needed: the base image is made here with debootstrap from the apt
# mirror this machine uses, so it works where Docker Hub is out of reach. Both images stay
# in the engine's store; a later run reuses them (and the build's cached layers).
set -euo pipefail

need() {
  echo "$1" >&2
  exit 3
}
is_root() { [ "$(id -u)" = "0" ]; }

if ! command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  is_root && command -v apt-get >/dev/null 2>&1 || need "no Docker engine: install docker.io (Debian) or Docker Engine, or run the tests as root"
  echo "Docker not found; installing the Debian packages docker.io docker-compose debootstrap" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  is_root || need "the Docker engine does not answer and only root may start dockerd here"
  echo "starting dockerd (log: /var/log/diffmesh-dockerd.log)" >&2
  nohup dockerd >/var/log/diffmesh-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || need "dockerd did not start: see /var/log/diffmesh-dockerd.log"
fi

if docker compose version >/dev/null 2>&1; then
  COMPOSE="docker compose"
elif command -v docker-compose >/dev/null 2>&1; then
  COMPOSE="docker-compose"
else
  need "neither docker compose (v2) nor docker-compose (v1) is installed"
fi

NODE_BIN="$(command -v node)"
NODE_VERSION="$("$NODE_BIN" -p 'process.versions.node')"
BASE_IMAGE="diffmesh-local/node:${NODE_VERSION}-bookworm"
NATS_IMAGE="diffmesh-local/nats:bookworm"

make_base() {
  command -v debootstrap >/dev/null 2>&1 || {
    is_root || need "debootstrap is needed to make the base image"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  local mirror
  mirror="$({ cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true; } |
    awk '/^(URIs:|deb) +http/ && $2 ~ /\/debian\/?$/ { print $2; exit }')"
  mirror="${mirror:-http://deb.debian.org/debian}"
  local root
  root="$(mktemp -d /var/tmp/diffmesh-rootfs.XXXXXX)"
  trap 'rm -rf "$root"' RETURN
  echo "making ${BASE_IMAGE} with debootstrap from ${mirror}" >&2
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  # The official node images put node, npm and the headers under /usr/local.
  local prefix
  prefix="$(dirname "$(dirname "$NODE_BIN")")"
  install -m 0755 "$NODE_BIN" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/lib/node_modules" "$root/usr/local/include"
  cp -a "$prefix/lib/node_modules/npm" "$root/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  cp -a "$prefix/include/node" "$root/usr/local/include/node"
  # This machine's CA bundle: the registry may sit behind a TLS-inspecting proxy.
  mkdir -p "$root/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV npm_config_cafile=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV npm_config_nodedir=/usr/local' \
    --change 'CMD ["node"]' - "$BASE_IMAGE" >/dev/null
}

make_nats() {
  echo "making ${NATS_IMAGE} (Debian's nats-server)" >&2
  printf '%s\n' "FROM ${BASE_IMAGE}" \
    'RUN apt-get update && apt-get install -y --no-install-recommends nats-server wget && rm -rf /var/lib/apt/lists/*' \
    'ENTRYPOINT ["nats-server"]' |
    DOCKER_BUILDKIT=0 docker build -q -t "$NATS_IMAGE" - >/dev/null
}

docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || make_base
docker image inspect "$NATS_IMAGE" >/dev/null 2>&1 || make_nats

echo "BASE_IMAGE=${BASE_IMAGE}"
echo "NATS_IMAGE=${NATS_IMAGE}"
echo "COMPOSE=${COMPOSE}"
