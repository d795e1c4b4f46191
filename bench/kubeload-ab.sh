#!/usr/bin/env bash
# An alternated A/B run of kubeload against two apiserver binaries: each
# round starts binary A on a fresh data dir, runs kubeload, stops it, then
# does the same with B (A, B, A, B, ...), since single runs on a shared
# 2-core machine vary by up to ±15%. Prints every run's phases as JSON lines
# (tagged "ab": "A"/"B", "round": N), then per phase the median ops/s and
# p99 of each binary and the median of the per-round B/A ratios.
#
#   cp "$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/debug/apiserver" /tmp/apiserver-a   # at the base commit
#   ...                                                                                                             # and /tmp/apiserver-b at the new one
#   ROUNDS=5 bench/kubeload-ab.sh /tmp/apiserver-a /tmp/apiserver-b --objects 1000 --clients 16 --lists 50
#
# Environment: ROUNDS (default 5), KUBELOAD (default: the workspace's debug
# build).
set -euo pipefail

a=${1:?usage: kubeload-ab.sh APISERVER-A APISERVER-B KUBELOAD-ARGS...}
b=${2:?usage: kubeload-ab.sh APISERVER-A APISERVER-B KUBELOAD-ARGS...}
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="$(cd "$here" && cargo metadata --format-version 1 --no-deps | jq -r .target_directory)"
KUBELOAD="${KUBELOAD:-$target_dir/debug/kubeload}"
ROUNDS=${ROUNDS:-5}

work=$(mktemp -d -t kubeload-ab.XXXXXX)
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# run_one LABEL BINARY ROUND: one server, one kubeload run, JSON lines out.
run_one() {
  local label=$1 bin=$2 round=$3 dir="$work/$1-$3"
  shift 3
  mkdir -p "$dir"
  "$bin" --secure-port 0 --data-dir "$dir" >"$dir/out.log" 2>"$dir/err.log" &
  pid=$!
  for _ in $(seq 300); do
    grep -q '^serving on ' "$dir/out.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q '^serving on ' "$dir/out.log" || { echo "kubeload-ab.sh: $label did not start" >&2; cat "$dir/err.log" >&2; exit 1; }
  # A server prints `serving on` before its store is up; load starts once
  # /readyz passes.
  for _ in $(seq 300); do
    kubectl --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$KUBELOAD" --kubeconfig "$dir/admin.kubeconfig" --json "$@" | while read -r line; do
    echo "$line" | jq -c --arg ab "$label" --argjson round "$round" '. + {ab: $ab, round: $round}'
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=""
  rm -rf "$dir"
}

for r in $(seq "$ROUNDS"); do
  run_one A "$a" "$r" "$@" >>"$work/runs.jsonl"
  run_one B "$b" "$r" "$@" >>"$work/runs.jsonl"
  echo "kubeload-ab.sh: round $r of $ROUNDS done" >&2
done
cat "$work/runs.jsonl"

python3 - "$work/runs.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
phases = []
for r in runs:
    if r["phase"] not in phases:
        phases.append(r["phase"])
print()
print("| phase | A ops/s | B ops/s | B/A (median of rounds) | B/A range | A p99 ms | B p99 ms |")
print("|---|---|---|---|---|---|---|")
for p in phases:
    by = {ab: {r["round"]: r for r in runs if r["phase"] == p and r["ab"] == ab} for ab in ("A", "B")}
    rounds = sorted(set(by["A"]) & set(by["B"]))
    ratios = [by["B"][n]["ops_per_sec"] / by["A"][n]["ops_per_sec"] for n in rounds if by["A"][n]["ops_per_sec"]]
    med = lambda ab, k: statistics.median(r[k] for r in by[ab].values())
    print(f"| {p} | {med('A','ops_per_sec'):.0f} | {med('B','ops_per_sec'):.0f} | {statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} | {med('A','p99_ms'):.2f} | {med('B','p99_ms'):.2f} |")
EOF
