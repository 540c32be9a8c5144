#!/usr/bin/env bash
# The status-page test drives a headless Chromium through playwright-core, which never
# downloads a browser of its own. This makes sure /usr/bin/chromium exists: as root on
# Debian/Ubuntu it installs the `chromium` package; otherwise it says exactly what to
# install and fails.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium not found; installing the Debian package chromium" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
Chromium is needed by the status-page test (integration-tests/src/status-page.test.ts) and
/usr/bin/chromium was not found. Install it, then run the tests again:
  Debian:         sudo apt-get install chromium
  other systems:  make a Chromium binary available at /usr/bin/chromium
MSG
exit 1
