#!/usr/bin/env bash
# make demo-dra: the Llama-2-7B story of `make demo`, with Dynamic Resource Allocation
# (docs/OPERATIONS.md#dra) on one simulated trn1.32xlarge:
#   the simulated driver (neuron-sim up) -> the API stand-in (neuron-sim apiserver, with the DRA
#   overlay's DeviceClasses) -> the kubelet emulator -> neuron-device-plugin --api=dra and
#   neuron-dra-api: the node's ResourceSlice -> a claim for 4 connected devices and the 2 EFAs
#   beside them, allocated by the scheduler's algorithm (neuron-sim schedule) -> the worker pod:
#   prepared (its CDI spec), its process seeing its devices -> attributed in /metrics -> an
#   inference pod's claim for 2 NeuronCores in one run, never on the training claim's devices
#   (--dra.partitionable: shared counters) -> a fault taints that pod's device and cores in the
#   slice and turns them Unhealthy in its status, a reset clears both -> the pods end, the claims
#   are unprepared.
# Without a terminal (or with DEMO_NONINTERACTIVE=1) it prints each step and ends; with one it
# opens neuron-top while the pod trains. Ctrl-C stops everything it started.
set -euo pipefail
build=${1:-build/dev}
sim="$build/driver-sim/neuron-sim"
plugin="$build/plugin/neuron-device-plugin"
dra_api="$build/plugin/kubeapi/neuron-dra-api"
exporter="$build/monitor/neuron-exporter"
for b in "$sim" "$plugin" "$dra_api" "$exporter" "$build/top/neuron-top"; do
  [ -x "$b" ] || { echo "demo-dra: $b is missing; run make build" >&2; exit 1; }
done
interactive=1
{ [ -t 0 ] && [ -t 1 ] && [ -z "${DEMO_NONINTERACTIVE:-}" ]; } || interactive=0

work=$(mktemp -d "${TMPDIR:-/tmp}/neuron-demo-dra.XXXXXX")
root="$work/root" kubelet_dir="$work/kubelet" logs="$work/logs" cdi="$work/cdi"
sockets="$work/sockets" api_dir="$work/api"
mkdir -p "$root" "$kubelet_dir" "$logs" "$cdi" "$sockets" "$api_dir"
demo=demo-dra
source "$(dirname "$0")/demo-lib.sh"
on_node=("$sim" exec --root "$root" --)
node=node-a
# The API stand-in's address and CA, once it listens; every request carries the token.
api() {  # api METHOD PATH [JSON]: the API server's answer on stdout; fails on an HTTP error
  curl -fsS --cacert "$ca" -H "Authorization: Bearer demo-token" -X "$1" \
    -H 'Content-Type: application/json' ${3:+--data "$3"} "$url$2"
}
json() { python3 -c "import json, sys; d = json.load(sys.stdin); $1"; }
slices=/apis/resource.k8s.io/v1/resourceslices
# claim NS NAME DEVICES-JSON: creates the ResourceClaim, has the scheduler's algorithm allocate it
# on the node (printing the result), and sets claim_uid.
claim() {
  api POST "/apis/resource.k8s.io/v1/namespaces/$1/resourceclaims" \
    "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\",
      \"metadata\": {\"name\": \"$2\", \"namespace\": \"$1\"}, \"spec\": {\"devices\": $3}}" >/dev/null
  "$sim" schedule --api-server "$url" --token-file "$work/token" --ca-file "$ca" --node "$node" \
    "$1/$2" || fail "the claim $1/$2 was not allocated"
  claim_uid=$(api GET "/apis/resource.k8s.io/v1/namespaces/$1/resourceclaims/$2" | json 'print(d["metadata"]["uid"])')
}

step "A simulated trn1.32xlarge (the driver) and the API stand-in with the overlay's DeviceClasses"
"$sim" up --instance trn1.32xlarge --root "$root" --node-name "$node" 2>"$logs/sim.log" &
pids+=($!)
echo demo-token >"$work/token"
# neuron-dra-api's own token, bound to the node as the kubelet projects it: its writes of the
# Node's status pass the admission policy the overlays ship only for this node.
echo dra-api-token >"$work/dra-api-token"
python3 -c 'import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))' \
  "$(dirname "$0")/../deploy/overlays/dra/deviceclasses.yaml" >"$work/classes.json"
"$sim" apiserver --dir "$api_dir" --token-file "$work/token" --node "$node" \
  --service-account-token "neuron-system/neuron-dra-api@$node=$work/dra-api-token" \
  --admission "$(dirname "$0")/../deploy/components/node-condition/admission.yaml" \
  --load "$work/classes.json" >"$logs/apiserver.log" 2>&1 &
