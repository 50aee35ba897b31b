#!/usr/bin/env bash
# Installs kaio's build and test dependencies from Debian packages.
# The CUDA 13 toolkit (headers + libnvJitLink) is expected under /usr/local/cuda.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
PKGS="cmake ninja-build g++ liblmdb-dev libspdlog-dev libfmt-dev catch2 libxxhash-dev libcli11-dev nlohmann-json3-dev redis-server libhiredis-dev libssl-dev python3 python3-venv"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq $missing
fi
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/nvJitLink.h" ]; then
  echo "install-deps: the CUDA 13 toolkit (nvJitLink) was not found under ${CUDA_HOME:-/usr/local/cuda}" >&2
  exit 1
fi
echo "install-deps: all dependencies present"
