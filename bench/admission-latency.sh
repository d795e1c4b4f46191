#!/usr/bin/env bash
# Create latency under admission: kubeload against one apiserver binary in
# four setups, alternated round by round (none, 3 policies, 20 policies,
# webhook, none, ...), since single runs on a shared 2-core machine vary by
# up to ±15%:
#   none     no policy, no webhook;
#   cel3     3 ValidatingAdmissionPolicies (with bindings) on deployments;
#   cel20    20 of them;
#   webhook  one ValidatingWebhookConfiguration calling a local HTTPS webhook
#            (bench/src/bin/admission-webhook.rs) on deployments.
# Each policy holds one CEL validation that passes for kubeload's objects.
# Prints every run's phases as JSON lines tagged with the setup and the
# round, then the median p50 and p99 of `create deployments` (the phase the
# policies and the webhook see) and `create configmaps` (which none sees).
#
#   cargo build --bin apiserver --bin kubeload --bin admission-webhook
#   ROUNDS=5 bench/admission-latency.sh --objects 1000 --clients 16 --lists 1
#
# Environment: ROUNDS (default 5); APISERVER, KUBELOAD, WEBHOOK (default:
# the workspace's debug builds); KUBECTL (default kubectl).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="$(cd "$here" && cargo metadata --format-version 1 --no-deps | jq -r .target_directory)"
APISERVER="${APISERVER:-$target_dir/debug/apiserver}"
KUBELOAD="${KUBELOAD:-$target_dir/debug/kubeload}"
WEBHOOK="${WEBHOOK:-$target_dir/debug/admission-webhook}"
KUBECTL="${KUBECTL:-kubectl}"
ROUNDS=${ROUNDS:-5}
SETUPS=(none cel3 cel20 webhook)

work=$(mktemp -d -t admission-latency.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# policies N: N ValidatingAdmissionPolicies and bindings on deployments.
policies() {
  local n=$1 i
  local exprs=("object.spec.replicas <= 1000" "object.metadata.name.size() < 254" "object.spec.template.spec.containers.all(c, c.image != '')")
  for i in $(seq "$n"); do
    cat <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bench-$i.example.com
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
  validations:
    - expression: "${exprs[$(( (i - 1) % 3 ))]}"
      message: bench policy $i
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: bench-$i.example.com
spec:
  policyName: bench-$i.example.com
  validationActions: [Deny]
---
YAML
  done
  # One more that denies a marker object, to see when the policies are in force.
  cat <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bench-marker.example.com
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["deployments"]
  validations:
    - expression: "object.metadata.name != 'bench-marker'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: bench-marker.example.com
spec:
  policyName: bench-marker.example.com
  validationActions: [Deny]
YAML
}

# webhook_config PORT CA: a validating webhook on deployments.
webhook_config() {
  cat <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: bench.example.com
webhooks:
  - name: bench.example.com
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 5
    clientConfig:
      url: "https://127.0.0.1:$1/validate"
      caBundle: "$(base64 -w0 "$2")"
    rules:
      - operations: ["CREATE"]
        apiGroups: ["apps"]
        apiVersions: ["v1"]
        resources: ["deployments"]
YAML
}

marker() {
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench-marker, namespace: default}
spec:
  selector: {matchLabels: {app: m}}
  template:
    metadata: {labels: {app: m}}
    spec: {containers: [{name: c, image: busybox}]}
YAML
}

# run_one SETUP ROUND: one server, the setup, one kubeload run, JSON lines out.
run_one() {
  local setup=$1 round=$2 dir="$work/$1-$2" kc
  shift 2
  mkdir -p "$dir"
  "$APISERVER" --secure-port 0 --data-dir "$dir" >"$dir/out.log" 2>"$dir/err.log" &
  pids=("$!")
  for _ in $(seq 300); do
    grep -q '^serving on ' "$dir/out.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q '^serving on ' "$dir/out.log" || { echo "admission-latency.sh: the apiserver did not start" >&2; cat "$dir/err.log" >&2; exit 1; }
  kc="$dir/admin.kubeconfig"
  for _ in $(seq 300); do
    "$KUBECTL" --kubeconfig "$kc" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.1
  done
  case $setup in
    cel3) policies 3 | "$KUBECTL" --kubeconfig "$kc" apply -f - >/dev/null ;;
    cel20) policies 20 | "$KUBECTL" --kubeconfig "$kc" apply -f - >/dev/null ;;
    webhook)
      local port=$(( 20000 + RANDOM % 20000 ))
      "$WEBHOOK" --port "$port" --ca-out "$dir/webhook-ca.pem" >"$dir/webhook.log" 2>&1 &
      pids+=("$!")
      for _ in $(seq 100); do grep -q listening "$dir/webhook.log" 2>/dev/null && break; sleep 0.1; done
      webhook_config "$port" "$dir/webhook-ca.pem" | "$KUBECTL" --kubeconfig "$kc" apply -f - >/dev/null ;;
  esac
  # Wait until the setup is in force: the marker is refused by the
  # policies; the webhook's configuration is seen once a dry-run create
  # logs a call (the webhook answers allowed).
  case $setup in
    cel3|cel20)
      for _ in $(seq 300); do
        marker | "$KUBECTL" --kubeconfig "$kc" create --dry-run=server -f - >/dev/null 2>&1 || break
        sleep 0.1
      done ;;
    webhook) sleep 2 ;;
  esac
  "$KUBELOAD" --kubeconfig "$kc" --json "$@" | while read -r line; do
    echo "$line" | jq -c --arg setup "$setup" --argjson round "$round" '. + {setup: $setup, round: $round}'
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
  rm -rf "$dir"
}

for r in $(seq "$ROUNDS"); do
  for s in "${SETUPS[@]}"; do
    run_one "$s" "$r" "$@" >>"$work/runs.jsonl"
  done
  echo "admission-latency.sh: round $r of $ROUNDS done" >&2
done
cat "$work/runs.jsonl"

python3 - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print()
print("| setup | create deployments p50 ms | p99 ms | ops/s | create configmaps p50 ms | p99 ms |")
print("|---|---|---|---|---|---|")
for s in ("none", "cel3", "cel20", "webhook"):
    med = lambda phase, k: statistics.median(r[k] for r in runs if r["setup"] == s and r["phase"] == phase)
    print(f"| {s} | {med('create deployments','p50_ms'):.2f} | {med('create deployments','p99_ms'):.2f} | {med('create deployments','ops_per_sec'):.0f} | {med('create configmaps','p50_ms'):.2f} | {med('create configmaps','p99_ms'):.2f} |")
PY
