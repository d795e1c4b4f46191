//! Audit logging as kube-apiserver does it, through real kubectl 1.33: a
//! server with `--audit-policy-file` and `--audit-log-path`, one request
//! of each kind, and the events in the log checked line by line (an
//! `audit.k8s.io/v1` Event each, with the fields and stages the policy's
//! level asks for), the authorization decision and reason, the
//! impersonated user, failed authentication, the `Audit-Id` header, and
//! rotation of the log with a tiny `--audit-log-maxsize`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{curl_admin, kubectl_path, Out, Server};

const BOB_TOKEN: &str = "bob-audit-0123456789";
const ADMIN: &str = "kubernetes-admin";

/// One namespace per level; `quiet` is never recorded, anything the
/// rules do not name neither.
const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/readyz*", "/healthz*", "/livez*", "/openapi*", "/api*"]
- level: None
  namespaces: ["quiet"]
- level: RequestResponse
  namespaces: ["rr"]
  resources:
  - group: ""
    resources: ["configmaps"]
  omitManagedFields: true
- level: Request
  namespaces: ["req"]
  resources:
  - group: ""
    resources: ["configmaps"]
  omitStages: ["RequestReceived"]
- level: Metadata
  namespaces: ["meta"]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods"]
- level: Metadata
  nonResourceURLs: ["/version"]
"#;

/// The verbs kube's audit events carry for resource requests.
const RESOURCE_VERBS: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

/// Every line of the log files in `paths`, parsed.
fn read_events(paths: &[PathBuf]) -> Vec<Value> {
    let mut out = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", p.display()));
            out.push(v);
        }
    }
    out
}

