#!/usr/bin/env bash
# Installs headless Chromium for the browser test (Debian package
# "chromium", binary /usr/lib/chromium/chromium) when it is missing.
# Idempotent; needs root only when something must be installed.
set -euo pipefail

bin=/usr/lib/chromium/chromium
if [ -x "$bin" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/browser/setup.sh: Chromium ($bin) is missing and installing it needs root: apt-get install -y chromium" >&2
  exit 1
fi
echo "scripts/browser/setup.sh: installing chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
if [ ! -x "$bin" ]; then
  echo "scripts/browser/setup.sh: chromium installed but $bin is missing" >&2
  exit 1
fi
"$bin" --version
