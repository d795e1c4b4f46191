//! OpenAPI and what kubectl builds on it, with `kubectl.1.33` and
//! `kubectl.1.27` and no `--validate=false`: `create -f` and `apply -f` of
//! the fixtures, re-apply `unchanged`, apply of a changed manifest,
//! `explain`, `diff`, `--dry-run=server`, and unknown fields under
//! `--validate=strict|warn|false`. kubectl 1.27 reads `/openapi/v2` (protobuf)
//! for apply and explain; 1.33 reads `/openapi/v3`.

use serde_json::Value;

use crate::common::{fixtures, Server};

fn fixture(name: &str) -> String {
    fixtures().join(name).to_str().unwrap().to_string()
}

fn get_json(s: &Server, minor: u32, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(s.kubectl(minor, &a).ok()).unwrap()
}

/// The documents kubectl checks: hashed URLs in the root, and in the
/// group-version document a PATCH with `fieldValidation` and a strategic
/// merge body, and schemas with GVKs and patch markers.
#[test]
fn openapi_v3_documents() {
    let s = Server::start();
    let root: Value = serde_json::from_str(s.kubectl(33, &["get", "--raw", "/openapi/v3"]).ok()).unwrap();
    for gv in ["api/v1", "apis/apps/v1"] {
        let url = root["paths"][gv]["serverRelativeURL"].as_str().unwrap_or_default();
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{gv}: {root}");
    }
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
    let doc: Value = serde_json::from_str(s.kubectl(33, &["get", "--raw", url]).ok()).unwrap();
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"], serde_json::json!({"group": "apps", "version": "v1", "kind": "Deployment"}));
    assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"), "{patch}");
    assert!(patch["requestBody"]["content"].get("application/strategic-merge-patch+json").is_some(), "{patch}");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0]["kind"], "Deployment");
    let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-list-type"], "map");
    assert_eq!(containers["x-kubernetes-list-map-keys"], serde_json::json!(["name"]));
    let v2: Value = serde_json::from_str(s.kubectl(33, &["get", "--raw", "/openapi/v2"]).ok()).unwrap();
    assert_eq!(v2["swagger"], "2.0");
    assert!(v2["definitions"]["io.k8s.api.core.v1.ConfigMap"].is_object());
}

const CM_UNKNOWN: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME
  bogus: x
data:
  a: \"1\"
extra: 1
";

const DEPLOY_UNKNOWN: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: typo
spec:
  selector:
    matchLabels: {app: typo}
  template:
    metadata:
      labels: {app: typo}
    spec:
      containers:
      - name: c
        image: nginx
        imagePullPolcy: Always
";