pids+=($!)
wait_for 30 test -e "$root/run/neuron/sim.ready" || fail "the simulator did not start" "$logs/sim.log"
wait_for 30 test -s "$api_dir/apiserver.json" || fail "no API stand-in" "$logs/apiserver.log"
url=$(json 'print(d["url"])' <"$api_dir/apiserver.json")
ca=$(json 'print(d["caFile"])' <"$api_dir/apiserver.json")
echo "API server $url; DeviceClasses: $(api GET /apis/resource.k8s.io/v1/deviceclasses |
  json 'print(" ".join(i["metadata"]["name"] for i in d["items"]))')"

step "The kubelet emulator, neuron-device-plugin --api=dra and neuron-dra-api"
"$sim" kubelet --root "$root" --kubelet-dir "$kubelet_dir" --cdi-dir "$cdi" >"$logs/kubelet.log" 2>&1 &
pids+=($!)
wait_for 30 test -S "$kubelet_dir/pod-resources/kubelet.sock" || fail "no kubelet emulator" "$logs/kubelet.log"
"${on_node[@]}" "$plugin" --root "$root" --kubelet-dir "$kubelet_dir" --api dra --node-name "$node" \
  --cdi-dir "$cdi" --listen "unix:$sockets/plugin.sock" --dra.claims "unix:$sockets/dra-api.sock" \
  --dra.partitionable=true \
  >"$logs/plugin.log" 2>&1 &
pids+=($!)
"$dra_api" --api-server "$url" --token-file "$work/dra-api-token" --ca-file "$ca" --node-name "$node" \
  --plugin "unix:$sockets/plugin.sock" --listen "unix:$sockets/dra-api.sock" --poll 500 \
  >"$logs/dra-api.log" 2>&1 &
pids+=($!)
# Both pools: neuron.aws.com's is written first, the EFAs' (efa.neuron.aws.com) right after it.
wait_for 60 sh -c "s=\$(curl -fsS --cacert '$ca' -H 'Authorization: Bearer demo-token' '$url$slices') &&
  echo \"\$s\" | grep -q neuron-15 && echo \"\$s\" | grep -q efa-rdmap" ||
  { tail -n 5 "$logs/plugin.log" >&2; fail "no ResourceSlice was published" "$logs/dra-api.log"; }
grep -h "registered\|DRA" "$logs/kubelet.log" | tail -n 2 || true

step "The node's ResourceSlices (a pool per driver: Neuron devices and cores; EFAs), as the scheduler sees them"
api GET "$slices" | json '
for s in sorted(d["items"], key=lambda s: s["metadata"]["name"]):
    spec = s["spec"]
    what = ("%d devices" % len(spec["devices"]) if "devices" in spec else
            "counter set %s: %d counters" % (spec["sharedCounters"][0]["name"],
                                             len(spec["sharedCounters"][0]["counters"])))
    print("%s: driver %s, pool %s generation %d (%d slices), %s" % (s["metadata"]["name"],
          spec["driver"], spec["pool"]["name"], spec["pool"]["generation"],
          spec["pool"]["resourceSliceCount"], what))
devices = [x for s in d["items"] for x in s["spec"].get("devices", [])]
for prefix in ("neuron-", "neuroncore-", "efa-"):
    dev = next(x for x in devices if x["name"].startswith(prefix))
    print(" ", dev["name"], json.dumps(dev["attributes"], sort_keys=True),
          "consumes", json.dumps(dev.get("consumesCounters", [])))'

step "A claim for 4 connected devices and the 2 EFA interfaces beside them"
claim=llama-4-connected
claim training "$claim" '{
  "requests": [
    {"name": "neurons", "exactly": {"deviceClassName": "neuron.aws.com", "allocationMode": "ExactCount", "count": 4}},
    {"name": "efas", "exactly": {"deviceClassName": "efa.neuron.aws.com", "allocationMode": "ExactCount", "count": 2}}],
  "constraints": [{"requests": ["neurons", "efas"], "matchAttribute": "resource.aws.com/devicegroup4_id"}]}'
uid=$claim_uid

