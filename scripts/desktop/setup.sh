#!/usr/bin/env bash
# Installs what cmd/tessera-desktop needs to build (ebiten v2.9.0: cgo, GL
# and X11 headers) and to run headless (Xvfb, xauth, Mesa's software GL),
# only when missing. Idempotent; installs with apt-get as root and says what
# it installs. See docs/offline-resources.md §7.
#   scripts/desktop/setup.sh
set -euo pipefail

pkgs=(gcc libc6-dev pkg-config libgl1-mesa-dev libxcursor-dev libxi-dev libxinerama-dev
  libxrandr-dev libxxf86vm-dev xvfb xauth libgl1-mesa-dri)

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
need=()
for p in "${pkgs[@]}"; do have_pkg "$p" || need+=("$p"); done

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/desktop/setup.sh: need root to install the desktop app's build and Xvfb dependencies: ${need[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "scripts/desktop/setup.sh: apt-get not found; install by hand: ${need[*]}" >&2
  exit 1
fi
echo "scripts/desktop/setup.sh: installing (as root, with apt-get): ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
