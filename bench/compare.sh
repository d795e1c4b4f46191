#!/usr/bin/env bash
# Runs the same loadgen rows against a Debian etcd and a raftstore of the
# same size (one member, or three with MEMBERS=3), and prints a markdown
# table (ops/s and p99 of each, and the ratio raftstore/etcd of ops/s).
# With three members the loadgen spreads its connections over all three
# client endpoints in the same order for both servers.
#
# Environment:
#   RAFTSTORE_BIN  raftstore binary      [/var/tmp/kubers-target/debug/raftstore]
#   ETCD_BIN       etcd binary           [etcd]
#   ETCDCTL_BIN    etcdctl binary        [etcdctl]
#   LOADGEN        loadgen binary        [built with cargo from this checkout]
#   DURATION       seconds per run       [10]
#   ROUNDS         runs per row and server, alternated; cells are medians,
#                  plus the median and range of the per-round ratios [1]
#   ONLY           run only the rows whose name matches this extended regex
#   MEMBERS        cluster size, 1 or 3  [1]
#   LOADGEN_EXTRA  extra loadgen flags for every row, e.g. "--val-size 1024"
#   RAFTSTORE_ARGS extra raftstore flags
#   RESULTS        also append every JSON result line to this file
#   KEEP_DATA=1    keep the temporary data dirs and server logs
#
# Progress goes to stderr, the table to stdout. Both servers are killed on
# exit. When RAFTSTORE_BIN does not exist, only the etcd columns are filled.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RAFTSTORE_BIN="${RAFTSTORE_BIN:-/var/tmp/kubers-target/debug/raftstore}"
ETCD_BIN="${ETCD_BIN:-etcd}"
ETCDCTL_BIN="${ETCDCTL_BIN:-etcdctl}"
DURATION="${DURATION:-10}"
LOADGEN_EXTRA="${LOADGEN_EXTRA:-}"
RAFTSTORE_ARGS="${RAFTSTORE_ARGS:-}"
RESULTS="${RESULTS:-}"
MEMBERS="${MEMBERS:-1}"
ROUNDS="${ROUNDS:-1}"
ONLY="${ONLY:-}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: ROUNDS must be a positive integer" >&2; exit 2; }
[[ "$MEMBERS" == 1 || "$MEMBERS" == 3 ]] || { echo "compare.sh: MEMBERS must be 1 or 3" >&2; exit 2; }

# Every row runs with the same parameters against both servers.
ROWS=(
  "put 1 client|put --clients 1"
  "put 64 clients|put --clients 64"
)
# Three members add the heavier write row the HA comparison asks for.
[[ "$MEMBERS" == 1 ]] || ROWS+=(
  "put 256 clients|put --clients 256"
  # One client on the leader, then on a follower (whose writes are
  # forwarded): the row above sends it to the first endpoint, which may be
  # either, so its figure depends on where each cluster elected its leader.
  "put 1 client, leader|put --clients 1|leader"
  "put 1 client, follower|put --clients 1|follower"
)
ROWS+=(
  "range linearizable|range --clients 64 --consistency l"
  "range serializable|range --clients 64 --consistency s"
  "txn-cas|txn-cas --clients 16"
  "watch fan-out|watch-fanout --watchers 64 --rate 1000"
)

log() { echo "compare.sh: $*" >&2; }
die() { log "$*"; exit 1; }

for tool in jq "$ETCD_BIN" "$ETCDCTL_BIN"; do
  command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install jq etcd-server etcd-client)"
done

if [[ -z "${LOADGEN:-}" ]]; then
  log "building loadgen"
  (cd "$here" && cargo build --quiet -p bench --bin loadgen) || die "cargo build of loadgen failed"
  target_dir="$(cd "$here" && cargo metadata --format-version 1 --no-deps | jq -r .target_directory)"
  LOADGEN="$target_dir/debug/loadgen"
fi
[[ -x "$LOADGEN" ]] || die "loadgen not found at $LOADGEN"

work="$(mktemp -d -t compare.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [[ "${KEEP_DATA:-0}" == 1 ]]; then
    log "data and logs kept in $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_healthy NAME PID ENDPOINT LOG: 0 once etcdctl says healthy, 1 otherwise.
wait_healthy() {
  local name=$1 pid=$2 ep=$3 logf=$4
  for _ in $(seq 1 60); do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "$name exited during startup; last log lines:"
      tail -n 20 "$logf" >&2 || true
      return 1
    fi
    if ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints "$ep" --dial-timeout 1s --command-timeout 2s \
      endpoint health >/dev/null 2>&1; then
      log "$name healthy at $ep"
      return 0
    fi
    sleep 0.5
  done
  log "$name not healthy after 30 s; last log lines:"
  tail -n 20 "$logf" >&2 || true
  return 1
}

