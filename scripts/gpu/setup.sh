#!/bin/sh
# Installs the Vulkan loader and Mesa's lavapipe (a CPU Vulkan driver) so the
# WebGPU backend's tests run on machines without a GPU. Idempotent: does
# nothing when both packages are already installed. Needs root (apt-get).
set -eu
pkgs="libvulkan1 mesa-vulkan-drivers"
missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "gpu/setup: $pkgs already installed"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "gpu/setup: need root to install:$missing" >&2
	exit 1
fi
echo "gpu/setup: installing$missing (Vulkan loader + lavapipe)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
echo "gpu/setup: done"
