#!/usr/bin/env bash
# The image test (slow tier; .ci/run runs it once, after `make test`): builds the image with
# `scripts/image.sh build` and tries it as the DaemonSet runs it.
#   tests/image/run.sh [BUILD_DIR]    BUILD_DIR: the dev build whose neuron-sim plays the host's
#                                     driver (default build/dev)
# Containers are run with `buildah run --isolation chroot`: no daemon, and no cgroups of their own
# (`podman run` fails where the kernel's cgroups are in hybrid mode). The build uses buildah too,
# so that the image is where buildah finds it; IMAGE_TEST_REF names it (neuron-node-agent:test).
# Checks, each printed as ok or FAIL, then "N passed, N failed":
#   - every binary's --version names the checkout's revision (not "unknown");
#   - the image's default user is not root (65532), in its config and in a process;
#   - neuron-ls and the exporter inside the container read a simulated trn1.32xlarge mounted as
#     deploy/base/daemonset.yaml mounts the host's: its sys/ and dev/ at /host/sys and /host/dev
#     (neuron-sim up runs outside, as the host's driver), this machine's /proc at /host/proc; the
#     exporter's /metrics is read once from outside (chroot isolation shares the host's network);
#   - the runtime stage has no compiler and no package its binaries do not load
#     (tests/image/packages.py);
# and prints the size of each stage (scripts/image.sh sizes) and how long the build took.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/dev}
sim="$build/driver-sim/neuron-sim"
ref=${IMAGE_TEST_REF:-neuron-node-agent:test}
export IMAGE_ENGINE=buildah
[ -x "$sim" ] ||
  { echo "image test: $sim is missing: build neuron-sim in $build first" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/image-test.XXXXXX")
# The simulated node on tmpfs where there is one (driver-sim/README.md: creating the tree on a
# loaded disk takes seconds).
root=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/image-node.XXXXXX")
pids=() ctrs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for c in "${ctrs[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work" "$root"
}
trap cleanup EXIT

passed=0 failed=0
check() {  # check NAME COMMAND...: a line per check, then what COMMAND printed
  local name=$1; shift
  if "$@" >"$work/check.out" 2>&1; then
    echo "ok   $name"; passed=$((passed + 1))
  else
    echo "FAIL $name"; failed=$((failed + 1))
  fi
  tail -n 20 "$work/check.out" | sed 's/^/     /'
}
wait_for() {  # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do ((SECONDS < deadline)) || return 1; sleep 0.2; done
}
container() {  # container IMAGE: a new working container of IMAGE, named in $made, removed at exit
  made=$(buildah from --pull-never "$1")
  ctrs+=("$made")
}
# in_ctr [RUN OPTIONS] CONTAINER -- COMMAND...: COMMAND's output and status. buildah 1.28 relays
# a container's output through a pipe that sometimes loses all of it when the command exits at
# once (seen here: an empty --version about once in 50 runs, status 0), so the command writes
# to files in a directory shared with the host instead.
shared="$work/shared"
mkdir -m 1777 "$shared"
in_ctr() {
  local -a opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  local rc=0
  rm -f "$shared/stdout" "$shared/stderr"
  buildah run --isolation chroot -v "$shared:/out" "${opts[@]}" -- \
    sh -c 'exec "$@" >/out/stdout 2>/out/stderr' sh "$@" || rc=$?
  cat "$shared/stdout"
  cat "$shared/stderr" >&2
  return "$rc"
}

echo "== image test: building $ref (scripts/image.sh build)"
start=$SECONDS
if ! scripts/image.sh build "$ref" >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log"
  echo "0 passed, 1 failed"
  exit 1
fi
build_seconds=$((SECONDS - start))
grep -E '^image(-bases)?: ' "$work/build.log" || true
container "$ref"
ctr=$made
revision=$(scripts/image.sh revision)

