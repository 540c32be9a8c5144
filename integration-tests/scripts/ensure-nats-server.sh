#!/usr/bin/env bash
# The integration tests start their own nats-server on a free loopback port. This makes sure
# the binary exists: as root on Debian/Ubuntu it installs the `nats-server` package; otherwise
# it says exactly what to install and fails.
set -euo pipefail
for candidate in "$(command -v nats-server 2>/dev/null || true)" /usr/sbin/nats-server /usr/local/sbin/nats-server /usr/local/bin/nats-server; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    exit 0
  fi
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "nats-server not found; installing the Debian package nats-server" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq nats-server >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
nats-server is needed by the integration tests and was not found.
Install it, then run the tests again:
  Debian/Ubuntu:  sudo apt-get install nats-server
  other systems:  put a nats-server binary (2.9 or newer) on PATH
MSG
exit 1
