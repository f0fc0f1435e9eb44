#!/usr/bin/env bash
# make demo-cluster: the story of scripts/demo.sh on a simulated cluster of two trn1.32xlarge.
#   neuron-sim cluster up (two nodes, each its driver and kubelet emulator) -> one
#   neuron-device-plugin and one neuron-exporter per node, under that node's driver -> one real
#   Prometheus scraping every exporter with a `node` label (what the PodMonitor's relabelling
#   gives on EKS) and loading the alert rules -> the Llama-2-7B RayTrain job, one worker pod per
#   node admitted through each node's plugin, whose gradient collectives cross the nodes over EFA
#   -> utilization and EFA throughput per node and the job's pods per node, from PromQL -> neuron-top
#   on node-1.
# Without a terminal (or with DEMO_NONINTERACTIVE=1) it prints one screen of neuron-top captured
# through tmux instead of opening it, and ends. Either way it stops everything it started and
# removes its work directory; Ctrl-C does the same.
set -euo pipefail
build=${1:-build/dev}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
sim="$build/driver-sim/neuron-sim"
plugin="$build/plugin/neuron-device-plugin"
exporter="$build/monitor/neuron-exporter"
for b in "$sim" "$plugin" "$exporter" "$build/top/neuron-top"; do
  [ -x "$b" ] || { echo "demo-cluster: $b is missing; run make build" >&2; exit 1; }
done
for tool in prometheus curl python3; do
  command -v "$tool" >/dev/null || { echo "demo-cluster: $tool is not installed" >&2; exit 1; }
done
interactive=1
{ [ -t 0 ] && [ -t 1 ] && [ -z "${DEMO_NONINTERACTIVE:-}" ]; } || interactive=0

# Short names: the nodes' Unix sockets live under the cluster directory, and sockaddr_un takes
# 107 bytes.
work=$(mktemp -d "${TMPDIR:-/tmp}/ndc.XXXXXX")
cluster="$work/c" logs="$work/logs" prom_dir="$work/prometheus"
mkdir -p "$logs" "$prom_dir"
job=llama2-demo
pids=()          # what this script started itself, in order
cluster_pid=""   # the cluster supervisor (stopped by `cluster down`)
job_pid=""       # `neuron-sim job run` (stopped by `job delete`)
tmux_socket="$work/tmux.sock"

