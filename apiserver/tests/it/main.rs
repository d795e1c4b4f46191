//! End-to-end tests: the real `apiserver` binary driven by real kubectl
//! binaries (`kubectl.1.33`, `kubectl.1.27`), asserting on output and exit
//! codes as kubectl's own CLI tests do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err, missing_docs)]

mod admission_builtins;
mod admission_decode;
mod admission_order;
mod admission_policies;
mod admission_scale;
mod admission_webhooks;
mod apply;
mod audit;
mod authz;
mod cluster;
mod common;
mod connections;
mod crd;
mod crd_cel;
mod crd_scale;
mod deploy;
mod dynamic;
mod etcd_tls;
mod kube_client;
mod layers;
mod listwatch;
mod migration;
mod oidc;
mod openapi;
mod pod_security;
mod python;
mod rbac;
mod resources;
mod review;
mod service_accounts;
mod shutdown;
mod start_order;
mod storage;
mod store;
mod writes;

use std::time::Duration;

use common::{curl_admin, fixtures, raw_https, Server};

const CM: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME
  labels:
    app: web
data:
  a: \"1\"
";

/// The ConfigMap lifecycle: create from a file, get in every output form,
/// list by label, merge patch, replace with a stale resourceVersion, delete.
fn configmap_lifecycle(s: &Server, minor: u32) {
    let name = format!("demo-{minor}");
    let file = s.dir.path().join(format!("{name}.yaml"));
    std::fs::write(&file, CM.replace("NAME", &name)).unwrap();
    let file = file.to_str().unwrap();

    let out = s.kubectl(minor, &["create", "--validate=false", "-f", file]);
    assert_eq!(out.ok().trim(), format!("configmap/{name} created"));
    let again = s.kubectl(minor, &["create", "--validate=false", "-f", file]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains(&format!("configmaps \"{name}\" already exists")), "{again:?}");

    let json: serde_json::Value = serde_json::from_str(s.kubectl(minor, &["get", "cm", &name, "-o", "json"]).ok()).unwrap();
    assert_eq!(json["data"]["a"], "1");
    assert_eq!(json["metadata"]["namespace"], "default");
    assert!(json["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(json["metadata"]["creationTimestamp"].is_string());
    let rv = json["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(rv.parse::<i64>().unwrap() > 0);

    assert_eq!(s.kubectl(minor, &["get", "cm", &name, "-o", "name"]).ok().trim(), format!("configmap/{name}"));
    let table = s.kubectl(minor, &["get", "cm", &name]);
    let lines: Vec<&str> = table.ok().lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["NAME", "DATA", "AGE"], "{table:?}");
    assert_eq!(lines[1].split_whitespace().take(2).collect::<Vec<_>>(), [name.as_str(), "1"]);

    let by_label = s.kubectl(minor, &["get", "cm", "-l", "app=web", "-o", "name"]);
    assert!(by_label.ok().lines().any(|l| l == format!("configmap/{name}")), "{by_label:?}");
    let none = s.kubectl(minor, &["get", "cm", "-l", "app=db", "-o", "name"]);
    assert_eq!(none.ok().trim(), "");

    let patched = s.kubectl(minor, &["patch", "cm", &name, "--type", "merge", "-p", r#"{"data":{"b":"2"}}"#]);
    assert_eq!(patched.ok().trim(), format!("configmap/{name} patched"));
    let after: serde_json::Value = serde_json::from_str(s.kubectl(minor, &["get", "cm", &name, "-o", "json"]).ok()).unwrap();
    assert_eq!(after["data"], serde_json::json!({"a": "1", "b": "2"}));
    assert_ne!(after["metadata"]["resourceVersion"].as_str().unwrap(), rv);

    // Replace with the first resourceVersion, now stale.
    let stale = s.dir.path().join(format!("{name}-stale.json"));
    std::fs::write(&stale, serde_json::to_string(&json).unwrap()).unwrap();
    let conflict = s.kubectl(minor, &["replace", "--validate=false", "-f", stale.to_str().unwrap()]);
    assert_eq!(conflict.code, 1, "{conflict:?}");
    assert!(
        conflict.stderr.contains(&format!("Operation cannot be fulfilled on configmaps \"{name}\": the object has been modified; please apply your changes to the latest version and try again")),
        "{conflict:?}"
    );

    let deleted = s.kubectl(minor, &["delete", "cm", &name]);
    assert_eq!(deleted.ok().trim(), format!("configmap \"{name}\" deleted"));
    let gone = s.kubectl(minor, &["get", "cm", &name]);
    assert_eq!(gone.code, 1);
    assert!(gone.stderr.contains(&format!("configmaps \"{name}\" not found")), "{gone:?}");
}

#[test]
fn kubectl_end_to_end() {
    let s = Server::start();

    // Table-driven over kubectl versions.
    for minor in [33, 27] {
        configmap_lifecycle(&s, minor);
    }

    // Version and discovery.
    let v = s.kubectl(33, &["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(v.ok()).unwrap();
    assert_eq!(v["serverVersion"]["minor"], "33");
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.33.0");
    let ar = s.kubectl(33, &["api-resources", "--no-headers"]);
    assert!(ar.ok().lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["deployments", "deploy", "apps/v1", "true", "Deployment"]), "{ar:?}");
    let ns = s.kubectl(33, &["get", "ns", "-o", "name"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(ns.ok().lines().any(|l| l == format!("namespace/{n}")), "{ns:?}");
    }

    // The first thing a user does: apply a Deployment.
    let nginx = fixtures().join("nginx-deployment.yaml");
    let applied = s.kubectl(33, &["apply", "--validate=false", "-f", nginx.to_str().unwrap()]);
    assert_eq!(applied.ok().trim(), "deployment.apps/nginx created");
    let deploys = s.kubectl(33, &["get", "deployments"]);
    let lines: Vec<Vec<&str>> = deploys.ok().lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_eq!(lines[1][..4], ["nginx", "0/1", "0", "0"]);
    let d: serde_json::Value = serde_json::from_str(s.kubectl(27, &["get", "deploy", "nginx", "-o", "json"]).ok()).unwrap();
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");

    // Validation: the selector must match the template labels.
    let bad = fixtures().join("deployment-selector-mismatch.yaml");
    let rejected = s.kubectl(33, &["apply", "--validate=false", "-f", bad.to_str().unwrap()]);
    assert_eq!(rejected.code, 1);
    assert!(
        rejected
            .stderr
            .contains("The Deployment \"broken-selector\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"two\"}: `selector` does not match template `labels`"),
        "{rejected:?}"
    );

    // Namespaced creates need the namespace.
    let missing = s.kubectl_stdin(33, &["create", "--validate=false", "-n", "nope", "-f", "-"], Some(&CM.replace("NAME", "x")));
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("namespaces \"nope\" not found"), "{missing:?}");
}

#[test]
fn watch_sees_added_modified_deleted() {
    let s = Server::start();
    // Table-driven over kubectl versions; each round's object is gone before
    // the next round's watcher starts.
    for minor in [33, 27] {
        let name = format!("w{minor}");
        let w = s.kubectl_spawn(minor, &["get", "cm", "-w", "--output-watch-events"]);
        std::thread::sleep(Duration::from_millis(1500));
        s.kubectl_stdin(minor, &["create", "--validate=false", "-f", "-"], Some(&CM.replace("NAME", &name))).ok();
        s.kubectl(minor, &["label", "cm", &name, "x=y"]).ok();
        s.kubectl(minor, &["delete", "cm", &name]).ok();
        std::thread::sleep(Duration::from_millis(1000));
        let (mut events, out) = crate::common::stop_watch(w);
        // The root CA ConfigMap every namespace gets.
        events.retain(|(_, n)| n != "kube-root-ca.crt");
        let want: Vec<(String, String)> = ["ADDED", "MODIFIED", "DELETED"].iter().map(|e| (e.to_string(), name.clone())).collect();
        assert_eq!(events, want, "kubectl 1.{minor}: {out}");
    }
}

#[test]
fn requests_without_credentials_get_401() {
    let s = Server::start();
    let resp = raw_https(&s, "GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert!(resp.starts_with("HTTP/1.1 401"), "{resp}");
    assert!(resp.contains(r#""reason":"Unauthorized""#) && resp.contains(r#""message":"Unauthorized""#), "{resp}");
    // Health and version stay public, as kube's system:public-info-viewer.
    let health = raw_https(&s, "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    // Malformed bodies are a 400 Status, never a crash.
    let bad = s.dir.path().join("bad.json");
    std::fs::write(&bad, "{\"kind\": \"ConfigMap\", ").unwrap();
    let out = s.kubectl(33, &["create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", bad.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Error from server (BadRequest)"), "{out:?}");
    assert!(s.kubectl(33, &["get", "--raw", "/readyz"]).ok().contains("ok"));
}

/// An object the store refuses as too large (etcd's 1.5 MiB request limit)
/// is a 413 RequestEntityTooLarge Status, as kube-apiserver answers, not a
/// 500.
#[test]
fn object_over_the_store_limit_is_413() {
    let s = Server::start();
    let big = s.dir.path().join("big.json");
    let value = "x".repeat(2 * 1024 * 1024);
    // A kind without ConfigMap's 1 MiB payload check (422), so the store's
    // own limit is what refuses it.
    std::fs::write(&big, format!(r#"{{"apiVersion":"v1","kind":"PodTemplate","metadata":{{"name":"big"}},"template":{{"spec":{{"containers":[{{"name":"c","image":"i","args":["{value}"]}}]}}}}}}"#))
        .unwrap();
    let out = s.kubectl(33, &["create", "--raw", "/api/v1/namespaces/default/podtemplates", "-f", big.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("RequestEntityTooLarge") || out.stderr.contains("Request entity too large"), "{out:?}");
    assert!(!out.stderr.contains("InternalError"), "{out:?}");
}

/// `Accept: application/yaml` gets the object as YAML (kube serves JSON and
/// YAML); JSON stays the default.
#[test]
fn yaml_responses_on_request() {
    let s = Server::start();
    let path = "/api/v1/namespaces/default";
    let curl = |accept: &str| curl_admin(&s, path, &["-H", &format!("Accept: {accept}")]);
    let yaml = curl("application/yaml");
    assert!(yaml.to_ascii_lowercase().contains("content-type: application/yaml"), "{yaml}");
    assert!(yaml.contains("kind: Namespace"), "{yaml}");
    assert!(yaml.contains("name: default"), "{yaml}");
    let json = curl("application/json");
    assert!(json.to_ascii_lowercase().contains("content-type: application/json"), "{json}");
    assert!(json.contains(r#""kind":"Namespace""#), "{json}");
}

/// A YAML request body is accepted like JSON; malformed YAML is a 400.
#[test]
fn yaml_request_bodies() {
    let s = Server::start();
    let path = "/api/v1/namespaces/default/configmaps";
    let post = |body: &str| curl_admin(&s, path, &["-H", "Content-Type: application/yaml", "--data-binary", body]);
    let created = post("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: \"1\"\n");
    assert!(created.starts_with("HTTP/2 201") || created.starts_with("HTTP/1.1 201"), "{created}");
    let got = s.kubectl(33, &["get", "cm", "from-yaml", "-o", "jsonpath={.data.a}"]);
    assert_eq!(got.ok(), "1");
    let bad = post("apiVersion: v1\nkind: [unclosed\n");
    assert!(bad.starts_with("HTTP/2 400") || bad.starts_with("HTTP/1.1 400"), "{bad}");
}

/// Namespace lifecycle (Kubernetes NamespaceLifecycle and the namespace
/// controller): deleting a namespace removes its objects; while it is
/// terminating, new objects are refused with 403; it goes once its
/// finalizers are gone.
#[test]
fn namespace_deletion_removes_objects_and_refuses_new_ones() {
    let s = Server::start();
    let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"doomed","finalizers":["example.com/hold"]}}"#;
    s.kubectl_stdin(33, &["create", "-f", "-"], Some(ns)).ok();
    s.kubectl_stdin(33, &["create", "--validate=false", "-n", "doomed", "-f", "-"], Some(&CM.replace("NAME", "inside"))).ok();
    assert_eq!(s.kubectl(33, &["delete", "ns", "doomed", "--wait=false"]).ok().trim(), "namespace \"doomed\" deleted");
    let refused = s.kubectl_stdin(33, &["create", "--validate=false", "-n", "doomed", "-f", "-"], Some(&CM.replace("NAME", "late")));
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("unable to create new content in namespace doomed because it is being terminated"), "{refused:?}");
    // The namespace controller empties it.
    let mut left = String::from("?");
    for _ in 0..50 {
        left = s.kubectl(33, &["get", "cm", "-n", "doomed", "-o", "name"]).stdout;
        if left.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(left.trim(), "", "objects left in a terminating namespace");
    assert_eq!(s.kubectl(33, &["get", "ns", "doomed", "-o", "jsonpath={.status.phase}"]).ok(), "Terminating");
    // Dropping the last finalizer lets it go.
    s.kubectl(33, &["patch", "ns", "doomed", "--type", "merge", "-p", r#"{"metadata":{"finalizers":null}}"#]).ok();
    let mut gone = None;
    for _ in 0..50 {
        let out = s.kubectl(33, &["get", "ns", "doomed"]);
        if out.code == 1 {
            gone = Some(out);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let gone = gone.expect("namespace still there after its finalizers were removed");
    assert!(gone.stderr.contains("namespaces \"doomed\" not found"), "{gone:?}");
}
