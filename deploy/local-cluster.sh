#!/usr/bin/env bash
# Starts, stops and reports on a local three-member raftstore cluster on
# loopback, and prints its endpoints and an etcdctl line to use it.
#
#   deploy/local-cluster.sh start    # build if needed, start 3 members
#   deploy/local-cluster.sh status   # etcdctl endpoint status + member list
#   deploy/local-cluster.sh join m4  # etcdctl member add --learner, start it
#                                    # with --initial-cluster-state existing,
#                                    # promote it once in sync
#   deploy/local-cluster.sh stop     # stop the members (data is kept)
#   deploy/local-cluster.sh clean    # stop and delete the data
#
# Environment: CLUSTER_DIR (default /tmp/raftstore-cluster), BASE_PORT
# (default 32379: clients on BASE_PORT+{0,10,20}, peers on +1), RAFTSTORE_BIN,
# START_TIMEOUT (seconds to wait for a healthy majority, default 20).
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
  # Wait (up to START_TIMEOUT seconds, default 20) until a majority of the
  # three members is healthy. Each member is asked on its own with short
  # timeouts, so one that cannot start (e.g. it was removed) neither stalls
  # the wait nor fails it while the other two have a quorum.
  local deadline=$((SECONDS + ${START_TIMEOUT:-20})) healthy down
  while :; do
    healthy=0
    down=()
    for i in 0 1 2; do
      if ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$(client_port "$i")" --dial-timeout=1s --command-timeout=1s \
        endpoint health >/dev/null 2>&1; then
        healthy=$((healthy + 1))
      else
        down+=("${names[$i]}")
      fi
    done
    if [ "$healthy" -ge 2 ]; then
      [ "${#down[@]}" -eq 0 ] || echo "warning: not healthy: ${down[*]} (see their logs in $dir); the others have a quorum" >&2
      echo "endpoints: $(endpoints)"
      echo "use: ETCDCTL_API=3 etcdctl --endpoints=$(endpoints) endpoint status -w table"
      echo "metrics: curl http://127.0.0.1:$(client_port 0)/metrics"
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.2
  done
  echo "cluster did not become healthy within ${START_TIMEOUT:-20} s (healthy: $healthy of 3); see $dir/*.log" >&2
  return 1
}

status() {
  ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" endpoint status -w table
  ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" member list -w table
}

# join NAME: the etcdctl member add workflow. The new member takes the
# next free slot of ports (index 3, 4, ...).
join() {
  local n="$1" i=3
  while [ -e "$dir/slot-$i" ]; do i=$((i + 1)); done
  local peer="http://127.0.0.1:$(peer_port "$i")" client="http://127.0.0.1:$(client_port "$i")"
  local out
  out="$(ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" member add "$n" --peer-urls="$peer" --learner)"
  echo "$out"
  local id ic
  id="$(echo "$out" | awk '/^Member/ {print $2; exit}')"
  ic="$(echo "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')"
  touch "$dir/slot-$i"
  nohup "$bin" --name "$n" --data-dir "$dir/$n" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$ic" --initial-cluster-state existing \
    > "$dir/$n.log" 2>&1 &
  echo $! > "$dir/$n.pid"
  echo "started $n (pid $!), log $dir/$n.log"
  for _ in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" member promote "$id" 2>/dev/null; then
      return 0
    fi
    sleep 0.3
  done
  echo "$n did not catch up; see $dir/$n.log" >&2
  return 1
}

# stop: SIGTERM every member, then wait until each process is gone (its
# ports are free again, so an immediate start works); a member still alive
# after STOP_TIMEOUT seconds (default 10) gets SIGKILL. Pid files whose
# process is gone, or now belongs to something else, are just removed.
stop() {
  local pidf pid n left=()
  for pidf in "$dir"/*.pid; do
    [ -f "$pidf" ] || continue
    n="$(basename "$pidf" .pid)"
    pid="$(cat "$pidf")"
    if [ -n "$pid" ] && { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- "--name $n "; then
      kill "$pid" 2>/dev/null || true
      left+=("$n:$pid")
    else
      echo "$n was not running"
    fi
    rm -f "$pidf"
  done
  local deadline=$((SECONDS + ${STOP_TIMEOUT:-10})) still entry killed=
  while [ "${#left[@]}" -gt 0 ]; do
    still=()
    for entry in "${left[@]}"; do
      n="${entry%%:*}" pid="${entry#*:}"
      if kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
        still+=("$entry")
      else
        echo "stopped $n (pid $pid exited)"
      fi
    done
    left=("${still[@]+"${still[@]}"}")
    [ "${#left[@]}" -gt 0 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
      if [ -n "${killed:-}" ]; then
        echo "still running after SIGKILL: ${left[*]}" >&2
        return 1
      fi
      for entry in "${left[@]}"; do
        echo "${entry%%:*} (pid ${entry#*:}) did not exit after SIGTERM; sending SIGKILL"
        kill -9 "${entry#*:}" 2>/dev/null || true
      done
      killed=1 deadline=$((SECONDS + 5))
    fi
    sleep 0.1
  done
  echo "all members stopped"
}

case "${1:-}" in
  start) start ;;
  status) status ;;
  join) [ -n "${2:-}" ] || { echo "usage: $0 join NAME" >&2; exit 2; }; join "$2" ;;
  stop) stop ;;
  clean) stop; rm -rf "$dir"; echo "removed $dir" ;;
  *) echo "usage: $0 start|status|join NAME|stop|clean" >&2; exit 2 ;;
esac
