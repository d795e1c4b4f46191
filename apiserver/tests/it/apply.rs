//! Server-side apply with real kubectl (1.33 and 1.27): field ownership
//! between managers, conflicts and force, removal of fields a manager stops
//! declaring, no-op applies, Update managers of other verbs, the move from
//! client-side apply, custom resources with list-type maps, and `diff
//! --server-side` (issue 20).

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{curl_admin, json, kubectl_path, Out, Server};

/// `kubectl apply --server-side` of `yaml` as `manager`, with `extra` flags.
fn ssa(s: &Server, minor: u32, manager: &str, yaml: &str, extra: &[&str]) -> Out {
    let mut args = vec!["apply", "--server-side", "--field-manager", manager, "-f", "-"];
    args.extend_from_slice(extra);
    s.kubectl_stdin(minor, &args, Some(yaml))
}

fn get(s: &Server, minor: u32, what: &str) -> Value {
    json(&s.kubectl(minor, &["get", what, "-o", "json", "--show-managed-fields"]))
}

/// The managedFields entries as (manager, operation, subresource).
fn managers(obj: &Value) -> Vec<(String, String, String)> {
    let s = |e: &Value, k: &str| e[k].as_str().unwrap_or("").to_string();
    obj["metadata"]["managedFields"].as_array().into_iter().flatten().map(|e| (s(e, "manager"), s(e, "operation"), s(e, "subresource"))).collect()
}

/// The FieldsV1 of `manager`'s entry with `operation`.
fn fields_of<'a>(obj: &'a Value, manager: &str, operation: &str) -> &'a Value {
    obj["metadata"]["managedFields"].as_array().into_iter().flatten().find(|e| e["manager"] == manager && e["operation"] == operation).map(|e| &e["fieldsV1"]).unwrap_or(&Value::Null)
}

fn deployment(name: &str, body: &str) -> String {
    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n{body}")
}

fn full(name: &str, labels: &str, replicas: u32, image: &str) -> String {
    deployment(
        name,
        &format!(
            "{labels}spec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n"
        ),
    )
}

