#!/usr/bin/env bash
# Starts, stops and reports on a local three-member raftstore cluster on
# loopback, and prints its endpoints and an etcdctl line to use it.
#
#   deploy/local-cluster.sh start    # build if needed, start the 3 members
#                                    # and those added with join
#   deploy/local-cluster.sh status   # etcdctl endpoint status + member list
#   deploy/local-cluster.sh join m4  # etcdctl member add --learner, start it
#                                    # with --initial-cluster-state existing,
#                                    # promote it once in sync
#   deploy/local-cluster.sh stop     # stop the members (data is kept)
#   deploy/local-cluster.sh clean    # stop and delete the data
#
# Environment: CLUSTER_DIR (default /tmp/raftstore-cluster), BASE_PORT
# (default 32379: clients on BASE_PORT+{0,10,20}, peers on +1), RAFTSTORE_BIN
# (default: the raftstore binary of this checkout, built with the workspace's
# features so that it shares the apiserver build's artifacts), START_TIMEOUT
# (seconds to wait for the members, default 20).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${CLUSTER_DIR:-/tmp/raftstore-cluster}"
base="${BASE_PORT:-32379}"
names=(m1 m2 m3)

# The raftstore binary to run: RAFTSTORE_BIN, or this checkout's, built (or
# brought up to date) first.
raftstore_bin() {
  if [ -n "${RAFTSTORE_BIN:-}" ]; then
    echo "$RAFTSTORE_BIN"
    return
  fi
  local target
  target="$(cd "$here" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  # --workspace: features unified as in the workspace build, so RocksDB is
  # not rebuilt for a raftstore-only feature set.
  (cd "$here" && cargo build --quiet --workspace --bin raftstore) >&2
  echo "$target/debug/raftstore"
}

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

# alive PIDFILE: whether the member of that pid file runs.
alive() {
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$(cat "$1")/stat" 2>/dev/null)" != Z ]
}

# launch NAME CLIENT_URL PEER_URL INITIAL_CLUSTER STATE: starts one member.
launch() {
  nohup "$bin" --name "$1" --data-dir "$dir/$1" \
    --listen-client-urls "$2" --advertise-client-urls "$2" \
    --listen-peer-urls "$3" --initial-advertise-peer-urls "$3" \
    --initial-cluster "$4" --initial-cluster-state "$5" \
    >> "$dir/$1.log" 2>&1 &
  echo $! > "$dir/$1.pid"
  echo "started $1 (pid $!), log $dir/$1.log"
}

# healthy CLIENT_PORT: whether the member there answers a health check.
# The HTTP /health needs no user, so it also works once auth is enabled
# (etcdctl endpoint health would need --user then).
healthy() {
  curl -fsS --max-time 2 "http://127.0.0.1:$1/health" 2>/dev/null | grep -q '"health":"true"'
}

start() {
  bin="$(raftstore_bin)"
  mkdir -p "$dir"
  local ic
  ic="$(initial_cluster)"
  local members=() ports=()
  # ensure NAME SLOT INITIAL_CLUSTER STATE: the member in the ports of SLOT,
  # started unless it runs.
  ensure() {
    members+=("$1") ports+=("$(client_port "$2")")
    if alive "$dir/$1.pid"; then
      echo "$1 already running (pid $(cat "$dir/$1.pid"))"
    else
      launch "$1" "http://127.0.0.1:$(client_port "$2")" "http://127.0.0.1:$(peer_port "$2")" "$3" "$4"
    fi
  }
  for i in 0 1 2; do
    ensure "${names[$i]}" "$i" "$ic" new
  done
  # Members added with `join` come back too, as existing members.
  local f
  for f in "$dir"/joined/*; do
    [ -f "$f" ] || continue
    ensure "$(basename "$f")" "$(sed -n 1p "$f")" "$(sed -n 2p "$f")" existing
  done
  # Wait (up to START_TIMEOUT seconds, default 20) until every member is
  # healthy, or a majority of the three is and the others have exited.
  # Each member is asked on its own with short timeouts, so one that cannot
  # start neither stalls the wait nor fails it while the others have a
  # quorum. A member that runs but is not healthy yet (still electing or
  # catching up) is reported as starting, not as unhealthy.
  local deadline=$((SECONDS + ${START_TIMEOUT:-20})) up quorum starting exited k
  while :; do
    up=0 quorum=0 starting=() exited=()
    for k in "${!members[@]}"; do
      if healthy "${ports[$k]}"; then
        up=$((up + 1))
        [ "$k" -ge 3 ] || quorum=$((quorum + 1))
      elif alive "$dir/${members[$k]}.pid"; then
        starting+=("${members[$k]}")
      else
        exited+=("${members[$k]}")
      fi
    done
    if [ "$quorum" -ge 2 ] && { [ "${#starting[@]}" -eq 0 ] || [ "$SECONDS" -ge "$deadline" ]; }; then
      [ "${#exited[@]}" -eq 0 ] || echo "warning: exited: ${exited[*]} (see their logs in $dir); the others have a quorum" >&2
      [ "${#starting[@]}" -eq 0 ] || echo "note: still starting (running, not yet serving): ${starting[*]}" >&2
      echo "endpoints: $(endpoints)"
      echo "use: ETCDCTL_API=3 etcdctl --endpoints=$(endpoints) endpoint status -w table"
      echo "metrics: curl http://127.0.0.1:$(client_port 0)/metrics"
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.2
  done
  echo "cluster did not become healthy within ${START_TIMEOUT:-20} s (healthy: $quorum of 3; starting: ${starting[*]-}; exited: ${exited[*]-}); see $dir/*.log" >&2
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
  local peer client
  peer="http://127.0.0.1:$(peer_port "$i")" client="http://127.0.0.1:$(client_port "$i")"
  local out
  out="$(ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" member add "$n" --peer-urls="$peer" --learner)"
  echo "$out"
  local id ic
  id="$(echo "$out" | awk '/^Member/ {print $2; exit}')"
  ic="$(echo "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')"
  touch "$dir/slot-$i"
  # Remembered so that `start` brings it back after a `stop`.
  mkdir -p "$dir/joined"
  printf '%s\n%s\n' "$i" "$ic" > "$dir/joined/$n"
  bin="$(raftstore_bin)"
  launch "$n" "$client" "$peer" "$ic" existing
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