step "The worker pod with the claim: prepared by the plugin, its CDI spec applied by the runtime"
# The command prints what the container sees, then trains (the claim's 8 cores: TP=8).
# The claim holds devices of two drivers: each prepares its own (the EFAs are efa.neuron.aws.com's).
"$sim" pod run --kubelet-dir "$kubelet_dir" --namespace training --name llama2-7b-worker-0 \
  --claim "training/$claim:$uid" --claim-driver neuron.aws.com --claim-driver efa.neuron.aws.com -- sh -c \
  'echo "in the pod: NEURON_RT_VISIBLE_CORES=$NEURON_RT_VISIBLE_CORES devices=$NEURON_SIM_DEVICE_MAP"
   exec "$0" run --workload llama2-7b --nodes 2' "$sim" >"$logs/pod.out" 2>"$logs/pod.log" &
pod=$!
pids+=($pod)
wait_for 60 grep -q "in the pod" "$logs/pod.out" || fail "the pod did not start" "$logs/pod.log"
grep "in the pod" "$logs/pod.out"
spec=$(ls "$cdi"/aws.amazon.com-neuron_*.json | head -n 1)
echo "CDI spec $(basename "$spec"):"
json 'print(json.dumps({"kind": d["kind"], "devices": [{"name": x["name"], "containerEdits": x["containerEdits"]} for x in d["devices"]][:2]}, indent=1))' <"$spec"
"$sim" pod list --kubelet-dir "$kubelet_dir"

step "The pod in the exporter's /metrics, attributed through PodResources' DynamicResource"
"${on_node[@]}" "$exporter" --root "$root" --kubelet-dir "$kubelet_dir" --web.listen-address 127.0.0.1:0 \
  >"$logs/exporter.log" 2>&1 &
pids+=($!)
wait_for 30 grep -q "listening on port" "$logs/exporter.log" || fail "no exporter" "$logs/exporter.log"
metrics_port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$logs/exporter.log" | tail -n 1)
scrape() { curl -fsS "http://127.0.0.1:$metrics_port/metrics"; }
wait_for 30 sh -c "curl -fsS http://127.0.0.1:$metrics_port/metrics | grep -q 'neuron_dra_device_allocation_info{.*pod=\"llama2-7b-worker-0\"'" ||
  fail "the pod is not attributed" "$logs/exporter.log"
scrape | grep -E '^neuron_dra_device_allocation_info\{' | head -n 6

step "An inference pod asks for 2 NeuronCores in one run: never on the training claim's devices"
cores_claim=inference-2-cores
claim serving "$cores_claim" '{
  "requests": [{"name": "cores", "exactly": {"deviceClassName": "neuroncore.neuron.aws.com", "allocationMode": "ExactCount", "count": 2}}],
  "constraints": [{"requests": ["cores"], "matchAttribute": "neuron.aws.com/coregroup2_id"}]}'
cores_uid=$claim_uid
"$sim" pod run --kubelet-dir "$kubelet_dir" --namespace serving --name llama2-7b-serve-0 \
  --claim "serving/$cores_claim:$cores_uid" -- sh -c \
  'echo "in the inference pod: NEURON_RT_VISIBLE_CORES=$NEURON_RT_VISIBLE_CORES devices=$NEURON_SIM_DEVICE_MAP"; exec sleep 600' \
  >"$logs/serve.out" 2>"$logs/serve.log" &
serve=$!
pids+=($serve)
wait_for 60 grep -q "in the inference pod" "$logs/serve.out" || fail "the inference pod did not start" "$logs/serve.log"
grep "in the inference pod" "$logs/serve.out"

step "A pod that asks aws.amazon.com/neuron: 4, as of the device plugin: the scheduler makes its claim (KEP-5004)"
# The overlay's class neuron.aws.com names aws.amazon.com/neuron as its extendedResourceName, and
# no device plugin serves it here: the scheduler's algorithm makes the pod's claim of 4 devices.
"$sim" schedule --api-server "$url" --token-file "$work/token" --ca-file "$ca" --node "$node" \
  --pod serving/by-count-0 --request aws.amazon.com/neuron=4 >"$logs/by-count.schedule" ||
  fail "the pod asking by count was not scheduled" "$logs/by-count.schedule"
cat "$logs/by-count.schedule"
by_count=$(head -n 1 "$logs/by-count.schedule" | cut -d' ' -f1)
"$sim" pod run --kubelet-dir "$kubelet_dir" --namespace serving --name by-count-0 \
  --request aws.amazon.com/neuron=4 --extended-resource-claim "$by_count" -- sh -c \
  'echo "in the pod asking by count: NEURON_RT_VISIBLE_CORES=$NEURON_RT_VISIBLE_CORES devices=$NEURON_SIM_DEVICE_MAP"' \
  >"$logs/by-count.out" 2>"$logs/by-count.log" || fail "the pod asking by count failed" "$logs/by-count.log"
grep "in the pod asking by count" "$logs/by-count.out"