# start_members KIND: starts MEMBERS members of etcd or raftstore on free
# loopback ports; sets members_eps (comma-separated client endpoints) and
# members_pids (space-separated).
start_members() {
  local kind=$1 i name peers=() clients=() pports=() cluster=""
  for ((i = 0; i < MEMBERS; i++)); do
    clients+=("127.0.0.1:$(free_port)")
    pports+=("$(free_port)")
  done
  for ((i = 0; i < MEMBERS; i++)); do
    peers+=("$kind$i=http://127.0.0.1:${pports[$i]}")
  done
  cluster=$(IFS=,; echo "${peers[*]}")
  members_pids=""
  for ((i = 0; i < MEMBERS; i++)); do
    name="$kind$i"
    if [[ "$kind" == etcd ]]; then
      "$ETCD_BIN" --name "$name" --data-dir "$work/$name" \
        --listen-client-urls "http://${clients[$i]}" --advertise-client-urls "http://${clients[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${pports[$i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${pports[$i]}" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        >"$work/$name.log" 2>&1 &
    else
      # shellcheck disable=SC2086 # RAFTSTORE_ARGS is a list of flags
      "$RAFTSTORE_BIN" --name "$name" --data-dir "$work/$name" \
        --listen-client-urls "http://${clients[$i]}" --advertise-client-urls "http://${clients[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${pports[$i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${pports[$i]}" \
        --initial-cluster "$cluster" --initial-cluster-state new $RAFTSTORE_ARGS \
        >"$work/$name.log" 2>&1 &
    fi
    pids+=("$!")
    members_pids+="${members_pids:+ }$!"
  done
  members_eps=$(IFS=,; echo "${clients[*]}")
}

# wait_members KIND: every member healthy.
wait_members() {
  local kind=$1 i=0 pid ep
  local -a eps pidl
  IFS=, read -r -a eps <<<"$members_eps_of"
  read -r -a pidl <<<"$members_pids_of"
  for pid in "${pidl[@]}"; do
    ep=${eps[$i]}
    wait_healthy "$kind$i" "$pid" "$ep" "$work/$kind$i.log" || return 1
    i=$((i + 1))
  done
}

start_members etcd
etcd_ep=$members_eps
etcd_pid=$members_pids

# raftstore
raft_pid=""
raft_ep=""
raft_note=""
if [[ -x "$RAFTSTORE_BIN" ]]; then
  start_members raftstore
  raft_ep=$members_eps
  raft_pid=$members_pids
else
  raft_note="raftstore binary not found at $RAFTSTORE_BIN; raftstore columns are empty."
  log "$raft_note"
fi

members_eps_of=$etcd_ep members_pids_of=$etcd_pid wait_members etcd || die "etcd did not start"
if [[ -n "$raft_pid" ]] && ! members_eps_of=$raft_ep members_pids_of=$raft_pid wait_members raftstore; then
  raft_note="raftstore ($RAFTSTORE_BIN) did not become healthy; raftstore columns are empty."
  log "$raft_note"
  raft_pid=""
fi

# role_ep ENDPOINTS ROLE: the endpoint of the leader (ROLE=leader) or of the
# first follower (ROLE=follower), or ENDPOINTS unchanged (ROLE=all).
role_ep() {
  local eps=$1 role=$2 want
  case "$role" in
    leader) want=true ;;
    follower) want=false ;;
    *) echo "$eps"; return ;;
  esac
  ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints "$eps" --dial-timeout 2s --command-timeout 3s endpoint status 2>/dev/null \
    | awk -F', ' -v w="$want" '$5 == w { print $1; exit }'
}

# alive SERVER PIDS: 0 while every member runs; the first time one is found
# dead, says so with the tail of its log and records a note.
alive() {
  local server=$1 pids_of=$2 pid i=0
  [[ -n "$pids_of" ]] || return 1
  for pid in $pids_of; do
    if ! kill -0 "$pid" 2>/dev/null; then
      if [[ ! -e "$work/$server.dead" ]]; then
        touch "$work/$server.dead"
        notes+=("$server member $i exited during the run (before row '$name'); later rows are empty.")
        log "$server member $i (pid $pid) is no longer running; last log lines:"
        tail -n 20 "$work/$server$i.log" >&2 || true
      fi
      return 1
    fi
    i=$((i + 1))
  done
  return 0
}

# run_row SERVER ENDPOINT ARGS...: prints the JSON line, or nothing.
run_row() {
  local server=$1 ep=$2
  shift 2
  local out
  # The loadgen bounds itself; the outer timeout is a second guard.
  # shellcheck disable=SC2086 # LOADGEN_EXTRA is a list of flags
  if out=$(timeout $((DURATION * 3 + 120)) "$LOADGEN" --endpoints "$ep" --duration "$DURATION" \
    --json "$@" $LOADGEN_EXTRA 2>>"$work/loadgen-$server.log"); then
    if [[ -n "$RESULTS" ]]; then
      jq -c --arg server "$server" '. + {server: $server}' <<<"$out" >>"$RESULTS"
    fi
    echo "$out"
  else
    log "loadgen $* against $server failed:"
    tail -n 5 "$work/loadgen-$server.log" >&2 || true
  fi
}