cleanup() {
  set +e
  # The job first (its pods hold the devices), then the agents and Prometheus, the cluster last
  # (its supervisor stops the drivers and kubelets it started and removes what they created).
  if [ -n "$job_pid" ]; then
    "$sim" job delete --cluster "$cluster" --name "$job" >>"$logs/job.log" 2>&1
    kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null
  fi
  [ -S "$tmux_socket" ] && tmux -S "$tmux_socket" kill-server 2>/dev/null
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do wait "${pids[i]}" 2>/dev/null; done
  if [ -n "$cluster_pid" ]; then
    "$sim" cluster down --dir "$cluster" >>"$logs/cluster.log" 2>&1
    wait "$cluster_pid" 2>/dev/null
  fi
  # Nothing of ours may outlive the demo: every child of this shell is gone.
  local left
  # (The command substitution is itself a child of this shell: it leaves itself out.)
  left=$(me=$BASHPID; ps -o pid=,args= --ppid $$ | awk -v me="$me" '$1 != me')
  if [ -z "$left" ]; then
    echo "demo-cluster: everything it started has stopped"
  else
    echo "demo-cluster: still running after cleanup:" >&2; echo "$left" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() { echo "demo-cluster: $1" >&2; [ -f "${2:-}" ] && tail -n 20 "$2" >&2; exit 1; }
wait_for() {  # wait_for SECONDS COMMAND...: polls until COMMAND succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do ((SECONDS < deadline)) || return 1; sleep 0.2; done
}
bound_port() { sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$1" | tail -n 1; }
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# One field of every node of cluster.json, one line per node.
nodes_field() {
  python3 -c 'import json, sys; [print(n[sys.argv[2]]) for n in json.load(open(sys.argv[1]))["nodes"]]' \
    "$cluster/cluster.json" "$1"
}

step "A simulated cluster: two trn1.32xlarge nodes, each its driver and kubelet emulator"
"$sim" cluster up --nodes 2 --instance trn1.32xlarge --dir "$cluster" >"$logs/cluster.log" 2>&1 &
cluster_pid=$!
cluster_started() { [ -e "$cluster/cluster.ready" ] || ! kill -0 "$cluster_pid" 2>/dev/null; }
wait_for 300 cluster_started
[ -e "$cluster/cluster.ready" ] || fail "the cluster did not start" "$logs/cluster.log"
mapfile -t names < <(nodes_field name)
mapfile -t roots < <(nodes_field root)
mapfile -t kubelets < <(nodes_field kubelet_dir)
mapfile -t addresses < <(nodes_field address)
for i in "${!names[@]}"; do
  printf '%-8s address %-10s root %s\n' "${names[i]}" "${addresses[i]}" "${roots[i]}"
done

step "On every node: neuron-device-plugin and neuron-exporter, under that node's driver"
ports=()
for i in "${!names[@]}"; do
  n=${names[i]}
  # As scripts/demo.sh: the agent reaches the devices through the node's driver (neuron-sim
  # exec); exec keeps the pid, so $! is the program's.
  "$sim" exec --root "${roots[i]}" -- "$plugin" --root "${roots[i]}" \
    --kubelet-dir "${kubelets[i]}" --listen 127.0.0.1:0 >"$logs/plugin.$n.log" 2>&1 &
  pids+=($!)
  "$sim" exec --root "${roots[i]}" -- "$exporter" --root "${roots[i]}" \
    --kubelet-dir "${kubelets[i]}" --web.listen-address 127.0.0.1:0 >"$logs/exporter.$n.log" 2>&1 &
  pids+=($!)
done
for i in "${!names[@]}"; do
  n=${names[i]}
  wait_for 60 sh -c "\"$sim\" kubelet status --kubelet-dir \"${kubelets[i]}\" | grep -q 'aws.amazon.com/neuron.*16'" ||
    fail "the plugin on $n did not register" "$logs/plugin.$n.log"
  wait_for 60 grep -q "listening on port" "$logs/exporter.$n.log" ||
    fail "no exporter on $n" "$logs/exporter.$n.log"
  ports+=("$(bound_port "$logs/exporter.$n.log")")
  echo "$n: exporter on 127.0.0.1:${ports[i]}"
  "$sim" kubelet status --kubelet-dir "${kubelets[i]}" | sed "s/^/  /"
done

step "Prometheus scraping every exporter, a node label per target, with the alert rules"
prom_port=$(free_port)
{
  printf 'global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 2s\n'
  printf 'rule_files:\n  - %s\n' "$source_dir/deploy/overlays/prometheus/neuron-alerts.rules.yml"
  printf 'scrape_configs:\n  - job_name: neuron-node-agent\n    honor_labels: true\n'
  printf '    static_configs:\n'
  for i in "${!names[@]}"; do
    printf "      - targets: ['127.0.0.1:%s']\n        labels: {node: '%s'}\n" "${ports[i]}" "${names[i]}"
  done
} >"$prom_dir/prometheus.yml"
prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$logs/prometheus.log" 2>&1 &
pids+=($!)
wait_for 60 curl -fsS "http://127.0.0.1:$prom_port/-/ready" || fail "Prometheus did not start" "$logs/prometheus.log"
sed 's/^/  /' "$prom_dir/prometheus.yml" | tail -n $((3 * ${#names[@]} + 1))

# query PROMQL: one "label=value ... value" line per series of an instant query.
query() {
  curl -fsS -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c '
import json, sys
answer = json.load(sys.stdin)
if answer.get("status") != "success": sys.exit("query failed: " + answer.get("error", "?"))
for s in answer["data"]["result"]:
    labels = " ".join(f"{k}={v}" for k, v in sorted(s["metric"].items()))
    print(labels, s["value"][1])'
}
# The dashboard's Cluster row (deploy/overlays/prometheus-operator/dashboards/neuron-node.json).
# Busy time is counted when an execution completes (docs/runtime.md#accounting), so a window of a
# few executions can show a little over 1; 20 s spans many.
util_q='avg by (node) (rate(neuroncore_busy_seconds_total[20s]))'
efa_q='sum by (node) (rate(neuron_efa_tx_bytes_total[20s]) + rate(neuron_efa_rx_bytes_total[20s]))'
pods_q='avg by (node, namespace, pod) (rate(neuroncore_busy_seconds_total[20s]) * on (instance, neuroncore) group_left (namespace, pod, container) neuroncore_allocation_info)'
count_above() {  # count_above PROMQL THRESHOLD: how many series exceed it
  query "$1" | awk -v t="$2" '$NF > t { n++ } END { print n + 0 }'
}

step "The Llama-2-7B RayTrain job: one worker pod per node (16 devices, 8 EFA), ranks across nodes"
# Shrunk so that it trains for about 40 s: 8 micro-steps of about 0.34 s simulated each (scale
# 0.5), then the optimizer phase whose gradient collectives cross EFA, 12 times.
"$sim" job run --cluster "$cluster" --recipe llama2-7b-raytrain --name "$job" \
  --steps 12 --micro-steps 8 --scale 0.5 >"$logs/job.log" 2>&1 &
job_pid=$!
pods_admitted() {  # every node runs one of the job's worker pods (or the job ended early)
  local i
  kill -0 "$job_pid" 2>/dev/null || return 0
  for i in "${!names[@]}"; do
    "$sim" pod list --kubelet-dir "${kubelets[i]}" | grep -q "$job-worker" || return 1
  done
}
if ! wait_for 120 pods_admitted || ! kill -0 "$job_pid" 2>/dev/null; then
  fail "the job's pods were not admitted on every node" "$logs/job.log"
fi
for i in "${!names[@]}"; do
  echo "${names[i]}:"; "$sim" pod list --kubelet-dir "${kubelets[i]}" | sed 's/^/  /'
done
cluster_busy() {  # Prometheus sees every node's cores busy and every node sending over EFA
  (($(count_above "$util_q" 0.9) >= ${#names[@]})) && (($(count_above "$efa_q" 0) >= ${#names[@]}))
}
wait_for 120 cluster_busy || echo "demo-cluster: not every node is busy yet; showing what there is"

step "Per node, from PromQL (the dashboard's Cluster row; Prometheus on 127.0.0.1:$prom_port)"
query "$util_q" >"$work/util.txt"
query "$efa_q" >"$work/efa.txt"
printf '%-8s %12s %16s\n' node utilization "EFA MB/s (tx+rx)"
for n in "${names[@]}"; do
  util=$(awk -v n="node=$n" '$1 == n { printf "%.2f", $NF }' "$work/util.txt")
  efa=$(awk -v n="node=$n" '$1 == n { printf "%.1f", $NF / 1e6 }' "$work/efa.txt")
  printf '%-8s %12s %16s\n' "$n" "${util:-absent}" "${efa:-absent}"
done

step "The job's pods per node: PodResources (neuroncore_allocation_info) joined with utilization"
printf '%-8s %-28s %6s %12s\n' node pod cores utilization
query 'count by (node, namespace, pod) (neuroncore_allocation_info)' >"$work/cores.txt"
query "$pods_q" | while read -r namespace node pod value; do
  cores=$(awk -v a="$namespace" -v b="$node" -v c="$pod" '$1 == a && $2 == b && $3 == c { print $NF }' "$work/cores.txt")
  printf '%-8s %-28s %6s %12.2f\n' "${node#node=}" "${namespace#namespace=}/${pod#pod=}" "${cores:-?}" "$value"
done

top_cmd=("$sim" exec --root "${roots[0]}" -- "$build/top/neuron-top" --root "${roots[0]}"
  --kubelet-dir "${kubelets[0]}")
if ((interactive)); then
  step "neuron-top on ${names[0]} (q quits and stops the demo)"
  "${top_cmd[@]}"
  exit 0
fi

step "neuron-top on ${names[0]} (one screen, captured through tmux)"
if command -v tmux >/dev/null; then
  tmux -S "$tmux_socket" new-session -d -s top -x 160 -y 48 \
    "$(printf '%q ' "${top_cmd[@]}") --delay 0.5 --log-file $(printf '%q' "$logs/top.log")"
  pane() { tmux -S "$tmux_socket" capture-pane -p -t top; }
  # A device row with a figure above zero: neuron-top has read the live datastores.
  top_busy() { pane | grep -Eq '^ND0 .*\[ *[1-9][0-9]*\.[0-9]{2}%\]'; }
  wait_for 30 top_busy || echo "demo-cluster: neuron-top shows no busy core yet"
  pane
  tmux -S "$tmux_socket" kill-server 2>/dev/null || true
else
  echo "(tmux is not installed: skipped)"
fi

step "The job, to its end"
job_ended() { ! kill -0 "$job_pid" 2>/dev/null; }
wait_for 180 job_ended || fail "the job did not end" "$logs/job.log"
job_code=0
wait "$job_pid" || job_code=$?
job_pid=""
tail -n 4 "$logs/job.log"
echo "neuron-sim job run exited $job_code"
((job_code == 0)) || exit 1
echo "demo-cluster: done; stopping everything it started"
