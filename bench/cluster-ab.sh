#!/usr/bin/env bash
# One loadgen run against a fresh three-member (MEMBERS=1: one-member) cluster of etcd or raftstore,
# reporting the loadgen's figures plus the servers' CPU time per operation
# (utime+stime from /proc) and each member's WAL fsync count. Used to compare
# two raftstore binaries by alternating them (A, B, A, B, ...), since
# separate runs on a shared 2-core machine vary by up to ±15%.
#
#   bench/cluster-ab.sh raftstore --clients 256 --total 40000 put
#   RAFTSTORE_BIN=/tmp/raftstore-b bench/cluster-ab.sh raftstore --clients 1 --total 3000 put
#   TARGET=leader bench/cluster-ab.sh etcd --clients 1 --total 3000 put
#
# Environment: RAFTSTORE_BIN, LOADGEN (default: the workspace's debug
# builds), TARGET=all|leader|follower (which members the loadgen uses),
# MEMBERS=3|1 (cluster size).
set -euo pipefail

kind=${1:?usage: cluster-ab.sh etcd|raftstore LOADGEN-ARGS...}
shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="$(cd "$here" && cargo metadata --format-version 1 --no-deps | jq -r .target_directory)"
RAFTSTORE_BIN="${RAFTSTORE_BIN:-$target_dir/debug/raftstore}"
LOADGEN="${LOADGEN:-$target_dir/debug/loadgen}"
case "$kind" in
  etcd) server=etcd ;;
  raftstore) server=$RAFTSTORE_BIN ;;
  *) echo "cluster-ab.sh: first argument must be etcd or raftstore" >&2; exit 2 ;;
esac

work=$(mktemp -d -t cluster-ab.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
clients=()
peers=()
MEMBERS=${MEMBERS:-3}
[[ "$MEMBERS" == 1 || "$MEMBERS" == 3 ]] || { echo "cluster-ab.sh: MEMBERS must be 1 or 3" >&2; exit 2; }
members=$(seq 0 $((MEMBERS - 1)))
cluster=""
for i in $members; do
  clients+=("127.0.0.1:$(free_port)")
  peers+=("$(free_port)")
  cluster+="${cluster:+,}m$i=http://127.0.0.1:${peers[$i]}"
done
for i in $members; do
  "$server" --name "m$i" --data-dir "$work/m$i" \
    --listen-client-urls "http://${clients[$i]}" --advertise-client-urls "http://${clients[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${peers[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${peers[$i]}" \
    --initial-cluster "$cluster" --initial-cluster-state new >"$work/m$i.log" 2>&1 &
  pids+=("$!")
done
eps=$(IFS=,; echo "${clients[*]}")
healthy=0
for _ in $(seq 60); do
  if ETCDCTL_API=3 etcdctl --endpoints "$eps" endpoint health >/dev/null 2>&1; then healthy=1; break; fi
  sleep 0.5
done
[[ $healthy == 1 ]] || { echo "cluster-ab.sh: $kind cluster not healthy" >&2; tail -n 5 "$work"/m*.log >&2; exit 1; }
sleep 1
case "${TARGET:-all}" in
  leader) eps=$(ETCDCTL_API=3 etcdctl --endpoints "$eps" endpoint status | awk -F', ' '$5 == "true" { print $1; exit }') ;;
  follower) eps=$(ETCDCTL_API=3 etcdctl --endpoints "$eps" endpoint status | awk -F', ' '$5 == "false" { print $1; exit }') ;;
esac

# Clock ticks (1/100 s) of CPU used by the servers so far.
cpu_ticks() {
  local t=0 pid u s
  for pid in "${pids[@]}"; do
    read -r u s < <(awk '{ print $14, $15 }' "/proc/$pid/stat")
    t=$((t + u + s))
  done
  echo "$t"
}
c0=$(cpu_ticks)
# The "ops" and "latency" lines (range adds lines after them).
out=$("$LOADGEN" --endpoints "$eps" "$@" 2>&1 | grep -E '^ +(ops|latency) ')
c1=$(cpu_ticks)
ops=$(awk '/ops/ { print $2; exit }' <<<"$out")
echo "$kind ($eps) $*: $(tr -s ' ' <<<"$out" | tr '\n' ' ')"
python3 -c "print('  server CPU %.1f s for %d ops = %.0f us/op' % (($c1 - $c0) / 100, $ops, ($c1 - $c0) / 100 / max($ops, 1) * 1e6))"
for i in $members; do
  curl -s "http://${clients[$i]}/metrics" | awk -v m="m$i" '
    /^etcd_disk_wal_fsync_duration_seconds_count/ { n = $2 }
    /^etcd_disk_wal_fsync_duration_seconds_sum/ { s = $2 }
    END { printf "  %s WAL fsyncs: %d, mean %.0f us\n", m, n, (n > 0 ? s / n * 1e6 : 0) }'
done
