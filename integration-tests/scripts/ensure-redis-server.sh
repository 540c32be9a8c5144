#!/usr/bin/env bash
# The tensor store tests start their own redis-server on a free loopback port (never the
# machine's own on 6379). This makes sure the binary exists: as root on Debian/Ubuntu it
# installs the `redis-server` package; otherwise it says exactly what to install and fails.
set -euo pipefail
for candidate in "$(command -v redis-server 2>/dev/null || true)" /usr/bin/redis-server /usr/sbin/redis-server /usr/local/bin/redis-server /usr/local/sbin/redis-server; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    exit 0
  fi
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server not found; installing the Debian package redis-server" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq redis-server >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
redis-server is needed by the tensor store tests and was not found.
Install it, then run the tests again:
  Debian/Ubuntu:  sudo apt-get install redis-server
  other systems:  put a redis-server binary (7.0 or newer) on PATH
MSG
exit 1