/// Waits until `done` holds for the events of `log` (the writer is on its
/// own thread), and returns them.
#[track_caller]
fn wait_events(log: &Path, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = read_events(&[log.to_path_buf()]);
        if done(&events) {
            return events;
        }
        assert!(Instant::now() < deadline, "{what}: not in the audit log after 20s:\n{}", events.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn is_micro_time(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    let b = s.as_bytes();
    s.len() == 27 && b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && b[26] == b'Z' && s[20..26].bytes().all(|c| c.is_ascii_digit())
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12] && parts.iter().all(|p| p.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// Checks that `e` is an `audit.k8s.io/v1` Event with kube's field types.
#[track_caller]
fn check_event(e: &Value) {
    let ctx = e.to_string();
    assert_eq!((&e["kind"], &e["apiVersion"]), (&json!("Event"), &json!("audit.k8s.io/v1")), "{ctx}");
    assert!(matches!(e["level"].as_str(), Some("Metadata" | "Request" | "RequestResponse")), "{ctx}");
    assert!(is_uuid(e["auditID"].as_str().unwrap_or("")), "auditID: {ctx}");
    assert!(matches!(e["stage"].as_str(), Some("RequestReceived" | "ResponseStarted" | "ResponseComplete" | "Panic")), "{ctx}");
    assert!(e["requestURI"].as_str().is_some_and(|u| u.starts_with('/')), "{ctx}");
    let verb = e["verb"].as_str().unwrap_or("");
    if e.get("objectRef").is_some() {
        assert!(RESOURCE_VERBS.contains(&verb), "verb: {ctx}");
        let r = &e["objectRef"];
        assert!(r["resource"].is_string() && r["apiVersion"].is_string(), "{ctx}");
        for f in ["namespace", "name", "uid", "apiGroup", "resourceVersion", "subresource"] {
            assert!(r.get(f).is_none() || r[f].as_str().is_some_and(|s| !s.is_empty()), "objectRef.{f}: {ctx}");
        }
    } else {
        assert_eq!(verb, "get", "{ctx}");
    }
    assert!(e["user"].is_object(), "{ctx}");
    for u in [&e["user"], &e["impersonatedUser"]] {
        assert!(u.get("username").is_none_or(Value::is_string) && u.get("groups").is_none_or(|g| g.as_array().is_some_and(|a| a.iter().all(Value::is_string))), "{ctx}");
    }
    assert!(e["sourceIPs"].as_array().is_some_and(|a| a.iter().any(|ip| ip == "127.0.0.1")), "sourceIPs: {ctx}");
    assert!(e["userAgent"].is_string(), "{ctx}");
    assert!(is_micro_time(&e["requestReceivedTimestamp"]) && is_micro_time(&e["stageTimestamp"]), "timestamps: {ctx}");
    assert!(e["stageTimestamp"].as_str() >= e["requestReceivedTimestamp"].as_str(), "{ctx}");
    if e["stage"] == "RequestReceived" {
        assert!(e.get("responseStatus").is_none() && e.get("annotations").is_none(), "{ctx}");
    } else {
        let s = &e["responseStatus"];
        assert_eq!(s["metadata"], json!({}), "{ctx}");
        assert!(s["code"].as_u64().is_some_and(|c| (200..600).contains(&c)), "{ctx}");
    }
    if let Some(a) = e.get("annotations") {
        assert!(a.as_object().is_some_and(|m| m.values().all(Value::is_string)), "{ctx}");
    }
    if e["level"] == "Metadata" {
        assert!(e.get("requestObject").is_none() && e.get("responseObject").is_none(), "no bodies at Metadata: {ctx}");
    }
    if e["level"] == "Request" {
        assert!(e.get("responseObject").is_none(), "no response at Request: {ctx}");
    }
}

/// The events of the admin's first `verb` request on ConfigMaps in `ns`
/// (kubectl gets an object before it patches or deletes it), in log order.
fn of<'a>(events: &'a [Value], ns: &str, verb: &str) -> Vec<&'a Value> {
    let all: Vec<&Value> = events.iter().filter(|e| e["objectRef"]["namespace"] == ns && e["objectRef"]["resource"] == "configmaps" && e["verb"] == verb && e["user"]["username"] == ADMIN).collect();
    let Some(first) = all.first().map(|e| e["auditID"].clone()) else { return all };
    all.into_iter().filter(|e| e["auditID"] == first).collect()
}

fn stages(events: &[&Value]) -> Vec<String> {
    events.iter().map(|e| e["stage"].as_str().unwrap_or("").to_string()).collect()
}

/// A kubeconfig for bob's token, trusting the server's CA.
fn bob_kubeconfig(s: &Server) -> PathBuf {
    let path = s.dir.path().join("bob.kubeconfig");
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: bob\n  user:\n    token: {BOB_TOKEN}\ncontexts:\n- name: bob\n  context:\n    cluster: c\n    user: bob\ncurrent-context: bob\n",
        s.url,
        s.ca().display()
    );
    std::fs::write(&path, cfg).unwrap();
    path
}

