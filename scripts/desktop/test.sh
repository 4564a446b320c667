#!/usr/bin/env bash
# make test-desktop: installs the desktop app's build deps and Xvfb when
# missing (scripts/setup.sh desktop, as root), then runs the Xvfb end-to-end
# test: scripted mode on a random k3-nano must print what `tessera run`
# prints and leave a screenshot that is not blank and shows the heatmap;
# the README's screenshot must have been made from the app's current
# sources (TESSERA_DESKTOP_README=write, i.e. make desktop-screenshot,
# rewrites it).
# CI=true makes missing Xvfb a failure instead of a skip.
#   scripts/desktop/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh desktop
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(d=/tmp/tessera-xdg-$(id -u); mkdir -p "$d" && chmod 700 "$d" && echo "$d")}"
exec "${GO:-go}" test -count=1 -v -run 'TestScriptedUnderXvfb|TestReadmeScreenshotIsCurrent' "$@" ./cmd/tessera-desktop/internal/desk
