#!/usr/bin/env bash
# Installs every Debian package that building, testing and demoing neuron-node-agent needs.
# Idempotent: it installs only what is missing, so `make` can call it on every run.
# Used by the Makefile on a bare machine (as root), by .ci/run and by deploy/Dockerfile.
#   scripts/install-deps.sh           everything below
#   scripts/install-deps.sh --build   only what building the five binaries of the image needs
#                                     (deploy/Dockerfile's build stage): no clang, test tools,
#                                     Prometheus or tmux
#   scripts/install-deps.sh --image   what `make image` needs on a machine without a Docker
#                                     engine (scripts/image.sh): buildah, and debootstrap for
#                                     the Debian bases when the registry cannot be reached
set -euo pipefail

build_packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler prometheus-cpp-dev
  libspdlog-dev libudev-dev libncurses-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  # neuron-dra-api: the Kubernetes client (plugin/kubeapi/client.h)
  libcurl4-openssl-dev
  # exporter: TLS and bcrypt for the web config
  libssl-dev libcrypt-dev
  # the device model's validation: reads the published training figures (a header-only CSV
  # reader; driver-sim/model/published_rows.cc)
  libfccp-dev
)
dev_packages=(
  # ccache: compiler output reused across clones, worktrees and CI runs (docs/build.md#ccache); the
  # image's build stage compiles once and goes without
  ccache
  # clang-14 and libclang-rt-14-dev: the fuzz preset's libFuzzer
  clang-14 libclang-rt-14-dev
  # scripts/check.sh (make check, .ci/run): /usr/bin/clang-format and /usr/bin/clang-tidy (14)
  clang-format clang-tidy
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev umockdev libumockdev-dev prometheus tmux
  util-linux procps
  # strace: neuron-ls's syscall budget (tests/top ls_syscalls_test, bench/top_bench); linux-perf:
  # `perf stat` for profiling by hand (bench/README.md#neuron-ls-cost)
  strace linux-perf
  # curl/openssl in the exporter's tests, node_exporter for the side-by-side benchmark
  curl openssl prometheus-node-exporter
  # tests/docs/check_citations.py, and scripts/demo-cluster.sh's JSON and port helpers;
  # python3-yaml: scripts/demo-dra.sh loads the DRA overlay's DeviceClasses
  python3 python3-yaml
)
case "${1:-}" in
  "") packages=("${build_packages[@]}" "${dev_packages[@]}") ;;
  --build) packages=("${build_packages[@]}") ;;
  --image) packages=(buildah debootstrap) ;;
  *) echo "usage: $0 [--build|--image]" >&2; exit 2 ;;
esac

# kubectl (its `kubectl kustomize`) renders deploy/ in tests/deploy. Debian's kubernetes-client is
# 1.20, whose kustomize 2.0 knows neither the `labels` field nor components that deploy/ uses
# (kustomize 4.1 and later: kubectl 1.22 and later), so it is not installed from here. The
# machines this project runs on ship a current kubectl; elsewhere install one (kubernetes.io,
# "Install kubectl on Linux"). Without it tests/deploy fails and says so.
kubectl_ok() {
  command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1 &&
    [ "$(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -1)" -ge 22 ] 2>/dev/null
}
if [ "${1:-}" = "" ] && ! kubectl_ok; then
  echo "install-deps: kubectl 1.22 or later is missing (tests/deploy needs 'kubectl kustomize');" \
    "Debian's kubernetes-client is too old: install kubectl from kubernetes.io" >&2
fi

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
