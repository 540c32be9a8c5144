#!/usr/bin/env bash
# The status-page test drives a headless Chromium through playwright-core, which never
# downloads a browser of its own, and the WebGPU tests run onnxruntime's WebGPU provider on
# the SwiftShader Vulkan driver that Chromium ships, through the system's Vulkan loader
# (libvulkan.so.1, package libvulkan1; installing chromium without recommends leaves it out).
# This makes sure both exist: as root on Debian/Ubuntu it installs the packages; otherwise it
# says exactly what to install and fails.
set -euo pipefail
have_vulkan() { ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '; }
if [ -x /usr/bin/chromium ] && have_vulkan; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium or the Vulkan loader not found; installing the Debian packages chromium and libvulkan1" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium libvulkan1 >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
Chromium is needed by the status-page test (integration-tests/src/status-page.test.ts) and
the Vulkan loader by the WebGPU tests (integration-tests/src/webgpu.test.ts), and
/usr/bin/chromium or libvulkan.so.1 was not found. Install them, then run the tests again:
  Debian:         sudo apt-get install chromium libvulkan1
  other systems:  make a Chromium binary available at /usr/bin/chromium and install the
                  Vulkan loader (libvulkan.so.1)
MSG
exit 1
