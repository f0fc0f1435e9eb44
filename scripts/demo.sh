#!/usr/bin/env bash
# make demo: the story of docs/architecture.md#two-commands on one simulated node, a trn1.32xlarge
# unless INSTANCE names another type of the catalog (`make demo INSTANCE=trn2.48xlarge`: LNC=2).
#   the simulated driver (neuron-sim up) -> the kubelet emulator (neuron-sim kubelet) ->
#   neuron-device-plugin -> neuron-exporter -> the Llama-2-7B worker pod admitted through the
#   plugin (every device and EFA of the node; its data-parallel peer on the second node is
#   modelled by the cost of the all-reduce over EFA) -> neuron-top.
# Without a terminal (or with DEMO_NONINTERACTIVE=1) it prints neuron-ls, the allocation per pod
# and a metrics excerpt instead of opening neuron-top, and ends. Ctrl-C stops everything it started.
set -euo pipefail
build=${1:-build/dev}
instance=${2:-trn1.32xlarge}
sim="$build/driver-sim/neuron-sim"
plugin="$build/plugin/neuron-device-plugin"
exporter="$build/monitor/neuron-exporter"
for b in "$sim" "$plugin" "$exporter" "$build/top/neuron-ls" "$build/top/neuron-top"; do
  [ -x "$b" ] || { echo "demo: $b is missing; run make build" >&2; exit 1; }
done
interactive=1
{ [ -t 0 ] && [ -t 1 ] && [ -z "${DEMO_NONINTERACTIVE:-}" ]; } || interactive=0

work=$(mktemp -d "${TMPDIR:-/tmp}/neuron-demo.XXXXXX")
root="$work/root" kubelet_dir="$work/kubelet" logs="$work/logs"
mkdir -p "$root" "$kubelet_dir" "$logs"
demo=demo
source "$(dirname "$0")/demo-lib.sh"
# The agent reaches the devices through the driver's device node, as on a real node: here the
# simulated driver's (neuron-sim exec), so every live number below comes through its ioctls.
# An array, not a function: a background function is a subshell, and $! would be its pid rather
# than the program's (exec replaces neuron-sim with the program, keeping the pid).
on_node=("$sim" exec --root "$root" --)
bound_port() { sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$1" | tail -n 1; }
scrape() { curl -fsS "http://127.0.0.1:$metrics_port/metrics"; }

step "A simulated $instance (the driver: sysfs, /dev/neuronN and its ioctls) under $root"
"$sim" up --instance "$instance" --root "$root" --node-name demo-node 2>"$logs/sim.log" &
pids+=($!)
wait_for 30 test -e "$root/run/neuron/sim.ready" || fail "the simulator did not start" "$logs/sim.log"
"${on_node[@]}" "$build/top/neuron-ls" --root "$root"
# The worker pod asks for the whole node, as the blueprint's does on a trn1.32xlarge.
devices=$(find "$root/sys/class/neuron_device" -maxdepth 1 -name 'neuron[0-9]*' | wc -l)
efas=$(find "$root/sys/class/infiniband" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
requests=(--request aws.amazon.com/neuron="$devices")
((efas == 0)) || requests+=(--request vpc.amazonaws.com/efa="$efas")

step "The kubelet emulator, the device plugin and the exporter"
"$sim" kubelet --root "$root" --kubelet-dir "$kubelet_dir" >"$logs/kubelet.log" 2>&1 &
pids+=($!)
wait_for 30 test -S "$kubelet_dir/device-plugins/kubelet.sock" ||
  fail "the kubelet emulator did not start" "$logs/kubelet.log"
"${on_node[@]}" "$plugin" --root "$root" --kubelet-dir "$kubelet_dir" --listen 127.0.0.1:0 \
  >"$logs/plugin.log" 2>&1 &
pids+=($!)
"${on_node[@]}" "$exporter" --root "$root" --kubelet-dir "$kubelet_dir" --web.listen-address 127.0.0.1:0 \
  >"$logs/exporter.log" 2>&1 &
pids+=($!)
wait_for 30 sh -c "\"$sim\" kubelet status --kubelet-dir \"$kubelet_dir\" | grep -q 'aws.amazon.com/neuron capacity=$devices '" ||
  fail "the plugin did not register" "$logs/plugin.log"
wait_for 30 grep -q "listening on port" "$logs/exporter.log" || fail "no exporter" "$logs/exporter.log"
metrics_port=$(bound_port "$logs/exporter.log")
"$sim" kubelet status --kubelet-dir "$kubelet_dir"

step "The Llama-2-7B worker pod (TP=8, $devices devices, $efas EFA), admitted through the plugin"
"$sim" pod run --kubelet-dir "$kubelet_dir" --namespace training --name llama2-7b-worker-0 \
  "${requests[@]}" \
  -- "$sim" run --workload llama2-7b --nodes 2 >"$logs/pod.out" 2>"$logs/pod.log" &
pids+=($!)
# With a command, pod run prints the allocation on stderr (stdout is the command's).
wait_for 60 grep -q NEURON_RT_VISIBLE_CORES "$logs/pod.log" || fail "the pod was not admitted" "$logs/pod.log"
grep -v '^$' "$logs/pod.log" | head -n 8

if ((interactive)); then
  step "neuron-top (q quits and stops the demo)"
  sleep 1
  "${on_node[@]}" "$build/top/neuron-top" --root "$root" --kubelet-dir "$kubelet_dir"
  exit 0
fi

busy() {  # the mean utilization the exporter reports for the pod's cores
  scrape | awk '/^neuroncore_utilization_ratio\{/ { s += $NF; n++ } END { printf "%.2f", n ? s / n : 0 }'
}
memory_seen() {  # memory by category comes with the exporter's slower full sweep (10 s)
  scrape | grep -E '^neuron_device_memory_used_bytes\{neuron_device="0",category="model_code"\} [1-9]' >/dev/null
}
for _ in $(seq 60); do awk "BEGIN { exit !($(busy) > 0.9) }" && memory_seen && break; sleep 1; done

step "neuron-ls, with the training processes"
"${on_node[@]}" "$build/top/neuron-ls" --root "$root" --show-all-procs
step "Allocation per pod (the kubelet's PodResources view)"
"$sim" pod list --kubelet-dir "$kubelet_dir"
step "Metrics excerpt (neuron-exporter on 127.0.0.1:$metrics_port)"
scrape >"$work/metrics.txt"
# grep -m, not head: with pipefail, head closing the pipe early would end the script.
for pattern in '^neuroncore_utilization_ratio\{' '^neuroncore_allocation_info\{' \
               '^neuron_device_memory_used_bytes\{neuron_device="0"' '^neuron_efa_tx_bytes_total\{'; do
  grep -m 3 -E "$pattern" "$work/metrics.txt" || true
done
printf '\nmean utilization of the pod'"'"'s cores: %s\n' "$(busy)"
echo "demo: done; stopping everything it started"
