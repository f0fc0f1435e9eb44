#!/usr/bin/env bash
# `make soak`: builds the soak program and the binaries it drives, then runs the soak for
# SOAK_SECONDS (default 600: ten minutes, docs/RELIABILITY.md#soak) and writes its summary to
# build/soak-report.txt. Exit status: the soak's (0 only when every invariant holds).
#
# Preset: dev (RelWithDebInfo), the build `make test` already keeps warm in ccache; optimised
# enough that the figures are not a debug build's, with symbols for a crash's stack. SOAK_PRESET
# overrides it (asan: the same run under AddressSanitizer + UBSan), SOAK_BUILD the directory.
set -euo pipefail
cd "$(dirname "$0")/.."

PRESET="${SOAK_PRESET:-dev}"
BUILD="${SOAK_BUILD:-build/${PRESET}}"
SECONDS_TO_RUN="${SOAK_SECONDS:-600}"
REPORT="${SOAK_REPORT:-build/soak-report.txt}"
LOGS="${SOAK_LOGS:-build/soak-logs}"

if [[ ! -f "${BUILD}/build.ninja" ]]; then
  cmake --preset "${PRESET}" -B "${BUILD}" >/dev/null
fi
# Through the shared lock: other builds use the same tree and the same cores.
flock /tmp/ninja.lock cmake --build "${BUILD}" --target soak -j "$(nproc)"

if ! command -v prometheus >/dev/null; then
  echo "soak: prometheus is not installed (make deps)" >&2
  exit 1
fi
rm -rf "${LOGS}"
mkdir -p "${LOGS}" "$(dirname "${REPORT}")"
# Simulated trees and sockets on tmpfs where there is one (tests/CMakeLists.txt does the same).
[[ -d /dev/shm ]] && export TMPDIR=/dev/shm
# Scrapes every 2 s with a 2 s timeout: Prometheus defaults to 10 s; 1 s failed once in 612
# scrapes on this shared 2-core machine at a load average of 10.
exec "${BUILD}/tests/soak/soak" --scrape-interval "${SOAK_SCRAPE_INTERVAL:-2}" --seconds "${SECONDS_TO_RUN}" --logs "${LOGS}" --report "${REPORT}"
