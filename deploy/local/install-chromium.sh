#!/usr/bin/env bash
# Debian's Chromium for the dashboard's browser test (gateway/test/dashboard.test.ts),
# driven by playwright-core: npm packages may not download browsers here, apt can.
# Idempotent: does nothing when /usr/bin/chromium is already installed.
set -euo pipefail

command -v chromium >/dev/null && exit 0
printf '[install-chromium] installing Debian chromium (apt-get)\n' >&2
as_root=()
((EUID == 0)) || as_root=(sudo)
"${as_root[@]}" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq chromium >&2
