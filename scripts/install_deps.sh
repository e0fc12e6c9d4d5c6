#!/usr/bin/env bash
# Installs what building and testing actorcc needs on a fresh Debian machine with the CUDA
# toolkit (nvcc is optional: without it the CPU backend alone is built). Idempotent: installs
# only what is missing, and names it before installing it.
set -euo pipefail
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v ninja >/dev/null || need_apt+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "actorcc: missing ${need_apt[*]}: install them (as root: apt-get install ${need_apt[*]})" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "== installing with apt-get: ${need_apt[*]} (build tools actorcc needs)"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
