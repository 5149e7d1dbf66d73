#!/usr/bin/env bash
# Installs the Debian packages evo builds with, when any is missing, and checks for CUDA 13.
set -euo pipefail

# libjs-chart.js: the plotting library `evo report` embeds in its pages; chromium: the tests
# render a report in it headless; python3-optuna: the TPE baseline of scripts/search-bench.py.
packages=(cmake g++ make nlohmann-json3-dev libspdlog-dev libfmt-dev libsqlite3-dev catch2 libcli11-dev
  libjs-chart.js chromium python3-optuna)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ] || ! ls "$cuda"/lib64/libnvrtc.so.13* >/dev/null 2>&1; then
  echo "install-deps: the CUDA 13 toolkit (NVRTC) is not at $cuda; install it or set CUDA_HOME" >&2
  exit 1
fi