version_is() {  # version_is BINARY: its first --version line names this checkout's revision
  local line
  line=$(in_ctr "$ctr" -- "/usr/local/bin/$1" --version | head -n 1)
  echo "$line"
  [[ "$line" == "$1, version "*" (revision: $revision)" ]] && [ "$revision" != unknown ]
}
for b in neuron-device-plugin neuron-exporter neuron-ls neuron-top neuron-dra-api; do
  check "$b --version says revision $revision" version_is "$b"
done

not_root() {
  local user uid
  user=$(buildah inspect --type image --format '{{.OCIv1.Config.User}}' "$ref")
  uid=$(in_ctr "$ctr" -- id -u)
  echo "image user: $user; id -u in the container: $uid"
  [ "$user" = 65532:65532 ] && [ "$uid" = 65532 ]
}
check "runs as a non-root user by default" not_root

# The host's driver: a simulated trn1.32xlarge (16 devices, sysfs and /dev), outside the container.
"$sim" up --instance trn1.32xlarge --root "$root" >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for 60 test -e "$root/run/neuron/sim.ready" || { tail "$work/sim.log"; exit 1; }
# As deploy/base/daemonset.yaml runs the agent: its host-sys, host-dev and host-proc volumes,
# read-only, and uid 0 (the driver makes some sysfs files readable by root only).
mounts=(--user 0:0 -v "$root/sys:/host/sys:ro" -v "$root/dev:/host/dev:ro" -v /proc:/host/proc:ro)

ls_reads_node() {
  local out
  out=$(in_ctr "${mounts[@]}" "$ctr" -- /usr/local/bin/neuron-ls --root /host --json-output)
  python3 -c '
import json, sys
devices = json.load(sys.stdin)
cores = sum(d["nc_count"] for d in devices)
links = devices[0]["connected_to"]
print(f"{len(devices)} devices, {cores} NeuronCores, links of device 0: {links}")
print("live data:", devices[0].get("live_data_unavailable", "available"))
sys.exit(0 if len(devices) == 16 and cores == 32 else 1)' <<<"$out"
}
check "neuron-ls in the container lists the 16 simulated devices" ls_reads_node

exporter_serves() {
  # buildah itself in the background, not a function (a subshell): killing it stops the exporter.
  local log="$shared/exporter.log" port
  buildah run --isolation chroot -v "$shared:/out" "${mounts[@]}" "$ctr" -- sh -c \
    'exec "$@" >/out/exporter.log 2>&1' sh /usr/local/bin/neuron-exporter --root /host \
    --no-pod-resources --web.listen-address 127.0.0.1:0 &
  pids+=($!)
  wait_for 30 grep -q "listening on port" "$log" || { cat "$log"; return 1; }
  port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$log" | head -n 1)
  curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics"
  grep -E '^neuron_exporter_(build_info|source_up)' "$work/metrics"
  echo "neuron_device_info series: $(grep -c '^neuron_device_info{' "$work/metrics")"
  grep -q "^neuron_exporter_build_info{.*revision=\"$revision\".*} 1" "$work/metrics" &&
    grep -q '^neuron_exporter_source_up{source="sysfs"} 1' "$work/metrics" &&
    [ "$(grep -c '^neuron_device_info{' "$work/metrics")" -eq 16 ]
}
check "the exporter in the container serves the node's metrics and build_info" exporter_serves

lean_runtime() {
  local base
  base=$(scripts/image-bases.sh buildah 2>/dev/null | sed -n 's/^RUNTIME_BASE=//p')
  container "${base:-debian:bookworm-slim}"
  # shellcheck disable=SC2016  # dpkg-query's format, not the shell's
  in_ctr "$made" -- dpkg-query -W -f '${Package}\n' >"$work/base-packages"
  in_ctr --user 0:0 -v "$PWD/tests/image:/test:ro" "$ctr" -- sh /test/in-image.sh >"$work/image.txt"
  python3 tests/image/packages.py "$work/image.txt" "$work/base-packages"
}
check "the runtime stage has no compiler and only packages its binaries load" lean_runtime

echo "== image build: $build_seconds s (scripts/image.sh build, reusing the layers that earlier" \
  "builds on this machine left)"
scripts/image.sh sizes "$ref" 2>/dev/null
echo "image: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
