# Sourced by scripts/demo.sh and scripts/demo-dra.sh: what both do around their story.
# The caller sets `demo` (its name in messages), `work` (its temporary directory) and adds what it
# starts to `pids`; cleanup() stops them, last started first, and removes `work`.
pids=()
cleanup() {
  # Reverse order: the pod first, the simulated driver last (it removes what it created).
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do wait "${pids[i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() { echo "$demo: $1" >&2; [ -f "${2:-}" ] && tail -n 20 "$2" >&2; exit 1; }
wait_for() {  # wait_for SECONDS COMMAND...: polls until COMMAND succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do ((SECONDS < deadline)) || return 1; sleep 0.2; done
}
