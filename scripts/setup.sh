#!/usr/bin/env bash
# Installs what tessera's build and tests need on a fresh Debian machine,
# only when missing. Runs as root (apt-get); says what it installs.
#   scripts/setup.sh [base] [gpu] [desktop] [browser] [torch] [jpeg] [jinja] [wasm] [npm]
set -euo pipefail

want=("$@")
[ ${#want[@]} -eq 0 ] && want=(base)

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
add() { for p in "$@"; do have_pkg "$p" || need+=("$p"); done; }

for w in "${want[@]}"; do
  case "$w" in
    base)    add gcc libc6-dev make ;;
    gpu)     add mesa-vulkan-drivers libvulkan1 ;;
    browser) add chromium ;;
    torch)   add python3-torch python3-numpy ;;
    jpeg)    add libjpeg-turbo-progs ;;  # djpeg, the reference of TestJPEGAgainstLibjpegTurbo
    jinja)   add python3 python3-jinja2 ;;  # jinja2, the reference of TestKimiChatTemplateMatchesRenderKimi and core/chat's goldens
    wasm)    add wabt nodejs python3 ;;  # scripts/gen/simd128.py + wat2wasm make core/ref's SIMD128 kernels; node runs GOOS=js tests
    npm)     command -v npm >/dev/null 2>&1 || add npm ;;
    desktop) add gcc libc6-dev pkg-config libgl1-mesa-dev libxcursor-dev libxi-dev libxinerama-dev libxrandr-dev libxxf86vm-dev xvfb xauth libgl1-mesa-dri ;;
    *) echo "setup.sh: unknown component $w" >&2; exit 2 ;;
  esac
done

if ! command -v go >/dev/null 2>&1; then
  echo "setup.sh: Go 1.26 is required but 'go' is not on PATH (expected at /usr/local/go/bin)" >&2
  exit 1
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: need root to install: ${need[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing (as root, with apt-get): ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