fn apply_lifecycle(minor: u32) {
    let s = Server::start();
    let nginx = fixture("nginx-deployment.yaml");
    let vllm = fixture("vllm-demo-deployment.yaml");

    // create -f and apply -f with validation on.
    assert_eq!(s.kubectl(minor, &["create", "-f", &nginx]).ok().trim(), "deployment.apps/nginx created");
    assert_eq!(s.kubectl(minor, &["apply", "-f", &vllm]).ok().trim(), "deployment.apps/vllm-demo created");
    assert_eq!(s.kubectl(minor, &["apply", "-f", &vllm]).ok().trim(), "deployment.apps/vllm-demo unchanged");
    // Applying over an object created without last-applied patches it in.
    let first = s.kubectl(minor, &["apply", "-f", &nginx]);
    assert_eq!(first.ok().trim(), "deployment.apps/nginx configured", "{first:?}");
    assert!(first.stderr.contains("missing the kubectl.kubernetes.io/last-applied-configuration annotation"), "{first:?}");
    assert_eq!(s.kubectl(minor, &["apply", "-f", &nginx]).ok().trim(), "deployment.apps/nginx unchanged");

    // A changed manifest: strategic merge patch of replicas and the image.
    let changed = s.dir.path().join("nginx-changed.yaml");
    let text = std::fs::read_to_string(&nginx).unwrap().replace("replicas: 1", "replicas: 3").replace("nginx:1.25", "nginx:1.27");
    std::fs::write(&changed, text).unwrap();
    let changed = changed.to_str().unwrap();

    // diff: no differences exit 0, differences exit 1 and show them.
    assert_eq!(s.kubectl(minor, &["diff", "-f", &nginx]).code, 0);
    let d = s.kubectl(minor, &["diff", "-f", changed]);
    assert_eq!(d.code, 1, "{d:?}");
    assert!(d.stdout.contains("-  replicas: 1") && d.stdout.contains("+  replicas: 3") && d.stdout.contains("+      - image: nginx:1.27"), "{d:?}");

    // --dry-run=server stores nothing.
    assert_eq!(s.kubectl(minor, &["apply", "--dry-run=server", "-f", changed]).ok().trim(), "deployment.apps/nginx configured (server dry run)");
    let live = get_json(&s, minor, &["deploy", "nginx"]);
    assert_eq!(live["spec"]["replicas"], 1);
    assert_eq!(live["metadata"]["generation"], 1);
    let cm = s.dir.path().join("dry.yaml");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\n").unwrap();
    assert_eq!(s.kubectl(minor, &["create", "--dry-run=server", "-f", cm.to_str().unwrap()]).ok().trim(), "configmap/dry created (server dry run)");
    let gone = s.kubectl(minor, &["get", "cm", "dry"]);
    assert!(gone.code == 1 && gone.stderr.contains("configmaps \"dry\" not found"), "{gone:?}");

    let applied = s.kubectl(minor, &["apply", "-f", changed]);
    assert_eq!(applied.ok().trim(), "deployment.apps/nginx configured");
    let live = get_json(&s, minor, &["deploy", "nginx"]);
    assert_eq!(live["spec"]["replicas"], 3);
    assert_eq!(live["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(live["spec"]["template"]["spec"]["containers"].as_array().unwrap().len(), 1);
    assert_eq!(live["metadata"]["generation"], 2);
    assert_eq!(s.kubectl(minor, &["apply", "-f", changed]).ok().trim(), "deployment.apps/nginx unchanged");
    assert_eq!(s.kubectl(minor, &["diff", "-f", changed]).code, 0);

    // Containers merge by name: add a sidecar in front, then drop it
    // (kubectl sends `$setElementOrder/containers` and `$patch: delete`).
    let sidecar = s.dir.path().join("nginx-sidecar.yaml");
    let text = std::fs::read_to_string(changed).unwrap().replace("      containers:\n", "      containers:\n      - name: sidecar\n        image: busybox:1.36\n");
    std::fs::write(&sidecar, text).unwrap();
    assert_eq!(s.kubectl(minor, &["apply", "-f", sidecar.to_str().unwrap()]).ok().trim(), "deployment.apps/nginx configured");
    let live = get_json(&s, minor, &["deploy", "nginx"]);
    let names: Vec<&str> = live["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sidecar", "nginx"]);
    assert_eq!(live["spec"]["template"]["spec"]["containers"][1]["image"], "nginx:1.27");
    assert_eq!(s.kubectl(minor, &["apply", "-f", changed]).ok().trim(), "deployment.apps/nginx configured");
    let live = get_json(&s, minor, &["deploy", "nginx"]);
    let names: Vec<&str> = live["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["nginx"]);

    // explain.
    let ex = s.kubectl(minor, &["explain", "deployment.spec.replicas"]);
    assert!(ex.ok().contains("replicas") && ex.stdout.contains("<integer>") && ex.stdout.contains("Number of desired pods"), "{ex:?}");
    let rec = s.kubectl(minor, &["explain", "deployment.spec.strategy", "--recursive"]);
    assert!(rec.ok().contains("rollingUpdate\t<RollingUpdateDeployment>") && rec.stdout.contains("maxSurge\t<IntOrString>"), "{rec:?}");

    // Unknown fields: strict fails, warn warns and drops, false drops silently.
    let name = format!("unknown-{minor}");
    let strict = s.kubectl_stdin(minor, &["create", "--validate=strict", "-f", "-"], Some(&CM_UNKNOWN.replace("NAME", &name)));
    assert_eq!(strict.code, 1, "{strict:?}");
    assert!(strict.stderr.contains("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"extra\", unknown field \"metadata.bogus\""), "{strict:?}");
    let warn = s.kubectl_stdin(minor, &["create", "--validate=warn", "-f", "-"], Some(&CM_UNKNOWN.replace("NAME", &name)));
    assert_eq!(warn.ok().trim(), format!("configmap/{name} created"));
    assert!(warn.stderr.contains("Warning: unknown field \"extra\"") && warn.stderr.contains("Warning: unknown field \"metadata.bogus\""), "{warn:?}");
    let stored = get_json(&s, minor, &["cm", &name]);
    assert!(stored.get("extra").is_none() && stored["metadata"].get("bogus").is_none(), "{stored}");
    assert_eq!(stored["data"]["a"], "1");
    let nested = s.kubectl_stdin(minor, &["apply", "--validate=strict", "-f", "-"], Some(DEPLOY_UNKNOWN));
    assert_eq!(nested.code, 1);
    assert!(nested.stderr.contains("unknown field \"spec.template.spec.containers[0].imagePullPolcy\""), "{nested:?}");
    let ignored = s.kubectl_stdin(minor, &["apply", "--validate=false", "-f", "-"], Some(DEPLOY_UNKNOWN));
    assert_eq!(ignored.ok().trim(), "deployment.apps/typo created");
    assert!(!ignored.stderr.contains("Warning"), "{ignored:?}");
    // A value of the wrong type is a 400 whatever fieldValidation says.
    let wrong = s.kubectl_stdin(
        minor,
        &["apply", "--validate=false", "-f", "-"],
        Some(&DEPLOY_UNKNOWN.replace("name: typo", "name: wrong").replace("spec:\n  selector", "spec:\n  replicas: \"2\"\n  selector")),
    );
    assert_eq!(wrong.code, 1, "{wrong:?}");
    assert!(
        wrong.stderr.contains("Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
        "{wrong:?}"
    );
    let typo = get_json(&s, minor, &["deploy", "typo"]);
    assert!(typo["spec"]["template"]["spec"]["containers"][0].get("imagePullPolcy").is_none());
}

#[test]
fn kubectl_apply_diff_explain_validation_133() {
    apply_lifecycle(33);
}

#[test]
fn kubectl_apply_diff_explain_validation_127() {
    apply_lifecycle(27);
}

/// Duplicate keys (JSON bodies only: kubectl's YAML reader rejects them):
/// Strict fails, the default (Warn) keeps the last value and warns.
#[test]
fn duplicate_fields_strict_and_warn() {
    let s = Server::start();
    let body = s.dir.path().join("dup.json");
    std::fs::write(&body, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1","a":"2"},"x":1}"#).unwrap();
    let body = body.to_str().unwrap();
    let strict = s.kubectl(33, &["create", "--raw", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", "-f", body]);
    assert_eq!(strict.code, 1);
    assert!(strict.stderr.contains("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"data.a\""), "{strict:?}");
    let warn = s.kubectl(33, &["create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", body]);
    warn.ok();
    assert!(warn.stderr.contains("Warning: duplicate field \"data.a\"") && warn.stderr.contains("Warning: unknown field \"x\""), "{warn:?}");
    let cm = get_json(&s, 33, &["cm", "dup"]);
    assert_eq!(cm["data"], serde_json::json!({"a": "2"}));
    assert!(cm.get("x").is_none());
}
