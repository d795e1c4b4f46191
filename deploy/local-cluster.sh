#!/usr/bin/env bash
# Starts, stops and reports on a local three-member raftstore cluster on
# loopback, and prints its endpoints and an etcdctl line to use it.
#
#   deploy/local-cluster.sh start    # build if needed, start 3 members
#   deploy/local-cluster.sh status   # etcdctl endpoint status + member list
#   deploy/local-cluster.sh stop     # stop the members (data is kept)
#   deploy/local-cluster.sh clean    # stop and delete the data
#
# Environment: CLUSTER_DIR (default /tmp/raftstore-cluster), BASE_PORT
# (default 32379: clients on BASE_PORT+{0,10,20}, peers on +1), RAFTSTORE_BIN.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${CLUSTER_DIR:-/tmp/raftstore-cluster}"
base="${BASE_PORT:-32379}"
bin="${RAFTSTORE_BIN:-/var/tmp/kubers-target/debug/raftstore}"
names=(m1 m2 m3)

client_port() { echo $((base + 10 * $1)); }
peer_port() { echo $((base + 10 * $1 + 1)); }

endpoints() {
  local eps=()
  for i in 0 1 2; do eps+=("127.0.0.1:$(client_port "$i")"); done
  (IFS=,; echo "${eps[*]}")
}

initial_cluster() {
  local parts=()
  for i in 0 1 2; do parts+=("${names[$i]}=http://127.0.0.1:$(peer_port "$i")"); done
  (IFS=,; echo "${parts[*]}")
}

start() {
  if [ ! -x "$bin" ]; then
    (cd "$here" && cargo build -p raftstore --bin raftstore)
  fi
  mkdir -p "$dir"
  local ic
  ic="$(initial_cluster)"
  for i in 0 1 2; do
    local n="${names[$i]}" pidf="$dir/${names[$i]}.pid"
    if [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; then
      echo "$n already running (pid $(cat "$pidf"))"
      continue
    fi
    nohup "$bin" --name "$n" --data-dir "$dir/$n" \
      --listen-client-urls "http://127.0.0.1:$(client_port "$i")" \
      --advertise-client-urls "http://127.0.0.1:$(client_port "$i")" \
      --listen-peer-urls "http://127.0.0.1:$(peer_port "$i")" \
      --initial-advertise-peer-urls "http://127.0.0.1:$(peer_port "$i")" \
      --initial-cluster "$ic" --initial-cluster-state new \
      > "$dir/$n.log" 2>&1 &
    echo $! > "$pidf"
    echo "started $n (pid $!), log $dir/$n.log"
  done
  # Wait for a leader.
  for _ in $(seq 1 50); do
    if ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" endpoint health >/dev/null 2>&1; then
      echo "endpoints: $(endpoints)"
      echo "use: ETCDCTL_API=3 etcdctl --endpoints=$(endpoints) endpoint status -w table"
      return 0
    fi
    sleep 0.2
  done
  echo "cluster did not become healthy; see $dir/*.log" >&2
  return 1
}

status() {
  ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" endpoint status -w table
  ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" member list -w table
}

stop() {
  for n in "${names[@]}"; do
    local pidf="$dir/$n.pid"
    if [ -f "$pidf" ]; then
      kill "$(cat "$pidf")" 2>/dev/null && echo "stopped $n" || true
      rm -f "$pidf"
    fi
  done
}

case "${1:-}" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  clean) stop; rm -rf "$dir"; echo "removed $dir" ;;
  *) echo "usage: $0 start|status|stop|clean" >&2; exit 2 ;;
esac
