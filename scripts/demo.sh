#!/usr/bin/env bash
# make demo: start a simulated trn1.32xlarge and show it. Later stages add the kubelet emulator,
# the device plugin, the exporter, the Llama-2-7B pods and neuron-top.
# Ctrl-C (or the end of the script) stops everything it started.
set -euo pipefail
build=${1:-build/dev}
sim="$build/driver-sim/neuron-sim"
[ -x "$sim" ] || { echo "demo: $sim is missing; run make build" >&2; exit 1; }

root=$(mktemp -d /tmp/neuron-demo.XXXXXX)
sim_pid=""
cleanup() {
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null || true
  rm -rf "$root" "$root.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ctl() { "$sim" ctl --root "$root" "$@"; }

step "Starting a simulated trn1.32xlarge under $root"
"$sim" up --instance trn1.32xlarge --root "$root" --node-name demo-node 2>"$root.log" &
sim_pid=$!
for _ in $(seq 100); do [ -e "$root/run/neuron/sim.ready" ] && break; sleep 0.1; done
[ -e "$root/run/neuron/sim.ready" ] || {
  echo "demo: the simulator did not become ready:" >&2; cat "$root.log" >&2; exit 1; }

step "The node, as the simulated driver reports it"
ctl status

step "neuron-ls: the node as the agent's core library sees it"
"$build/top/neuron-ls" --root "$root"
"$build/top/neuron-ls" --root "$root" --topology

step "What the agent reads: the driver's sysfs tree (device 0)"
dev0="$root/sys/devices/virtual/neuron_device/neuron0"
for f in info/architecture/device_name core_count connected_devices reset \
         neuron_core0/stats/other_info/reset_req_count/total stats/power/utilization; do
  printf '  %-50s %s\n' "$f" "$(tr -d '\n' < "$dev0/$f")"
done
printf '  %-50s %s\n' "files under neuron0 (driver: 36 + 101 per core = 238)" \
  "$(find "$dev0" -type f ! -name uevent ! -name dev ! -path "$dev0/power/*" | wc -l)"
printf '  %-50s %s\n' "EFA interfaces" "$(ls "$root/sys/class/infiniband" | tr '\n' ' ')"

step "Faults: an uncorrectable HBM error on device 3, then a failed reset"
ctl inject hbm-ue --device 3
ctl reset --device 3 --fail
sleep 1
printf '  mem_ecc_uncorrected = %s, state = %s (2 = INVALID)\n' \
  "$(cat "$root/sys/devices/virtual/neuron_device/neuron3/stats/hardware/mem_ecc_uncorrected")" \
  "$(cat "$root/sys/devices/virtual/neuron_device/neuron3/reset")"
step "Kernel log records the driver wrote"
tail -n 4 "$root/dev/kmsg"

step "Recovery: a good reset returns device 3 to READY"
ctl reset --device 3
sleep 1
printf '  state = %s (1 = READY)\n' "$(cat "$root/sys/devices/virtual/neuron_device/neuron3/reset")"
echo
echo "demo: done; stopping the simulator (it removes everything it created)"