ops_cell() {
  [[ -n "$1" ]] || { echo "n/a"; return; }
  jq -r 'if .errors > 0 then "\(.ops_per_sec | floor) (\(.errors) err)" else "\(.ops_per_sec | floor)" end' <<<"$1"
}
p99_cell() {
  [[ -n "$1" ]] || { echo "n/a"; return; }
  jq -r '"\(.p99_ms * 100 | round / 100) ms"' <<<"$1"
}
# median_of JSON-LINES: one loadgen-shaped JSON object whose ops_per_sec and
# p99_ms are the medians (the upper one for an even count) of the runs given
# one per line, and whose errors are their sum; nothing for no runs.
median_of() {
  [[ -n "$1" ]] || return 0
  jq -sc 'def med(f): (map(f) | sort | .[length / 2 | floor]);
    {ops_per_sec: med(.ops_per_sec), p99_ms: med(.p99_ms), errors: (map(.errors) | add), runs: length}' <<<"$1"
}
# pair_ratio ETCD-JSON RAFTSTORE-JSON: raftstore/etcd ops/s of one round;
# nothing when either run failed.
pair_ratio() {
  [[ -n "$1" && -n "$2" ]] || return 0
  jq -rn --argjson e "$1" --argjson r "$2" 'if $e.ops_per_sec > 0 then $r.ops_per_sec / $e.ops_per_sec else empty end'
}
# paired_cell RATIOS: the median of the per-round ratios, one per line, and
# their range. Rounds alternate, so each pair shares the machine's state at
# that moment (a drift over the run, e.g. the disk slowing, cancels out).
paired_cell() {
  [[ -n "$1" ]] || { echo "n/a"; return; }
  jq -rsc 'sort | def r2: . * 100 | round / 100;
    if length == 1 then "\(.[0] | r2)" else "\(.[length / 2 | floor] | r2) (\(.[0] | r2)-\(.[-1] | r2))" end' <<<"$1"
}
ratio_cell() {
  if [[ -z "$1" || -z "$2" ]]; then echo "n/a"; return; fi
  jq -rn --argjson e "$1" --argjson r "$2" \
    'if $e.ops_per_sec > 0 then "\($r.ops_per_sec / $e.ops_per_sec * 100 | round / 100)" else "n/a" end'
}

notes=()
[[ -z "$raft_note" ]] || notes+=("$raft_note")
table="| workload | etcd ops/s | etcd p99 | raftstore ops/s | raftstore p99 | ratio (raftstore/etcd ops/s) | paired ratio: median (range) |
|---|---|---|---|---|---|---|"
for row in "${ROWS[@]}"; do
  IFS='|' read -r name argline role <<<"$row"
  [[ -z "$ONLY" ]] || [[ "$name" =~ $ONLY ]] || continue
  read -r -a args <<<"$argline"
  e=""
  r=""
  pairs=""
  # ROUNDS > 1: etcd and raftstore alternate, and each cell is the median
  # of its runs (this machine's load moves single runs by 10-15%).
  for ((round = 1; round <= ROUNDS; round++)); do
    if alive etcd "$etcd_pid"; then
      ep=$(role_ep "$etcd_ep" "${role:-all}")
      log "row '$name' ($round/$ROUNDS): etcd ($ep)"
      [[ -z "$ep" ]] || { er=$(run_row etcd "$ep" "${args[@]}"); e+="$er"$'\n'; }
    fi
    if alive raftstore "$raft_pid"; then
      ep=$(role_ep "$raft_ep" "${role:-all}")
      log "row '$name' ($round/$ROUNDS): raftstore ($ep)"
      [[ -z "$ep" ]] || { rr=$(run_row raftstore "$ep" "${args[@]}"); r+="$rr"$'\n'; }
    fi
    pr=$(pair_ratio "${er:-}" "${rr:-}")
    [[ -z "$pr" ]] || pairs+="$pr"$'\n'
    er=""
    rr=""
  done
  e=$(median_of "$(sed '/^$/d' <<<"$e")")
  r=$(median_of "$(sed '/^$/d' <<<"$r")")
  table+=$'\n'"| $name | $(ops_cell "$e") | $(p99_cell "$e") | $(ops_cell "$r") | $(p99_cell "$r") | $(ratio_cell "$e" "$r") | $(paired_cell "$(sed '/^$/d' <<<"$pairs")") |"
done

echo "$table"
echo
echo "${DURATION} s per run; $ROUNDS alternated run(s) per row and server (cells: medians; paired ratio: median and range of the per-round raftstore/etcd ratios); $MEMBERS member(s) each; etcd $("$ETCD_BIN" --version | head -n 1 | awk '{print $3}'); $(nproc) CPUs; loadgen on the same machine."
for note in "${notes[@]}"; do
  echo "Note: $note"
done