fn suite(s: &Server, minor: u32) {
    let name = format!("web-{minor}");
    let dep = format!("deployment/{name}");
    let a_config = full(&name, "  labels:\n    tier: web\n", 2, "nginx:1.25");

    // A creates by apply: one Apply entry with exactly what it declared.
    let out = ssa(s, minor, "a", &a_config, &[]);
    assert_eq!(out.ok().trim(), format!("deployment.apps/{name} serverside-applied"));
    let obj = get(s, minor, &dep);
    assert_eq!(managers(&obj), [("a".to_string(), "Apply".to_string(), String::new())], "{obj}");
    let f = fields_of(&obj, "a", "Apply");
    assert_eq!(f["f:spec"]["f:replicas"], serde_json::json!({}), "{f}");
    assert_eq!(f["f:metadata"]["f:labels"]["f:tier"], serde_json::json!({}), "{f}");
    assert_eq!(f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]["."], serde_json::json!({}), "{f}");
    // Defaults the server filled in belong to nobody.
    assert!(f["f:spec"].get("f:strategy").is_none(), "{f}");

    // B changes a field A owns: 409 naming A and the path.
    let b_replicas = deployment(&name, "spec:\n  replicas: 3\n");
    let out = ssa(s, minor, "b", &b_replicas, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"), "{out:?}");
    assert_eq!(s.kubectl(minor, &["get", &dep, "-o", "jsonpath={.spec.replicas}"]).ok(), "2");

    // Forced, the field moves to B.
    let out = ssa(s, minor, "b", &b_replicas, &["--force-conflicts"]);
    assert_eq!(out.ok().trim(), format!("deployment.apps/{name} serverside-applied"));
    let obj = get(s, minor, &dep);
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(fields_of(&obj, "b", "Apply")["f:spec"]["f:replicas"], serde_json::json!({}), "{obj}");
    assert!(fields_of(&obj, "a", "Apply")["f:spec"].get("f:replicas").is_none(), "{obj}");

    // A stops declaring its label and replicas: the label goes; replicas,
    // owned by B, stays.
    let a_config = full(&name, "", 2, "nginx:1.25").replace("  replicas: 2\n", "");
    let out = ssa(s, minor, "a", &a_config, &[]);
    assert_eq!(out.ok().trim(), format!("deployment.apps/{name} serverside-applied"));
    let obj = get(s, minor, &dep);
    assert!(obj["metadata"]["labels"].get("tier").is_none(), "{obj}");
    assert_eq!(obj["spec"]["replicas"], 3);

    // Two managers, one container each, in one list.
    let sidecar = deployment(&name, "spec:\n  template:\n    spec:\n      containers:\n      - name: sidecar\n        image: busybox:1.36\n");
    let out = ssa(s, minor, "c", &sidecar, &[]);
    assert_eq!(out.ok().trim(), format!("deployment.apps/{name} serverside-applied"));
    let obj = get(s, minor, &dep);
    let names: Vec<&str> = obj["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["main", "sidecar"], "{obj}");
    let containers = |m: &str| fields_of(&obj, m, "Apply")["f:spec"]["f:template"]["f:spec"]["f:containers"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(containers("a"), ["k:{\"name\":\"main\"}"], "{obj}");
    assert_eq!(containers("c"), ["k:{\"name\":\"sidecar\"}"], "{obj}");
    // A re-applies: the sidecar stays; a no-op keeps the resourceVersion.
    let rv = obj["metadata"]["resourceVersion"].clone();
    ssa(s, minor, "a", &a_config, &[]).ok();
    let obj = get(s, minor, &dep);
    assert_eq!(obj["metadata"]["resourceVersion"], rv, "a no-op apply wrote: {obj}");
    assert_eq!(obj["spec"]["template"]["spec"]["containers"].as_array().unwrap().len(), 2);
    // C drops its container: it goes.
    ssa(s, minor, "c", &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  annotations:\n    owner: c\n"), &[]).ok();
    let obj = get(s, minor, &dep);
    let names: Vec<&str> = obj["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["main"], "{obj}");

    // Other verbs are Update managers.
    s.kubectl(minor, &["label", &dep, "team=x"]).ok();
    s.kubectl(minor, &["scale", &dep, "--replicas=4"]).ok();
    let mut edit = Command::new(kubectl_path(minor));
    edit.arg("--kubeconfig").arg(s.kubeconfig()).args(["edit", &dep]);
    edit.env("KUBE_EDITOR", "sed -i -e s/owner:\\ c/owner:\\ edited/");
    let o = edit.stdin(Stdio::null()).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let obj = get(s, minor, &dep);
    assert_eq!(obj["metadata"]["annotations"]["owner"], "edited", "{obj}");
    let ms = managers(&obj);
    for want in [("kubectl-label", ""), ("kubectl-edit", "")] {
        assert!(ms.iter().any(|(m, op, sub)| m == want.0 && op == "Update" && sub == want.1), "{want:?} not in {ms:?}");
    }
    assert!(ms.iter().any(|(_, op, sub)| op == "Update" && sub == "scale"), "no scale manager in {ms:?}");
    // Editing C's annotation took it from C.
    assert!(fields_of(&obj, "c", "Apply").is_null() || fields_of(&obj, "c", "Apply")["f:metadata"]["f:annotations"].get("f:owner").is_none(), "{obj}");

    // `diff --server-side` shows a change and writes nothing.
    let changed = full(&name, "", 2, "nginx:1.26").replace("  replicas: 2\n", "");
    let file = s.dir.path().join(format!("diff-{minor}.yaml"));
    std::fs::write(&file, &changed).unwrap();
    let rv = get(s, minor, &dep)["metadata"]["resourceVersion"].clone();
    let diff = s.kubectl(minor, &["diff", "--server-side", "--field-manager", "a", "-f", file.to_str().unwrap()]);
    assert_eq!(diff.code, 1, "{diff:?}");
    assert!(diff.stdout.contains("-      - image: nginx:1.25") && diff.stdout.contains("+      - image: nginx:1.26"), "{diff:?}");
    let obj = get(s, minor, &dep);
    assert_eq!(obj["metadata"]["resourceVersion"], rv);
    assert_eq!(obj["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.25");

    s.kubectl(minor, &["delete", &dep]).ok();
}

/// Client-side apply, then server-side apply of the same file, then a
/// change through server-side apply: no conflicts, the client-side manager's
/// fields move to `kubectl`, and the last-applied annotation follows.
fn from_client_side(s: &Server, minor: u32) {
    let name = format!("csa-{minor}");
    let dep = format!("deployment/{name}");
    let v1 = full(&name, "", 1, "nginx:1.25");
    assert_eq!(s.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&v1)).ok().trim(), format!("deployment.apps/{name} created"));
    let obj = get(s, minor, &dep);
    assert!(managers(&obj).iter().any(|(m, op, _)| m == "kubectl-client-side-apply" && op == "Update"), "{obj}");
    let annotation = "kubectl.kubernetes.io/last-applied-configuration";
    assert!(obj["metadata"]["annotations"][annotation].is_string(), "{obj}");

    let out = s.kubectl_stdin(minor, &["apply", "--server-side", "-f", "-"], Some(&v1));
    assert_eq!(out.ok().trim(), format!("deployment.apps/{name} serverside-applied"));
    let obj = get(s, minor, &dep);
    let ms = managers(&obj);
    assert!(ms.iter().any(|(m, op, _)| m == "kubectl" && op == "Apply"), "{ms:?}");
    assert!(!ms.iter().any(|(m, _, _)| m == "kubectl-client-side-apply"), "client-side apply's fields were not upgraded: {ms:?}");

    let v2 = full(&name, "", 1, "nginx:1.26");
    let out = s.kubectl_stdin(minor, &["apply", "--server-side", "-f", "-"], Some(&v2));
    assert_eq!(out.ok().trim(), format!("deployment.apps/{name} serverside-applied"), "{out:?}");
    let obj = get(s, minor, &dep);
    assert_eq!(obj["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26");
    let last: Value = serde_json::from_str(obj["metadata"]["annotations"][annotation].as_str().unwrap()).unwrap();
    assert_eq!(last["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26", "the annotation did not follow: {last}");
    // Client-side apply of the same file again changes no field (the
    // annotation's text may be rewritten in kubectl's own encoding, which
    // kubectl reports as "configured").
    let again = s.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&v2));
    assert!(again.code == 0, "{again:?}");
    let after = get(s, minor, &dep);
    assert_eq!(after["spec"], obj["spec"], "client-side apply changed fields");
    s.kubectl(minor, &["delete", &dep]).ok();
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: shelves.ssa.example.com
spec:
  group: ssa.example.com
  scope: Namespaced
  names: {plural: shelves, singular: shelf, kind: Shelf}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              books:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [title]
                items:
                  type: object
                  required: [title]
                  properties:
                    title: {type: string}
                    copies: {type: integer}
"#;

fn shelf(name: &str, books: &str) -> String {
    format!("apiVersion: ssa.example.com/v1\nkind: Shelf\nmetadata:\n  name: {name}\nspec:\n  books:\n{books}")
}

fn custom_resource(s: &Server, minor: u32) {
    let name = format!("shelf-{minor}");
    let what = format!("shelves/{name}");
    ssa(s, minor, "alice", &shelf(&name, "  - title: dune\n    copies: 1\n"), &[]).ok();
    ssa(s, minor, "bob", &shelf(&name, "  - title: emma\n    copies: 2\n"), &[]).ok();
    let obj = get(s, minor, &what);
    let titles: Vec<&str> = obj["spec"]["books"].as_array().unwrap().iter().map(|b| b["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["dune", "emma"], "{obj}");
    let out = ssa(s, minor, "bob", &shelf(&name, "  - title: dune\n    copies: 5\n"), &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Apply failed with 1 conflict: conflict with \"alice\": .spec.books[title=\"dune\"].copies"), "{out:?}");
    // Bob's apply without emma, forced onto dune's copies.
    ssa(s, minor, "bob", &shelf(&name, "  - title: dune\n    copies: 5\n"), &["--force-conflicts"]).ok();
    let obj = get(s, minor, &what);
    assert_eq!(obj["spec"]["books"], serde_json::json!([{"title": "dune", "copies": 5}]), "{obj}");
    s.kubectl(minor, &["delete", &what]).ok();
}

#[test]
fn server_side_apply_with_kubectl() {
    let s = Server::start();
    s.kubectl_stdin(33, &["apply", "--server-side", "-f", "-"], Some(CRD)).ok();
    s.kubectl(33, &["wait", "--for=condition=Established", "crd/shelves.ssa.example.com", "--timeout=60s"]).ok();
    for minor in [33, 27] {
        suite(&s, minor);
        from_client_side(&s, minor);
        custom_resource(&s, minor);
    }
}

/// A manager's fields are its apiVersion's: A applies the CPU target
/// through autoscaling/v1, B the same target through autoscaling/v2's
/// `spec.metrics` with another value, and gets A's conflict (found on the
/// objects converted to v1, in v1's path); forced, the field leaves A.
#[test]
fn hpa_conflicts_across_versions() {
    let s = Server::start();
    let a = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: h\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  maxReplicas: 5\n  targetCPUUtilizationPercentage: 60\n";
    assert_eq!(ssa(&s, 33, "a", a, &[]).ok().trim(), "horizontalpodautoscaler.autoscaling/h serverside-applied");
    let b = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: h\nspec:\n  metrics:\n  - type: Resource\n    resource:\n      name: cpu\n      target:\n        type: Utilization\n        averageUtilization: 80\n";
    let out = ssa(&s, 33, "b", b, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Apply failed with 1 conflict: conflict with \"a\": .spec.targetCPUUtilizationPercentage"), "{out:?}");
    let v1 = json(&s.kubectl(33, &["get", "--raw", "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/h"]));
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60, "{v1}");

    // Forced: B's value, and A keeps only what B did not take.
    ssa(&s, 33, "b", b, &["--force-conflicts"]).ok();
    let obj = json(&s.kubectl(33, &["get", "--raw", "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/h"]));
    assert_eq!(obj["spec"]["targetCPUUtilizationPercentage"], 80, "{obj}");
    let fa = fields_of(&obj, "a", "Apply");
    assert!(fa["f:spec"].get("f:targetCPUUtilizationPercentage").is_none(), "{obj}");
    assert_eq!(fa["f:spec"]["f:maxReplicas"], serde_json::json!({}), "{obj}");
    assert_eq!(fields_of(&obj, "b", "Apply")["f:spec"]["f:metrics"], serde_json::json!({}), "{obj}");

    // One manager moving its manifest from v1 to v2: the CPU target it
    // declared through v1 and no longer declares goes (v2's default
    // metric, 80%, takes its place), found by pruning in v1.
    let h2 = a.replace("name: h\n", "name: h2\n");
    ssa(&s, 33, "m", &h2, &[]).ok();
    let v2 =
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: h2\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  maxReplicas: 5\n";
    ssa(&s, 33, "m", v2, &[]).ok();
    let obj = json(&s.kubectl(33, &["get", "--raw", "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/h2"]));
    assert_eq!(obj["spec"]["targetCPUUtilizationPercentage"], 80, "{obj}");
    let mf = obj["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!((mf.len(), &mf[0]["apiVersion"]), (1, &serde_json::json!("autoscaling/v2")), "{obj}");
}

/// An apply that would create an object under another name than the URL's,
/// or with a uid, is refused as kube's apply patcher refuses it, and
/// nothing is stored.
#[test]
fn apply_checks_name_and_uid_on_create() {
    let s = Server::start();
    let path = "/api/v1/namespaces/default/configmaps/cm9?fieldManager=m";
    let send = |body: &str| curl_admin(&s, path, &["-X", "PATCH", "-H", "Content-Type: application/apply-patch+yaml", "-d", body]);
    let renamed = send(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}"#);
    assert!(renamed.starts_with("HTTP/2 400") || renamed.starts_with("HTTP/1.1 400"), "{renamed}");
    assert!(renamed.contains("the name of the object (other) does not match the name on the URL (cm9)"), "{renamed}");
    let with_uid = send(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm9","uid":"1234"}}"#);
    assert!(with_uid.contains("uid mismatch: the provided object specified uid 1234, and no existing object was found"), "{with_uid}");
    assert!(with_uid.contains("\"code\":409"), "{with_uid}");
    let gone = s.kubectl(33, &["get", "cm", "cm9", "other"]);
    assert!(!gone.stderr.is_empty() && gone.stdout.is_empty(), "something was stored: {gone:?}");
    let created = send(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm9"},"data":{"a":"1"}}"#);
    assert!(created.contains("\"name\":\"cm9\""), "{created}");
}

/// kube's managedFields reset and untracked objects: `[]` or `[{}]` from
/// a client stops tracking, later updates record nothing, and the next
/// apply first gives the object's fields to `before-first-apply`, whose
/// changed fields conflict. A client's own list is kept when it decodes,
/// dropped when it does not, and refused (422) when it names a manager
/// kube's validation refuses.
fn reset_and_rewrite(s: &Server, minor: u32) {
    let name = format!("r-{minor}");
    let cm = format!("configmap/{name}");
    s.kubectl(minor, &["create", "configmap", &name, "--from-literal=a=1", "--from-literal=b=1"]).ok();
    assert_eq!(managers(&get(s, minor, &cm)), [("kubectl-create".to_string(), "Update".to_string(), String::new())]);

    for reset in [r#"{"metadata":{"managedFields":[]}}"#, r#"{"metadata":{"managedFields":[{}]}}"#] {
        s.kubectl(minor, &["patch", &cm, "--type=merge", "-p", reset]).ok();
        let obj = get(s, minor, &cm);
        assert!(obj["metadata"].get("managedFields").is_none(), "{reset}: {obj}");
    }
    // Untracked: a label records no manager.
    s.kubectl(minor, &["label", &cm, "x=y"]).ok();
    let obj = get(s, minor, &cm);
    assert!(obj["metadata"].get("managedFields").is_none(), "{obj}");

    // The first apply meets the object's fields under before-first-apply.
    let config = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: \"2\"\n");
    let out = ssa(s, minor, "m", &config, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"), "{out:?}");
    ssa(s, minor, "m", &config, &["--force-conflicts"]).ok();
    let obj = get(s, minor, &cm);
    let want = [("m".to_string(), "Apply".to_string(), String::new()), ("before-first-apply".to_string(), "Update".to_string(), String::new())];
    assert_eq!(managers(&obj), want, "{obj}");
    let before = fields_of(&obj, "before-first-apply", "Update");
    assert!(before["f:data"].get("f:b").is_some() && before["f:data"].get("f:a").is_none(), "{obj}");
    assert_eq!(before["f:metadata"]["f:labels"]["f:x"], serde_json::json!({}), "{obj}");
    // Tracked again: a label is an Update manager.
    s.kubectl(minor, &["label", &cm, "z=w"]).ok();
    assert!(managers(&get(s, minor, &cm)).iter().any(|(m, o, _)| m.starts_with("kubectl") && o == "Update"));

    // A well-formed list written by the client is kept as written.
    let mut entries = get(s, minor, &cm)["metadata"]["managedFields"].clone();
    entries[0]["manager"] = "renamed".into();
    let patch = serde_json::json!({"metadata": {"managedFields": entries}}).to_string();
    s.kubectl(minor, &["patch", &cm, "--type=merge", "-p", &patch]).ok();
    let obj = get(s, minor, &cm);
    assert_eq!(obj["metadata"]["managedFields"][0]["manager"], "renamed", "{obj}");

    // One malformed entry: the stored list stays.
    let mut bad = entries.clone();
    bad[1]["operation"] = "Bogus".into();
    let patch = serde_json::json!({"metadata": {"managedFields": bad}, "data": {"c": "1"}}).to_string();
    s.kubectl(minor, &["patch", &cm, "--type=merge", "-p", &patch]).ok();
    let after = get(s, minor, &cm);
    assert!(managers(&after).iter().all(|(_, o, _)| o == "Apply" || o == "Update"), "{after}");
    assert_eq!(after["metadata"]["managedFields"][0]["manager"], "renamed", "{after}");

    // A manager name kube's validation refuses: 422, nothing written.
    let mut long = entries.clone();
    long[0]["manager"] = "m".repeat(129).into();
    let patch = serde_json::json!({"metadata": {"managedFields": long}}).to_string();
    let out = s.kubectl(minor, &["patch", &cm, "--type=merge", "-p", &patch]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains(&format!("The ConfigMap \"{name}\" is invalid: metadata.managedFields[0].manager: Too long: may not be more than 128 bytes")), "{out:?}");
    assert_eq!(get(s, minor, &cm)["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]);
}

#[test]
fn managed_fields_reset_and_rewritten_by_clients() {
    let s = Server::start();
    // The system namespaces are tracked as kube-apiserver made them, so a
    // label on them is recorded.
    let ns = get(&s, 33, "namespace/default");
    assert_eq!(managers(&ns), [("kube-apiserver".to_string(), "Update".to_string(), String::new())], "{ns}");
    s.kubectl(33, &["label", "namespace", "default", "team=a"]).ok();
    assert_eq!(managers(&get(&s, 33, "namespace/default")).len(), 2);
    for minor in [33, 27] {
        reset_and_rewrite(&s, minor);
    }
}

/// Keys given twice in an apply configuration keep their last value and
/// are reported per fieldValidation, after the merge, as kube's apply
/// patcher reports them: Strict 400 (a conflict comes first), Warn a
/// warning per key, Ignore nothing.
#[test]
fn apply_duplicate_keys_per_field_validation() {
    let s = Server::start();
    let send = |name: &str, query: &str, body: &str| {
        let path = format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=m{query}");
        curl_admin(&s, &path, &["-X", "PATCH", "-H", "Content-Type: application/apply-patch+yaml", "--data-binary", body])
    };
    let json_body = |name: &str| format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"a":"1","a":"2"}}}}"#);

    let strict = send("d1", "&fieldValidation=Strict", &json_body("d1"));
    assert!(strict.starts_with("HTTP/2 400"), "{strict}");
    let msg = r#""message":"error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 1: key \"a\" already set in map""#;
    assert!(strict.contains(msg), "{strict}");
    assert!(!s.kubectl(33, &["get", "cm", "d1"]).stderr.is_empty(), "a strict failure stored the object");

    let warned = send("d1", "", &json_body("d1"));
    assert!(warned.starts_with("HTTP/2 201"), "{warned}");
    assert!(warned.to_lowercase().contains(r#"warning: 299 - "line 1: key \"a\" already set in map""#), "{warned}");
    assert_eq!(json(&s.kubectl(33, &["get", "cm", "d1", "-o", "json"]))["data"]["a"], "2");

    let ignored = send("d2", "&fieldValidation=Ignore", &json_body("d2"));
    assert!(ignored.starts_with("HTTP/2 201") && !ignored.to_lowercase().contains("warning:"), "{ignored}");

    // YAML: the line of each repeated key.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d3\n  labels:\n    x: a\n    x: b\ndata:\n  k: v\n  k: w\n";
    let warned = send("d3", "&fieldValidation=Warn", yaml);
    let lower = warned.to_lowercase();
    assert!(lower.contains(r#"warning: 299 - "line 7: key \"x\" already set in map""#) && lower.contains(r#"warning: 299 - "line 10: key \"k\" already set in map""#), "{warned}");

    // A conflict is reported before the strict decoding error.
    let other = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d1"},"data":{"a":"9","a":"8"}}"#;
    let path = "/api/v1/namespaces/default/configmaps/d1?fieldManager=other&fieldValidation=Strict";
    let conflict = curl_admin(&s, path, &["-X", "PATCH", "-H", "Content-Type: application/apply-patch+yaml", "--data-binary", other]);
    assert!(conflict.starts_with("HTTP/2 409") && conflict.contains(r#"conflict with \"m\": .data.a"#), "{conflict}");
}

/// What kube's Go types make of an object, through apply and create alike:
/// null fields of built-in kinds are dropped (and then defaulted), a null
/// string in a string map is `""`; an apply that creates must name the
/// object; a client-written entry that owns nothing is dropped; a scalar
/// body is Go's type error; pods get their pod-only defaults.
#[test]
fn apply_and_create_decode_as_kubes_types() {
    let s = Server::start();
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: NAME\nspec:\n  replicas: null\n  selector:\n    matchLabels: {app: dn}\n  template:\n    metadata:\n      labels: {app: dn}\n    spec:\n      containers:\n      - {name: c, image: x, env: null, resources: null, args: null}\n";
    ssa(&s, 33, "m", &dep.replace("NAME", "applied"), &[]).ok();
    s.kubectl_stdin(33, &["create", "-f", "-"], Some(&dep.replace("NAME", "created"))).ok();
    for name in ["applied", "created"] {
        let obj = json(&s.kubectl(33, &["get", "deployment", name, "-o", "json"]));
        assert_eq!(obj["spec"]["replicas"], 1, "{obj}");
        let c = &obj["spec"]["template"]["spec"]["containers"][0];
        assert!(c.get("env").is_none() && c.get("args").is_none() && c["resources"] == serde_json::json!({}), "{obj}");
    }
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cmnull\n  labels:\n    a: null\ndata:\n  empty:\n";
    ssa(&s, 33, "m", cm, &[]).ok();
    let obj = json(&s.kubectl(33, &["get", "cm", "cmnull", "-o", "json"]));
    assert_eq!((&obj["data"]["empty"], &obj["metadata"]["labels"]["a"]), (&serde_json::json!(""), &serde_json::json!("")), "{obj}");

    // A creating apply whose configuration names nothing.
    let send = |name: &str, body: &str| {
        let path = format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=m");
        curl_admin(&s, &path, &["-X", "PATCH", "-H", "Content-Type: application/apply-patch+yaml", "--data-binary", body])
    };
    let unnamed = send("x2", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\ndata: {a: b}\n");
    assert!(unnamed.starts_with("HTTP/2 400") && unnamed.contains("the name of the object (x2 based on URL) was undeterminable: name must be provided"), "{unnamed}");
    let generated = send("gen-", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: gen-}\n");
    assert!(generated.contains("the name of the object (gen- based on URL) was undeterminable: name must be provided"), "{generated}");
    // On an existing object the name comes from it.
    assert!(send("cmnull", "apiVersion: v1\nkind: ConfigMap\ndata: {b: c}\n").starts_with("HTTP/2 200"));
    for (body, got) in [("42", "number"), ("true", "bool"), ("\"hello\"", "string"), ("[1]", "array")] {
        let out = send("x3", body);
        assert!(out.contains(&format!("json: cannot unmarshal {got} into Go value of type map[string]interface {{}}")), "{body}: {out}");
    }

    // Client-written entries that own nothing go with the write.
    s.kubectl(33, &["create", "cm", "em", "--from-literal=a=1"]).ok();
    let patch = r#"{"metadata":{"managedFields":[{"manager":"keep","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}},{"manager":"empty","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{}},{"manager":"dot","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{".":{}}}]}}"#;
    s.kubectl(33, &["patch", "cm", "em", "--type=merge", "-p", patch]).ok();
    let names: Vec<String> = managers(&get(&s, 33, "configmap/em")).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(names, ["keep"]);

    // Pods: enableServiceLinks, and the deprecated serviceAccount beside
    // the name the ServiceAccount plugin fills.
    s.kubectl(33, &["run", "p", "--image=nginx"]).ok();
    let pod = json(&s.kubectl(33, &["get", "pod", "p", "-o", "json"]));
    assert_eq!(
        (&pod["spec"]["enableServiceLinks"], &pod["spec"]["serviceAccount"], &pod["spec"]["serviceAccountName"]),
        (&serde_json::json!(true), &serde_json::json!("default"), &serde_json::json!("default")),
        "{pod}"
    );
}