if ((interactive)); then
  step "neuron-top (q quits and stops the demo)"
  sleep 1
  "${on_node[@]}" "$build/top/neuron-top" --root "$root" --kubelet-dir "$kubelet_dir"
  exit 0
fi

step "A fault on the inference pod's device: it and its cores are tainted, the pod's status says Unhealthy, the Node's NeuronHealth condition names it; a reset clears all three"
# The training claim's devices are not touched: their pod keeps training.
core=$(api GET "/apis/resource.k8s.io/v1/namespaces/serving/resourceclaims/$cores_claim" |
  json 'print(d["status"]["allocation"]["devices"]["results"][0]["device"])')
index=$(api GET "$slices" | json "print([x['attributes']['deviceId']['int'] for s in d['items'] for x in s['spec'].get('devices', []) if x['name'] == '$core'][0])")
first=neuron-$index
taints() {  # taints DEVICE
  api GET "$slices" | json "print([x.get('taints', []) for s in d['items'] for x in s['spec'].get('devices', []) if x['name'] == '$1'][0])"
}
serve_status() { "$sim" pod status --kubelet-dir "$kubelet_dir" --namespace serving --name llama2-7b-serve-0; }
# The core's health in the pod's status, as the kubelet writes it from the plugin's health stream.
health() {
  serve_status | json "
for c in d['status']['containerStatuses']:
    for r in c.get('allocatedResourcesStatus', []):
        for h in r['resources']:
            if h['resourceID'].endswith('-$core'):
                print(c['name'], r['name'], h['resourceID'].split('=')[0] + '=...-$core', h['health'], h.get('message', ''))"
}
"$sim" ctl --root "$root" inject hbm-ue --device "$index" >/dev/null
wait_for 30 sh -c "curl -fsS --cacert '$ca' -H 'Authorization: Bearer demo-token' '$url$slices' | grep -q 'neuron.aws.com/unhealthy'" ||
  fail "no taint after the fault" "$logs/plugin.log"
echo "$first taints after the fault: $(taints "$first")"
echo "$core taints after the fault: $(taints "$core")"
wait_for 30 sh -c "'$sim' pod status --kubelet-dir '$kubelet_dir' --namespace serving --name llama2-7b-serve-0 | grep -q Unhealthy" ||
  fail "the pod's status does not show the fault" "$logs/kubelet.log"
echo "pod status after the fault: $(health)"
# The Node's condition, as AWS's node-problem-detector would set it (neuron-dra-api writes it).
condition() {
  api GET "/api/v1/nodes/$node" | json "
c = [x for x in d.get('status', {}).get('conditions', []) if x['type'] == 'NeuronHealth']
print('%s %s: %s' % (c[0]['status'], c[0]['reason'], c[0].get('message', '')) if c else 'none')"
}
wait_for 30 sh -c "curl -fsS --cacert '$ca' -H 'Authorization: Bearer demo-token' '$url/api/v1/nodes/$node' | grep -q NeuronHasError_" ||
  fail "no NeuronHealth condition after the fault" "$logs/dra-api.log"
echo "Node $node NeuronHealth after the fault: $(condition)"
"$sim" ctl --root "$root" reset --device "$index" >/dev/null
wait_for 60 sh -c "! curl -fsS --cacert '$ca' -H 'Authorization: Bearer demo-token' '$url$slices' | grep -q 'neuron.aws.com/unhealthy'" ||
  fail "the taint stayed after the reset" "$logs/plugin.log"
echo "$first taints after the reset: $(taints "$first")"
wait_for 30 sh -c "'$sim' pod status --kubelet-dir '$kubelet_dir' --namespace serving --name llama2-7b-serve-0 | grep -q Healthy" ||
  fail "the pod's status did not clear" "$logs/kubelet.log"
echo "pod status after the reset: $(health)"
wait_for 30 sh -c "curl -fsS --cacert '$ca' -H 'Authorization: Bearer demo-token' '$url/api/v1/nodes/$node' | grep -q NeuronHasNoError" ||
  fail "the NeuronHealth condition stayed after the reset" "$logs/dra-api.log"
echo "Node $node NeuronHealth after the reset: $(condition)"

step "The pods end: the claims are unprepared and their CDI specs removed"
kill "$pod" "$serve" 2>/dev/null || true
wait "$pod" "$serve" 2>/dev/null || true
wait_for 30 sh -c "! ls '$cdi'/*.json" || fail "the CDI spec stayed" "$logs/kubelet.log"
echo "CDI specs left: $(ls "$cdi" | wc -l)"
echo "demo-dra: done; stopping everything it started"
