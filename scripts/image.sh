#!/usr/bin/env bash
# The container image (deploy/Dockerfile), built with whichever engine works on this machine.
#   scripts/image.sh build [REF]   build the image as REF (`make image`; default
#                                  neuron-node-agent:<project version>), and its build stage as
#                                  REF-build, then print the sizes below. With
#                                  IMAGE_BINARIES=DIR (a release build directory, e.g.
#                                  build/release), the image takes DIR's five binaries instead of
#                                  compiling its own (the Dockerfile's `prebuilt` target)
#   scripts/image.sh sizes [REF]   each stage's size, and its base's, as the engine stores them
#   scripts/image.sh engine        the engine `build` would use
#   scripts/image.sh revision      the revision `build` passes (core/base/version.cmake's)
# Engine: docker when its daemon answers, else podman, else buildah; IMAGE_ENGINE=docker|podman|
# buildah chooses. podman and buildah build without a daemon, with chroot isolation
# (IMAGE_ISOLATION changes it): the one that works where containers get no cgroups of their own.
# Without any of them, buildah it is: scripts/install-deps.sh --image installs Debian's buildah and
# debootstrap when they are missing (as root; otherwise it names them).
# Bases: scripts/image-bases.sh (the registry's Debian, or Debian's archive through debootstrap).
# Layers are cached: a change to the sources recompiles the binaries, a new revision without one
# relinks them (deploy/Dockerfile), a build with neither reuses every layer.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "image: $*" >&2; }

default_ref() {
  local version
  version=$(sed -n 's/^project(neuron_node_agent VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
  echo "neuron-node-agent:$version"
}

engine() {
  if [ -n "${IMAGE_ENGINE:-}" ]; then
    echo "$IMAGE_ENGINE"
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v podman >/dev/null; then
    echo podman
  else
    echo buildah
  fi
}

# The short commit id as the binaries of a build in this checkout say it (version.cmake's rules:
# "-dirty" for uncommitted changes, which the context carries too).
revision() {
  local out
  out=$(mktemp)
  cmake -DSOURCE_DIR="$PWD" -DOUTPUT="$out" -P core/base/version.cmake
  sed -n 's/^#define NEURON_BUILD_REVISION "\(.*\)"$/\1/p' "$out"
  rm -f "$out"
}

build_cmd() {  # build_cmd ENGINE: the engine's build command with its daemonless options
  case "$1" in
    docker) echo docker build ;;
    podman | buildah)
      echo "$1" build --isolation "${IMAGE_ISOLATION:-chroot}" --network host --layers ;;
    *) log "unknown engine $1 (docker, podman or buildah)"; exit 2 ;;
  esac
}

size_of() {  # size_of ENGINE REF: the engine's own figure (uncompressed, as stored)
  "$1" images --format '{{.Size}}' "$2" 2>/dev/null | head -n 1
}

sizes() {
  local e=$1 ref=$2 arg build_base=debian:bookworm runtime_base=debian:bookworm-slim
  for arg in $(scripts/image-bases.sh "$e"); do
    case "$arg" in
      BUILD_BASE=*) build_base=${arg#*=} ;;
      RUNTIME_BASE=*) runtime_base=${arg#*=} ;;
    esac
  done
  printf '%-8s %-44s %10s   %s\n' stage image size "base (size)"
  printf '%-8s %-44s %10s   %s\n' build "$ref-build" "$(size_of "$e" "$ref-build")" \
    "$build_base ($(size_of "$e" "$build_base"))"
  printf '%-8s %-44s %10s   %s\n' runtime "$ref" "$(size_of "$e" "$ref")" \
    "$runtime_base ($(size_of "$e" "$runtime_base"))"
}

build() {
  local e=$1 ref=$2 rev start=$SECONDS
  local -a args=()
  [ "$e" != buildah ] || scripts/install-deps.sh --image
  # The bases first: a missing one is made (or pulled) and named for the Dockerfile's ARGs.
  while read -r arg; do args+=(--build-arg "$arg"); done < <(scripts/image-bases.sh "$e")
  rev=$(revision)
  args+=(--build-arg "NEURON_BUILD_REVISION=$rev")
  log "$e: $ref at revision $rev (bases ready after $((SECONDS - start)) s)"
  if [ -n "${IMAGE_BINARIES:-}" ]; then
    build_prebuilt "$e" "$ref" "$IMAGE_BINARIES" "${args[@]}"
    log "built $ref from $IMAGE_BINARIES in $((SECONDS - start)) s"
    return
  fi
  # build_cmd's words, unquoted: the command and its options.
  $(build_cmd "$e") -f deploy/Dockerfile "${args[@]}" -t "$ref" .
  # The build stage under its own name, for its size: every step is in the layer cache by now.
  $(build_cmd "$e") -q -f deploy/Dockerfile "${args[@]}" --target build -t "$ref-build" . >/dev/null
  log "built $ref in $((SECONDS - start)) s"
  sizes "$e" "$ref"
}

# The binaries the image ships, as the build stage installs them (deploy/Dockerfile).
image_binaries=(plugin/neuron-device-plugin monitor/neuron-exporter top/neuron-ls top/neuron-top
  plugin/kubeapi/neuron-dra-api)

# build_prebuilt ENGINE REF DIR BUILD-ARGS...: the `prebuilt` target around DIR's binaries.
build_prebuilt() {
  local e=$1 ref=$2 dir=$3 context b
  shift 3
  context=$(mktemp -d "${TMPDIR:-/tmp}/image-context.XXXXXX")
  # shellcheck disable=SC2064  # the path is fixed now
  trap "rm -rf '$context'" RETURN
  mkdir "$context/bin"
  for b in "${image_binaries[@]}"; do
    [ -x "$dir/$b" ] ||
      { log "$dir/$b is missing: build the target \`agent\` in $dir first"; exit 1; }
    install -m 0755 "$dir/$b" "$context/bin/"
  done
  $(build_cmd "$e") -f "$PWD/deploy/Dockerfile" "$@" --target prebuilt -t "$ref" "$context"
}

case "${1:-}" in
  build) build "$(engine)" "${2:-$(default_ref)}" ;;
  sizes) sizes "$(engine)" "${2:-$(default_ref)}" ;;
  engine) engine ;;
  revision) revision ;;
  *) sed -n '2,8s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
