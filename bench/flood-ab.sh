#!/usr/bin/env bash
# Request latency with and without a connection flood, alternated on one
# server: round N runs kubeload alone (A), then kubeload while `flood`
# holds connections that never finish a TLS handshake or a request head
# (B). The server keeps its serving defaults (32 s handshake and
# read-header timeouts, 90 s idle), so the flood's connections are closed
# and reopened throughout. Prints every run as JSON lines, the flood's own
# report (how long the server let its connections live), then per phase the
# median ops/s, p50 and p99 of A and B and the median of per-round B/A
# ratios of ops/s.
#
#   cargo build --bin apiserver --bin kubeload --bin flood
#   ROUNDS=4 SILENT=1500 SLOW=500 bench/flood-ab.sh --objects 300 --gets 20000 --lists 20 --clients 8
#
# Environment: ROUNDS (default 4), SILENT and SLOW (flood connections of
# each kind, default 1500 and 500), APISERVER, KUBELOAD and FLOOD (default:
# the workspace's debug builds).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="$(cd "$here" && cargo metadata --format-version 1 --no-deps | jq -r .target_directory)"
APISERVER="${APISERVER:-$target_dir/debug/apiserver}"
KUBELOAD="${KUBELOAD:-$target_dir/debug/kubeload}"
FLOOD="${FLOOD:-$target_dir/debug/flood}"
ROUNDS=${ROUNDS:-4}
SILENT=${SILENT:-1500}
SLOW=${SLOW:-500}

work=$(mktemp -d -t flood-ab.XXXXXX)
pid=""
flood_pid=""
cleanup() {
  for p in "$flood_pid" "$pid"; do
    if [[ -n "$p" ]]; then kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

"$APISERVER" --secure-port 0 --data-dir "$work/server" >"$work/out.log" 2>"$work/err.log" &
pid=$!
for _ in $(seq 300); do
  grep -q '^serving on ' "$work/out.log" 2>/dev/null && break
  sleep 0.1
done
url=$(sed -n 's/^serving on //p' "$work/out.log" | head -1)
[[ -n "$url" ]] || { echo "flood-ab.sh: the apiserver did not start" >&2; cat "$work/err.log" >&2; exit 1; }
kubeconfig="$work/server/admin.kubeconfig"
for _ in $(seq 300); do
  kubectl --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
  sleep 0.1
done

# load LABEL ROUND: one kubeload run, its phases as tagged JSON lines.
load() {
  "$KUBELOAD" --kubeconfig "$kubeconfig" --json "${@:3}" | while read -r line; do
    echo "$line" | jq -c --arg ab "$1" --argjson round "$2" '. + {ab: $ab, round: $round}'
  done
}

for r in $(seq "$ROUNDS"); do
  load A "$r" "$@" >>"$work/runs.jsonl"
  # The flood runs well past the load; it is stopped once the load ends.
  "$FLOOD" --target "${url#https://}" --silent "$SILENT" --slow "$SLOW" --seconds 3600 >"$work/flood-$r.jsonl" &
  flood_pid=$!
  # Let the flood open its connections before the load starts.
  sleep 5
  load B "$r" "$@" >>"$work/runs.jsonl"
  kill "$flood_pid" 2>/dev/null || true; wait "$flood_pid" 2>/dev/null || true
  flood_pid=""
  echo "flood-ab.sh: round $r of $ROUNDS done ($(ls /proc/$pid/fd | wc -l) fds open in the server)" >&2
done
cat "$work/runs.jsonl"

# A flood that runs to its end reports how long the server kept its
# connections; one short run shows it.
echo "flood-ab.sh: a 70 s flood on its own, for the server's closing times:" >&2
"$FLOOD" --target "${url#https://}" --silent "$SILENT" --slow "$SLOW" --seconds 70

python3 - "$work/runs.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
phases = []
for r in runs:
    if r["phase"] not in phases:
        phases.append(r["phase"])
print()
print("| phase | quiet ops/s | flood ops/s | flood/quiet (median of rounds) | range | quiet p50 ms | flood p50 ms | quiet p99 ms | flood p99 ms | errors |")
print("|---|---|---|---|---|---|---|---|---|---|")
for p in phases:
    by = {ab: {r["round"]: r for r in runs if r["phase"] == p and r["ab"] == ab} for ab in ("A", "B")}
    rounds = sorted(set(by["A"]) & set(by["B"]))
    ratios = [by["B"][n]["ops_per_sec"] / by["A"][n]["ops_per_sec"] for n in rounds if by["A"][n]["ops_per_sec"]]
    med = lambda ab, k: statistics.median(r[k] for r in by[ab].values())
    errors = sum(r.get("errors", 0) for ab in by for r in by[ab].values())
    print(f"| {p} | {med('A','ops_per_sec'):.0f} | {med('B','ops_per_sec'):.0f} | {statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} | {med('A','p50_ms'):.2f} | {med('B','p50_ms'):.2f} | {med('A','p99_ms'):.2f} | {med('B','p99_ms'):.2f} | {errors} |")
EOF
