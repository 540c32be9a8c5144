#!/usr/bin/env bash
# Video results are encoded by ffmpeg (MP4/H.264 with libx264, WebM/VP9 with libvpx); the
# media, CLI, gateway and GetResult tests encode and probe real clips. This makes sure ffmpeg
# and ffprobe are on PATH: as root on Debian/Ubuntu it installs the `ffmpeg` package;
# otherwise it says exactly what to install and fails.
set -euo pipefail
if command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ffmpeg not found; installing the Debian package ffmpeg" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
ffmpeg and ffprobe are needed by the video tests (media, CLI, gateway, GetResult) and were not
found on PATH. Install them, then run the tests again:
  Debian/Ubuntu:  sudo apt-get install ffmpeg
  macOS:          brew install ffmpeg
MSG
exit 1
