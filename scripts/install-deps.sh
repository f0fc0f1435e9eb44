#!/usr/bin/env bash
# Installs every Debian package that building, testing and demoing neuron-node-agent needs.
# Idempotent: it installs only what is missing, so `make` can call it on every run.
# Used by the Makefile on a bare machine (as root), by .ci/run and by deploy/Dockerfile.
set -euo pipefail

packages=(
  # toolchain (clang-14 and libclang-rt-14-dev: the fuzz preset's libFuzzer)
  build-essential cmake ninja-build pkg-config clang-14 libclang-rt-14-dev
  # scripts/check.sh (make check, .ci/run): /usr/bin/clang-format and /usr/bin/clang-tidy (14)
  clang-format clang-tidy
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler prometheus-cpp-dev
  libspdlog-dev libudev-dev libncurses-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev umockdev libumockdev-dev prometheus tmux
  util-linux procps
  # exporter: TLS and bcrypt for the web config, curl/openssl in its tests, node_exporter for the
  # side-by-side benchmark
  libssl-dev libcrypt-dev curl openssl prometheus-node-exporter
  # tests/docs/check_citations.py, and scripts/demo-cluster.sh's JSON and port helpers
  python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