fn kubectl_as(s: &Server, kubeconfig: &Path, args: &[&str]) -> Out {
    let o = Command::new(kubectl_path(33)).arg("--kubeconfig").arg(kubeconfig).arg("--cache-dir").arg(s.dir.path().join("kubectl-cache-bob")).args(args).output().expect("run kubectl");
    Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

/// The lifecycle of a ConfigMap `c1` in `ns`: create, get, list, patch,
/// update, a watch the server ends after a second, delete.
fn configmap_requests(s: &Server, ns: &str) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "1"}}).to_string();
    assert_eq!(s.kubectl_stdin(33, &["create", "-n", ns, "-f", "-"], Some(&cm)).ok().trim(), "configmap/c1 created");
    let got: Value = serde_json::from_str(s.kubectl(33, &["get", "cm", "c1", "-n", ns, "-o", "json"]).ok()).unwrap();
    s.kubectl(33, &["get", "cm", "-n", ns]).ok();
    s.kubectl(33, &["patch", "cm", "c1", "-n", ns, "--type", "merge", "-p", r#"{"data":{"b":"2"}}"#]).ok();
    let mut current: Value = serde_json::from_str(s.kubectl(33, &["get", "cm", "c1", "-n", ns, "-o", "json"]).ok()).unwrap();
    current["data"]["c"] = json!("3");
    assert_eq!(s.kubectl_stdin(33, &["replace", "-f", "-"], Some(&current.to_string())).ok().trim(), "configmap/c1 replaced");
    let watched = s.kubectl(33, &["get", "--raw", &format!("/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=1")]);
    assert!(watched.ok().contains("\"ADDED\""), "{watched:?}");
    assert_eq!(s.kubectl(33, &["delete", "cm", "c1", "-n", ns]).ok().trim(), "configmap \"c1\" deleted");
    assert_eq!(got["data"]["a"], "1");
}

#[test]
fn audit_log_records_each_request_at_its_level() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let tokens = files.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{BOB_TOKEN},bob,2001\n")).unwrap();
    let log = files.path().join("logs/audit.log");
    let s = Server::start_with(&[
        "--authorization-mode=RBAC".to_string(),
        format!("--token-auth-file={}", tokens.display()),
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
    ]);
    for ns in ["meta", "req", "rr", "quiet"] {
        s.kubectl(33, &["create", "ns", ns]).ok();
    }
    for ns in ["rr", "req", "meta", "quiet"] {
        configmap_requests(&s, ns);
    }
    // RBAC: bob may read ConfigMaps in meta, and nothing else.
    s.kubectl(33, &["create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps", "-n", "meta"]).ok();
    s.kubectl(33, &["create", "rolebinding", "bob-reads", "--role=cm-reader", "--user=bob", "-n", "meta"]).ok();
    let bob = bob_kubeconfig(&s);
    let forbidden = kubectl_as(&s, &bob, &["get", "pods", "-n", "meta"]);
    assert_eq!(forbidden.code, 1, "{forbidden:?}");
    assert!(forbidden.stderr.contains(r#"User "bob" cannot list resource "pods""#), "{forbidden:?}");
    kubectl_as(&s, &bob, &["get", "cm", "-n", "meta"]).ok();
    s.kubectl(33, &["version", "-o", "json"]).ok();
    // Impersonation: allowed (bob's RoleBinding) and refused (alice has none).
    s.kubectl(33, &["get", "cm", "-n", "meta", "--as", "bob"]).ok();
    assert_eq!(s.kubectl(33, &["get", "cm", "-n", "meta", "--as", "alice"]).code, 1);
    // Failed authentication.
    let out = Command::new("curl")
        .args(["-s", "-i", "--cacert"])
        .arg(s.ca())
        .args(["-H", "Authorization: Bearer nope"])
        .arg(format!("https://{}/api/v1/namespaces/meta/configmaps", s.host_port()))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("HTTP/2 401"), "{out:?}");
    // The Audit-Id header names the request's events.
    let resp = curl_admin(&s, "/api/v1/namespaces/meta/configmaps?limit=7", &[]);
    let audit_id = resp.lines().find_map(|l| l.strip_prefix("audit-id: ")).map(|v| v.trim().to_string()).unwrap_or_else(|| panic!("no audit-id header: {resp}"));
    assert!(is_uuid(&audit_id), "{audit_id}");
    // And a request without an audit record still gets one.
    let quiet = curl_admin(&s, "/api/v1/namespaces/quiet/configmaps", &[]);
    assert!(quiet.lines().any(|l| l.starts_with("audit-id: ")), "{quiet}");

    let events = wait_events(&log, "the last request", |evs| evs.iter().any(|e| e["auditID"] == audit_id.as_str() && e["stage"] == "ResponseComplete"));
    for e in &events {
        check_event(e);
    }
    let by_id: Vec<&Value> = events.iter().filter(|e| e["auditID"] == audit_id.as_str()).collect();
    assert_eq!(stages(&by_id), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(by_id[0]["requestURI"], "/api/v1/namespaces/meta/configmaps?limit=7");
    assert_eq!(by_id[0]["userAgent"], json!(format!("curl/{}", by_id[0]["userAgent"].as_str().unwrap_or("").trim_start_matches("curl/"))));

    // None: nothing at all.
    assert!(!events.iter().any(|e| e["objectRef"]["namespace"] == "quiet" || e["requestURI"].as_str().is_some_and(|u| u.starts_with("/readyz") || u.starts_with("/openapi"))));
    // Requests the policy does not name are not recorded either.
    assert!(!events.iter().any(|e| e["objectRef"]["resource"] == "namespaces" && e["verb"] == "create"));

    // RequestResponse: both bodies (no managedFields), every stage.
    for (verb, code) in [("create", 201), ("get", 200), ("list", 200), ("patch", 200), ("update", 200), ("delete", 200)] {
        let evs = of(&events, "rr", verb);
        assert_eq!(stages(&evs), ["RequestReceived", "ResponseComplete"], "rr {verb}");
        let done = evs[1];
        assert_eq!(done["level"], "RequestResponse");
        if verb != "delete" {
            assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": code}), "rr {verb}");
        }
        assert!(done["responseObject"].is_object(), "rr {verb}: {done}");
        assert!(done["responseObject"]["metadata"].get("managedFields").is_none(), "rr {verb}: {done}");
        assert_eq!(done["annotations"], json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}), "rr {verb}");
        assert!(evs[0].get("requestObject").is_none());
    }
    let create = of(&events, "rr", "create")[1];
    assert_eq!(create["requestObject"]["data"], json!({"a": "1"}));
    assert_eq!(create["responseObject"]["metadata"]["name"], "c1");
    assert_eq!(create["objectRef"]["name"], "c1", "the name comes from the request object");
    assert_eq!(of(&events, "rr", "patch")[1]["requestObject"], json!({"data": {"b": "2"}}));
    let update = of(&events, "rr", "update")[1];
    assert_eq!(update["requestObject"]["data"], json!({"a": "1", "b": "2", "c": "3"}));
    assert!(update["objectRef"]["uid"].is_string() && update["objectRef"]["resourceVersion"].is_string(), "{update}");
    assert!(of(&events, "rr", "get")[1].get("requestObject").is_none());
    // A delete answers a Status, whose fields the record takes at any level.
    for ns in ["rr", "meta"] {
        let delete = &of(&events, ns, "delete")[1]["responseStatus"];
        assert_eq!(
            (&delete["status"], &delete["code"], &delete["details"]["name"], &delete["details"]["kind"]),
            (&json!("Success"), &json!(200), &json!("c1"), &json!("configmaps")),
            "{ns}: {delete}"
        );
    }
    // A watch: ResponseStarted when the stream starts, no response object.
    let watch = of(&events, "rr", "watch");
    assert_eq!(stages(&watch), ["RequestReceived", "ResponseStarted", "ResponseComplete"]);
    assert_eq!(watch[1]["responseStatus"]["code"], 200);
    assert!(watch.iter().all(|e| e.get("responseObject").is_none()));

    // Request: the request object only, and RequestReceived omitted.
    for verb in ["create", "get", "list", "patch", "update", "delete"] {
        let evs = of(&events, "req", verb);
        assert_eq!(stages(&evs), ["ResponseComplete"], "req {verb}");
        assert_eq!(evs[0]["level"], "Request");
    }
    assert_eq!(of(&events, "req", "create")[0]["requestObject"]["metadata"]["name"], "c1");
    assert_eq!(of(&events, "req", "patch")[0]["requestObject"], json!({"data": {"b": "2"}}));
    assert_eq!(stages(&of(&events, "req", "watch")), ["ResponseStarted", "ResponseComplete"]);

    // Metadata: no bodies.
    for verb in ["create", "get", "list", "patch", "update", "delete", "watch"] {
        let evs = of(&events, "meta", verb);
        assert!(evs.len() >= 2 && evs.iter().all(|e| e["level"] == "Metadata"), "meta {verb}: {evs:?}");
    }
    assert_eq!(of(&events, "meta", "create")[1]["objectRef"], json!({"resource": "configmaps", "namespace": "meta", "name": "c1", "apiVersion": "v1"}));

    // Forbidden by RBAC: the decision, kube's Status, the token user.
    let denied: Vec<&Value> = events.iter().filter(|e| e["user"]["username"] == "bob" && e["objectRef"]["resource"] == "pods").collect();
    assert_eq!(stages(&denied), ["RequestReceived", "ResponseComplete"]);
    let d = denied[1];
    assert_eq!(d["user"], json!({"username": "bob", "uid": "2001", "groups": ["system:authenticated"]}));
    assert_eq!(d["annotations"], json!({"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""}));
    assert_eq!(
        d["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"\" in the namespace \"meta\"", "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
    );
    // Allowed by RBAC: the binding in the reason.
    let allowed = events.iter().find(|e| e["user"]["username"] == "bob" && e["objectRef"]["resource"] == "configmaps" && e["verb"] == "list" && e["stage"] == "ResponseComplete").expect("bob's list");
    assert_eq!(allowed["annotations"]["authorization.k8s.io/reason"], r#"RBAC: allowed by RoleBinding "bob-reads/meta" of Role "cm-reader" to User "bob""#);
    assert_eq!(allowed["annotations"]["authorization.k8s.io/decision"], "allow");

    // A non-resource request.
    let version: Vec<&Value> = events.iter().filter(|e| e["requestURI"].as_str().is_some_and(|u| u == "/version" || u.starts_with("/version?"))).collect();
    assert_eq!(stages(&version), ["RequestReceived", "ResponseComplete"]);
    assert!(version.iter().all(|e| e["verb"] == "get" && e.get("objectRef").is_none() && e["level"] == "Metadata"));

    // Impersonation: the sender is the user, the impersonated user beside it.
    let as_bob = events.iter().find(|e| e["impersonatedUser"]["username"] == "bob" && e["stage"] == "ResponseComplete").expect("impersonating bob");
    assert_eq!(as_bob["user"]["username"], ADMIN);
    assert_eq!(as_bob["impersonatedUser"], json!({"username": "bob", "groups": ["system:authenticated"]}));
    assert_eq!(as_bob["annotations"]["authorization.k8s.io/decision"], "allow");
    assert!(as_bob["annotations"]["authorization.k8s.io/reason"].as_str().is_some_and(|r| r.contains(r#"to User "bob""#)), "{as_bob}");
    let as_alice = events.iter().find(|e| e["impersonatedUser"]["username"] == "alice" && e["stage"] == "ResponseComplete").expect("impersonating alice");
    assert_eq!((&as_alice["user"]["username"], &as_alice["annotations"]["authorization.k8s.io/decision"]), (&json!(ADMIN), &json!("forbid")));
    assert_eq!(as_alice["responseStatus"]["code"], 403);

    // Failed authentication: one ResponseStarted event without a user.
    let failed: Vec<&Value> = events.iter().filter(|e| e["responseStatus"]["code"] == 401).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!((&failed[0]["stage"], &failed[0]["user"], &failed[0]["verb"]), (&json!("ResponseStarted"), &json!({}), &json!("list")));
    assert_eq!(failed[0]["responseStatus"], json!({"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401}));
}

#[test]
fn audit_log_rotates_and_keeps_max_backups() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: RequestResponse\n  namespaces: [default]\n  resources:\n  - group: \"\"\n    resources: [configmaps]\n",
    )
    .unwrap();
    let log = files.path().join("audit.log");
    let s = Server::start_with(&[
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-mode=batch".to_string(),
        "--audit-log-maxsize=1".to_string(),
        "--audit-log-maxbackup=2".to_string(),
    ]);
    // Each create is recorded with its request and response, ~600 KB: one
    // event per 1 MB file.
    let big = "x".repeat(300 * 1024);
    for i in 0..6 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{i}")}, "data": {"a": big}}).to_string();
        let file = files.path().join("cm.json");
        std::fs::write(&file, cm).unwrap();
        assert_eq!(s.kubectl(33, &["create", "--validate=false", "-f", file.to_str().unwrap()]).ok().trim(), format!("configmap/big-{i} created"));
        // Backup names carry milliseconds.
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_events(&log, "the last create", |evs| evs.iter().any(|e| e["objectRef"]["name"] == "big-5"));
    let backups: Vec<PathBuf> = std::fs::read_dir(files.path()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("audit-"))).collect();
    assert_eq!(backups.len(), 2, "{backups:?}");
    for b in &backups {
        let name = b.file_name().unwrap().to_string_lossy().into_owned();
        // audit-2006-01-02T15-04-05.000.log
        assert!(name.len() == "audit-2006-01-02T15-04-05.000.log".len() && name.ends_with(".log") && &name[16..17] == "T", "{name}");
        assert!(std::fs::metadata(b).unwrap().len() <= 1024 * 1024);
    }
    let mut all = backups.clone();
    all.push(log.clone());
    let events = read_events(&all);
    for e in &events {
        check_event(e);
        assert_eq!(e["stage"], "ResponseComplete", "the policy omits RequestReceived");
    }
    let names: Vec<&str> = events.iter().filter_map(|e| e["objectRef"]["name"].as_str()).collect();
    assert_eq!(names.len(), 3, "two backups and the current file, one create each: {names:?}");
    assert!(names.iter().all(|n| ["big-3", "big-4", "big-5"].contains(n)), "{names:?}");
}

#[test]
fn bad_policy_files_stop_the_start_with_kubes_error() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- users: [a]\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(files.path().join("data"))
        .arg(format!("--audit-policy-file={}", policy.display()))
        .arg(format!("--audit-log-path={}", files.path().join("audit.log").display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("loading audit policy file: rules[0].level: Required value: from file {}", policy.display())), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(files.path().join("data"))
        .args(["--audit-log-path=-", "--audit-log-mode=later"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(r#"invalid audit log mode later, allowed modes are "batch,blocking,blocking-strict""#), "{out:?}");
}

/// `--audit-webhook-config-file`: the events go, as `audit.k8s.io/v1`
/// `EventList`s, to an HTTPS server a kubeconfig names (the test runs it),
/// with the kubeconfig's credentials; the log backend gets the same events.
#[test]
fn audit_webhook_receives_event_lists() {
    use std::sync::{Arc, Mutex};

    use crate::oidc::{webhook_kubeconfig, HttpsServer, Pki};

    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources:\n  - group: \"\"\n    resources: [\"configmaps\"]\n")
        .unwrap();
    let received: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let sink = received.clone();
    let pki = Arc::new(Pki::new());
    let hook = HttpsServer::start(
        0,
        pki.clone(),
        Arc::new(move |_method: &str, _path: &str, auth: &str, body: &[u8]| {
            let list: Value = serde_json::from_slice(body).unwrap_or_default();
            sink.lock().unwrap().push((auth.to_string(), list));
            (200, json!({}))
        }),
    );
    let cfg = webhook_kubeconfig(files.path(), "audit", &hook.url, &pki.ca_file);
    let log = files.path().join("audit.log");
    let s = Server::start_with(&[format!("--audit-policy-file={}", policy.display()), format!("--audit-webhook-config-file={}", cfg.display()), format!("--audit-log-path={}", log.display())]);
    s.kubectl(33, &["create", "configmap", "hooked", "--from-literal=k=v"]).ok();
    s.kubectl(27, &["get", "configmap", "hooked"]).ok();
    let deadline = Instant::now() + Duration::from_secs(20);
    let events = loop {
        let got: Vec<(String, Value)> = received.lock().unwrap().clone();
        let events: Vec<Value> = got.iter().flat_map(|(_, l)| l["items"].as_array().cloned().unwrap_or_default()).collect();
        let seen = |verb: &str| events.iter().any(|e| e["verb"] == verb && e["objectRef"]["name"] == "hooked" && e["stage"] == "ResponseComplete");
        if seen("create") && seen("get") {
            for (auth, list) in &got {
                assert_eq!(auth, "Bearer apiserver-secret");
                assert_eq!((&list["kind"], &list["apiVersion"]), (&json!("EventList"), &json!("audit.k8s.io/v1")), "{list}");
            }
            break events;
        }
        assert!(Instant::now() < deadline, "the webhook never got both events: {got:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for e in &events {
        check_event(e);
        assert_eq!(e["level"], "Metadata");
        assert_ne!(e["stage"], "RequestReceived", "omitted stage sent: {e}");
    }
    // The log backend saw the same requests.
    let logged = wait_events(&log, "the create in the log", |ev| ev.iter().any(|e| e["verb"] == "create" && e["objectRef"]["name"] == "hooked"));
    let id = |list: &[Value]| list.iter().find(|e| e["verb"] == "create" && e["objectRef"]["name"] == "hooked").map(|e| e["auditID"].clone());
    assert_eq!(id(&logged), id(&events));
}
