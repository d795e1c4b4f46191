//! Admission webhooks as kube-apiserver calls them, through real kubectl
//! (1.33 and 1.27): the test is the webhook, an HTTPS server in-process
//! whose CA goes in each configuration's `caBundle`. It answers
//! AdmissionReviews by path and logs every review it gets, so the tests
//! assert both what the client sees and what the webhooks were sent:
//!
//! - the shared fixture (`webhook-configurations.yaml`): a label added to
//!   pods by JSON Patch, privileged containers denied (plain, init and
//!   ephemeral), warnings on kubectl's stderr, the calls in the audit log;
//! - reinvocation of an `IfNeeded` webhook after a later webhook changed
//!   what it looks at;
//! - timeouts under Fail and Ignore, a wrong response uid, a refused
//!   connection, each with kube's message;
//! - `--dry-run=server` (only webhooks without side effects), reads (no
//!   webhook at all);
//! - a webhook reached through a Service and its EndpointSlice.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::https::{AsyncHandler, HttpsServer, Pki, Request};
use crate::common::{fixtures, Out, Server};

/// One review a webhook got.
#[derive(Debug, Clone)]
struct Call {
    path: String,
    uid: String,
    operation: String,
    name: String,
    namespace: String,
    sub_resource: String,
    dry_run: bool,
    /// The whole `request`.
    request: Value,
}

/// Every review the webhooks got, in order.
#[derive(Default, Clone)]
struct Log(Arc<Mutex<Vec<Call>>>);

impl Log {
    fn calls(&self) -> Vec<Call> {
        self.0.lock().unwrap().clone()
    }

    /// Calls of `path` about the object `name`.
    fn count(&self, path: &str, name: &str) -> usize {
        self.calls().iter().filter(|c| c.path == path && c.name == name).count()
    }

    /// Calls about anything in `namespace`.
    fn in_namespace(&self, namespace: &str) -> usize {
        self.calls().iter().filter(|c| c.namespace == namespace).count()
    }
}

/// A JSON Patch answer.
fn patched(ops: Value) -> Value {
    json!({"patchType": "JSONPatch", "patch": base64::engine::general_purpose::STANDARD.encode(ops.to_string())})
}

/// The JSON Patch operation setting `metadata.<field>.<key>`, creating the
/// map when the object has none.
fn set_meta(obj: &Value, field: &str, key: &str, value: &str) -> Value {
    if obj["metadata"][field].is_object() {
        json!({"op": "add", "path": format!("/metadata/{field}/{}", key.replace('~', "~0").replace('/', "~1")), "value": value})
    } else {
        json!({"op": "add", "path": format!("/metadata/{field}"), "value": {key: value}})
    }
}

/// The first privileged container of a pod, worded for the denial.
fn privileged(pod: &Value) -> Option<String> {
    for (field, what) in [("containers", "container"), ("initContainers", "init container"), ("ephemeralContainers", "ephemeral container")] {
        for c in pod["spec"][field].as_array().into_iter().flatten() {
            if c["securityContext"]["privileged"] == true {
                return Some(format!("privileged {what} {:?} is not allowed", c["name"].as_str().unwrap_or_default()));
            }
        }
    }
    None
}

/// The webhooks, by path.
async fn answer(path: &str, review: &Value) -> (u16, Value) {
    let req = &review["request"];
    let uid = req["uid"].clone();
    let obj = &req["object"];
    let mut resp = json!({"uid": uid, "allowed": true});
    let merge = |resp: &mut Value, extra: Value| {
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            resp[k] = v;
        }
    };
    match path {
        // The fixture's pod-labeler.
        "/mutate" => merge(&mut resp, patched(json!([set_meta(obj, "labels", "webhook-labeled", "true")]))),
        // The fixture's pod-security: no privileged container of any kind;
        // a warning for images without a pinned tag.
        "/validate" => {
            if let Some(why) = privileged(obj) {
                merge(&mut resp, json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": why}}));
            }
            let latest: Vec<Value> = ["containers", "initContainers", "ephemeralContainers"]
                .iter()
                .flat_map(|f| obj["spec"][f].as_array().cloned().unwrap_or_default())
                .filter_map(|c| c["image"].as_str().filter(|i| i.ends_with(":latest")).map(|i| json!(format!("image {i:?} uses the latest tag"))))
                .collect();
            merge(&mut resp, json!({"warnings": latest, "auditAnnotations": {"checked": "pod"}}));
        }
        // Reinvocation: the first webhook records what it saw of the
        // label the second one adds.
        "/first" => {
            let saw = obj["metadata"]["labels"]["second"].as_str().unwrap_or("none");
            merge(&mut resp, patched(json!([set_meta(obj, "annotations", "first-saw", saw)])));
        }
        "/second" => merge(&mut resp, patched(json!([set_meta(obj, "labels", "second", "yes")]))),
        "/slow" => tokio::time::sleep(Duration::from_secs(3)).await,
        "/wrong-uid" => resp["uid"] = json!("not-the-uid"),
        "/warn" => merge(&mut resp, json!({"warnings": ["this is a warning from the webhook"]})),
        "/deny-plainly" => resp["allowed"] = json!(false),
        "/svc" => merge(&mut resp, patched(json!([set_meta(obj, "annotations", "via-service", "yes")]))),
        // Answers kube refuses at different stages: an unknown JSON Patch
        // op (decodes, fails to apply), a non-boolean `allowed` (does not
        // decode), a denial with a code of 600.
        "/frob" => merge(&mut resp, patched(json!([{"op": "frob", "path": "/x"}]))),
        "/allowed-yes" => resp["allowed"] = json!("yes"),
        "/deny-600" => merge(&mut resp, json!({"allowed": false, "status": {"code": 600, "message": "six hundred"}})),
        "/allow" | "/some" | "/sentinel" => {}
        _ => return (404, json!({"kind": "Status", "message": "no such webhook"})),
    }
    (200, json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}))
}

/// An HTTPS webhook server with the certificate of `pki` logging to `log`.
fn webhooks(pki: Arc<Pki>, log: Log) -> HttpsServer {
    let handler: AsyncHandler = Arc::new(move |req: Request| {
        let log = log.clone();
        Box::pin(async move {
            let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let r = &review["request"];
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            log.0.lock().unwrap().push(Call {
                path: req.path.clone(),
                uid: s(&r["uid"]),
                operation: s(&r["operation"]),
                name: s(&r["name"]),
                namespace: s(&r["namespace"]),
                sub_resource: s(&r["subResource"]),
                dry_run: r["dryRun"] == true,
                request: r.clone(),
            });
            answer(&req.path, &review).await
        })
    });
    HttpsServer::start_async(0, pki, handler)
}

/// Fills in a configuration template: `URL` (the webhook server's base
/// URL) and `CA_BUNDLE` (its CA, base64).
fn fill(template: &str, server: &HttpsServer) -> String {
    template.replace("URL", &server.url).replace("CA_BUNDLE", &base64::engine::general_purpose::STANDARD.encode(&server.pki.ca_pem))
}

/// Waits until `done` holds, trying `attempt` before each look.
#[track_caller]
fn wait_for(what: &str, mut attempt: impl FnMut(), done: impl Fn() -> bool) {
    for _ in 0..150 {
        attempt();
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("never happened: {what}");
}

/// Sentinel webhooks in configurations named after all others: once the
/// server calls both, it has seen every configuration applied before them.
const SENTINELS: &str = "---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: zz-sentinel
webhooks:
- name: sentinel-m.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/sentinel, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {probe: sentinel}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: zz-sentinel
webhooks:
- name: sentinel-v.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/sentinel, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {probe: sentinel}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
";

/// Applies `yaml` then the sentinels, and waits until the server calls
/// the sentinels (both kinds of configuration are in its copies).
fn apply_and_wait(s: &Server, hooks: &HttpsServer, log: &Log, yaml: &str) {
    let file = s.dir.path().join(format!("hooks-{}.yaml", log.calls().len()));
    std::fs::write(&file, format!("{}\n{}", fill(yaml, hooks), fill(SENTINELS, hooks))).unwrap();
    s.kubectl(33, &["apply", "-f", file.to_str().unwrap()]).ok();
    let probe = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe-sentinel\n  labels: {probe: sentinel}\n";
    wait_for(
        "the sentinel webhooks are called",
        || {
            s.kubectl_stdin(33, &["create", "--dry-run=server", "-f", "-"], Some(probe));
        },
        || {
            let c = log.calls();
            c.iter().filter(|c| c.path == "/sentinel").count() >= 2
        },
    );
}

fn create(s: &Server, minor: u32, namespace: &str, yaml: &str) -> Out {
    s.kubectl_stdin(minor, &["create", "-n", namespace, "-f", "-"], Some(yaml))
}

fn configmap(name: &str, labels: &[(&str, &str)]) -> String {
    let labels: String = labels.iter().map(|(k, v)| format!("    {k}: {v:?}\n")).collect();
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n{labels}    test: \"yes\"\ndata:\n  a: \"1\"\n")
}

fn pod(name: &str, container: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{container}")
}

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Request
  resources: [{group: '', resources: [pods]}]
- level: None
";

/// The fixture: pods in `default` get the label by JSON Patch (shown by
/// `kubectl get`), privileged containers are refused whether plain, init
/// or ephemeral (`kubectl debug --profile=sysadmin` with 1.33, a PUT of
/// `pods/ephemeralcontainers` with 1.27), the validating webhook's
/// warnings reach kubectl's stderr, and the audit log records each call as
/// kube records it.
#[test]
fn fixture_labels_pods_and_denies_privileged_containers() {
    let log = Log::default();
    let hooks = webhooks(Arc::new(Pki::new()), log.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY).unwrap();
    let audit_log = dir.path().join("audit.log");
    let s = Server::start_with(&[format!("--audit-policy-file={}", policy.display()), format!("--audit-log-path={}", audit_log.display())]);
    let fixture = std::fs::read_to_string(fixtures().join("webhook-configurations.yaml")).unwrap();
    let port = hooks.url.rsplit(':').next().unwrap().to_string();
    let ca = base64::engine::general_purpose::STANDARD.encode(&hooks.pki.ca_pem);
    apply_and_wait(&s, &hooks, &log, &fixture.replace("PORT", &port).replace("CA_BUNDLE", &ca));

    let plain = "  containers:\n  - name: app\n    image: nginx:latest\n";
    let privileged_app = "  containers:\n  - name: app\n    image: nginx:1.27\n    securityContext:\n      privileged: true\n";
    let privileged_init = "  initContainers:\n  - name: setup\n    image: busybox:1.36\n    securityContext:\n      privileged: true\n  containers:\n  - name: app\n    image: nginx:1.27\n";
    for minor in [33, 27] {
        let name = format!("web-{minor}");
        let out = create(&s, minor, "default", &pod(&name, plain));
        assert_eq!(out.ok().trim(), format!("pod/{name} created"), "kubectl 1.{minor}");
        assert!(out.stderr.contains(r#"Warning: image "nginx:latest" uses the latest tag"#), "kubectl 1.{minor}: {out:?}");
        let shown = s.kubectl(minor, &["get", "pod", &name, "--show-labels", "--no-headers"]);
        assert!(shown.ok().split_whitespace().last().unwrap_or_default().split(',').any(|l| l == "webhook-labeled=true"), "kubectl 1.{minor}: {shown:?}");

        for (what, spec, message) in
            [("container", privileged_app, r#"privileged container "app" is not allowed"#), ("init container", privileged_init, r#"privileged init container "setup" is not allowed"#)]
        {
            let out = create(&s, minor, "default", &pod(&format!("bad-{minor}"), spec));
            assert_eq!(out.code, 1, "kubectl 1.{minor}, {what}: {out:?}");
            let want = format!(r#"Error from server (Forbidden): error when creating "STDIN": admission webhook "pod-security.example.com" denied the request: {message}"#);
            assert!(out.stderr.contains(&want), "kubectl 1.{minor}, {what}: {out:?}");
        }

        // Ephemeral containers, through the pods/ephemeralcontainers
        // subresource, which the validating webhook's rules name.
        let ephemeral = |privileged: bool, container: &str| -> Out {
            if minor == 33 {
                let mut args = vec!["debug", name.as_str(), "--image=busybox:1.36", "-c", container];
                if privileged {
                    args.push("--profile=sysadmin");
                }
                s.kubectl(minor, &args)
            } else {
                let mut current: Value = serde_json::from_str(s.kubectl(minor, &["get", "pod", &name, "-o", "json"]).ok()).unwrap();
                let mut c = json!({"name": container, "image": "busybox:1.36"});
                if privileged {
                    c["securityContext"] = json!({"privileged": true});
                }
                current["spec"]["ephemeralContainers"] = json!([c]);
                let file = s.dir.path().join(format!("{container}.json"));
                std::fs::write(&file, current.to_string()).unwrap();
                s.kubectl(minor, &["replace", "--raw", &format!("/api/v1/namespaces/default/pods/{name}/ephemeralcontainers"), "-f", file.to_str().unwrap()])
            }
        };
        let denied = ephemeral(true, "debugger");
        assert_eq!(denied.code, 1, "kubectl 1.{minor}: {denied:?}");
        assert!(
            denied.stderr.contains(r#"admission webhook "pod-security.example.com" denied the request: privileged ephemeral container "debugger" is not allowed"#),
            "kubectl 1.{minor}: {denied:?}"
        );
        let allowed = ephemeral(false, "shell");
        assert_eq!(allowed.code, 0, "kubectl 1.{minor}: {allowed:?}");
        let got: Value = serde_json::from_str(s.kubectl(minor, &["get", "pod", &name, "-o", "json"]).ok()).unwrap();
        let names: Vec<&str> = got["spec"]["ephemeralContainers"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["shell"], "kubectl 1.{minor}");
        let sub = log.calls().into_iter().filter(|c| c.path == "/validate" && c.name == name && c.sub_resource == "ephemeralcontainers").collect::<Vec<_>>();
        assert!(sub.iter().all(|c| c.operation == "UPDATE") && sub.len() == 2, "kubectl 1.{minor}: {sub:?}");
        // What the webhooks were sent: kube's AdmissionRequest fields.
        let created = log.calls().into_iter().find(|c| c.path == "/mutate" && c.name == name).map(|c| c.request).unwrap_or_default();
        assert_eq!(created["kind"], json!({"group": "", "version": "v1", "kind": "Pod"}), "{created}");
        assert_eq!(created["resource"], json!({"group": "", "version": "v1", "resource": "pods"}), "{created}");
        assert_eq!((created["requestKind"] == created["kind"], created["requestResource"] == created["resource"]), (true, true), "{created}");
        assert_eq!((created["namespace"].as_str(), created["operation"].as_str(), created["dryRun"].as_bool()), (Some("default"), Some("CREATE"), Some(false)), "{created}");
        assert_eq!((created["oldObject"].is_null(), created["object"]["metadata"]["name"].as_str()), (true, Some(name.as_str())), "{created}");
        assert_eq!(created["options"]["kind"], "CreateOptions", "{created}");
        assert!(created["userInfo"]["groups"].as_array().is_some_and(|g| g.contains(&json!("system:authenticated"))), "{created}");
        let update = &sub[1].request;
        assert_eq!((update["subResource"].as_str(), update["requestSubResource"].as_str()), (Some("ephemeralcontainers"), Some("ephemeralcontainers")), "{update}");
        assert_eq!(update["oldObject"]["metadata"]["name"].as_str(), Some(name.as_str()), "{update}");
        assert_eq!(update["object"]["spec"]["ephemeralContainers"][0]["name"], "shell", "{update}");
        assert_eq!(update["options"]["kind"], "UpdateOptions", "{update}");
    }
    // The mutating webhook was called once per create (its rules name
    // CREATE only), never for the ephemeral containers' updates.
    assert_eq!(log.count("/mutate", "web-33"), 1);

    // The audit log: the mutating call with its patch, the validating
    // webhook's own annotation under its name.
    let events: Vec<Value> = std::fs::read_to_string(&audit_log).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let created =
        events.iter().find(|e| e["verb"] == "create" && e["objectRef"]["name"] == "web-33" && e["stage"] == "ResponseComplete").unwrap_or_else(|| panic!("no audit event for the create of web-33"));
    let a = &created["annotations"];
    assert_eq!(a["mutation.webhook.admission.k8s.io/round_0_index_0"], r#"{"configuration":"pod-labeler.example.com","webhook":"pod-labeler.example.com","mutated":true}"#, "{a}");
    let patch: Value = serde_json::from_str(a["patch.webhook.admission.k8s.io/round_0_index_0"].as_str().unwrap_or("{}")).unwrap();
    assert_eq!(patch["patchType"], "JSONPatch", "{a}");
    assert_eq!(patch["patch"][0]["path"], "/metadata/labels", "{a}");
    assert_eq!(a["pod-security.example.com/checked"], "pod", "{a}");
}

/// Two mutating webhooks where the second adds the label the first looks
/// at: the first (`reinvocationPolicy: IfNeeded`) is called again after
/// the second changed the object, and its second answer is what is
/// stored; the second (`Never`) is called once.
#[test]
fn if_needed_webhooks_are_reinvoked() {
    let log = Log::default();
    let hooks = webhooks(Arc::new(Pki::new()), log.clone());
    let s = Server::start();
    s.kubectl(33, &["create", "namespace", "reinvoke"]).ok();
    let configs = "
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: a-first
webhooks:
- name: first.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  reinvocationPolicy: IfNeeded
  clientConfig: {url: URL/first, caBundle: CA_BUNDLE}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: reinvoke}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: b-second
webhooks:
- name: second.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/second, caBundle: CA_BUNDLE}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: reinvoke}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
";
    apply_and_wait(&s, &hooks, &log, configs);
    for minor in [33, 27] {
        let name = format!("subject-{minor}");
        create(&s, minor, "reinvoke", &configmap(&name, &[])).ok();
        assert_eq!((log.count("/first", &name), log.count("/second", &name)), (2, 1), "kubectl 1.{minor}: {:?}", log.calls());
        let got: Value = serde_json::from_str(s.kubectl(minor, &["get", "cm", &name, "-n", "reinvoke", "-o", "json"]).ok()).unwrap();
        assert_eq!(got["metadata"]["labels"]["second"], "yes", "kubectl 1.{minor}: {got}");
        assert_eq!(got["metadata"]["annotations"]["first-saw"], "yes", "kubectl 1.{minor}: {got}");
    }
}

const FAILURES: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: failures
webhooks:
- name: slow-fail.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  timeoutSeconds: 1
  failurePolicy: Fail
  clientConfig: {url: URL/slow, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: slow-fail}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: slow-ignore.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  timeoutSeconds: 1
  failurePolicy: Ignore
  clientConfig: {url: URL/slow, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: slow-ignore}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: refused.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: 'https://127.0.0.1:1/refused', caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: refused}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: warn.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/warn, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: warn}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: deny-plainly.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/deny-plainly, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: deny-plainly}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: untrusted.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/allow}
  objectSelector: {matchLabels: {hook: untrusted}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: not-found.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/not-here, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: not-found}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: conditional.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/deny-plainly, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: conditional}}
  matchConditions:
  - {name: creates, expression: \"request.operation == 'CREATE' && request.userInfo.username != ''\"}
  - {name: named, expression: \"object.metadata.name.startsWith('deny-me')\"}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: authz-admin.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/deny-plainly, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: authz-admin}}
  matchConditions: [{name: may-delete, expression: \"authorizer.group('').resource('configmaps').namespace('default').check('delete').allowed()\"}]
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: authz-sa.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/deny-plainly, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: authz-sa}}
  matchConditions: [{name: sa-may-delete, expression: \"authorizer.serviceAccount('default', 'nobody').group('').resource('configmaps').check('delete').allowed()\"}]
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: broken-fail.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/allow, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: broken-fail}}
  matchConditions: [{name: broken, expression: 'object.metadata.nope.x == 1'}]
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: broken-ignore.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: URL/allow, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: broken-ignore}}
  matchConditions: [{name: broken, expression: 'object.metadata.nope.x == 1'}]
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: failures
webhooks:
- name: wrong-uid.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/wrong-uid, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: wrong-uid}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
";

/// Webhooks that fail: too slow for `timeoutSeconds: 1` under Fail (the
/// write fails with kube's message) and under Ignore (it passes); a
/// response with another uid; a refused connection, an untrusted
/// certificate, an error answer; a denial without a
/// status; match conditions that hold, do not, or fail to evaluate; and a
/// webhook's warning on kubectl's stderr.
#[test]
fn failing_webhooks_follow_their_failure_policy() {
    let log = Log::default();
    let hooks = webhooks(Arc::new(Pki::new()), log.clone());
    // RBAC, so that the `authorizer` of match conditions tells users apart.
    let s = Server::start_with(&["--authorization-mode=RBAC".into()]);
    apply_and_wait(&s, &hooks, &log, FAILURES);
    for minor in [33, 27] {
        let out = create(&s, minor, "default", &configmap(&format!("slow-fail-{minor}"), &[("hook", "slow-fail")]));
        assert_eq!(out.code, 1, "kubectl 1.{minor}: {out:?}");
        let want = format!(
            r#"Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling webhook "slow-fail.example.com": failed to call webhook: Post "{}/slow?timeout=1s": context deadline exceeded"#,
            hooks.url
        );
        assert!(out.stderr.contains(&want), "kubectl 1.{minor}: {out:?}");

        let name = format!("slow-ignore-{minor}");
        let out = create(&s, minor, "default", &configmap(&name, &[("hook", "slow-ignore")]));
        assert_eq!(out.ok().trim(), format!("configmap/{name} created"), "kubectl 1.{minor}");
        assert_eq!(log.count("/slow", &name), 1);

        let name = format!("wrong-uid-{minor}");
        let out = create(&s, minor, "default", &configmap(&name, &[("hook", "wrong-uid")]));
        assert_eq!(out.code, 1, "kubectl 1.{minor}: {out:?}");
        let sent = log.calls().into_iter().find(|c| c.path == "/wrong-uid" && c.name == name).map(|c| c.uid).unwrap_or_default();
        assert_eq!(sent.len(), 36, "a fresh uid per review: {sent:?}");
        let want = format!(r#"Internal error occurred: failed calling webhook "wrong-uid.example.com": received invalid webhook response: expected response.uid="{sent}", got "not-the-uid""#);
        assert!(out.stderr.contains(&want), "kubectl 1.{minor}: {out:?}");

        let out = create(&s, minor, "default", &configmap(&format!("refused-{minor}"), &[("hook", "refused")]));
        let want = r#"failed calling webhook "refused.example.com": failed to call webhook: Post "https://127.0.0.1:1/refused?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused"#;
        assert!(out.code == 1 && out.stderr.contains(want), "kubectl 1.{minor}: {out:?}");

        // No caBundle: the test CA is nobody's root.
        let out = create(&s, minor, "default", &configmap(&format!("untrusted-{minor}"), &[("hook", "untrusted")]));
        let want = format!(
            r#"failed calling webhook "untrusted.example.com": failed to call webhook: Post "{}/allow?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority"#,
            hooks.url
        );
        assert!(out.code == 1 && out.stderr.contains(&want), "kubectl 1.{minor}: {out:?}");
        // A 404 whose body is no failure Status: client-go's words.
        let out = create(&s, minor, "default", &configmap(&format!("not-found-{minor}"), &[("hook", "not-found")]));
        let want = r#"failed calling webhook "not-found.example.com": failed to call webhook: the server could not find the requested resource"#;
        assert!(out.code == 1 && out.stderr.contains(want), "kubectl 1.{minor}: {out:?}");

        // No status in a denial: 400 without a reason, and kube's "without
        // explanation".
        let out = create(&s, minor, "default", &configmap(&format!("deny-{minor}"), &[("hook", "deny-plainly")]));
        let want = r#"Error from server: error when creating "STDIN": admission webhook "deny-plainly.example.com" denied the request without explanation"#;
        assert!(out.code == 1 && out.stderr.contains(want), "kubectl 1.{minor}: {out:?}");

        // Match conditions: all true calls the webhook (which denies), one
        // false skips it; one that fails to evaluate follows the failure
        // policy (Fail: 403 with the CEL error; Ignore: skipped).
        let out = create(&s, minor, "default", &configmap(&format!("deny-me-{minor}"), &[("hook", "conditional")]));
        assert!(out.code == 1 && out.stderr.contains(r#"admission webhook "conditional.example.com" denied the request without explanation"#), "kubectl 1.{minor}: {out:?}");
        let name = format!("spared-{minor}");
        create(&s, minor, "default", &configmap(&name, &[("hook", "conditional")])).ok();
        assert_eq!(log.count("/deny-plainly", &name), 0);
        // The authorizer in conditions: the admin may delete configmaps
        // (called, denies); a ServiceAccount without roles may not (skipped).
        let out = create(&s, minor, "default", &configmap(&format!("authz-admin-{minor}"), &[("hook", "authz-admin")]));
        assert!(out.code == 1 && out.stderr.contains(r#"admission webhook "authz-admin.example.com" denied the request without explanation"#), "kubectl 1.{minor}: {out:?}");
        let name = format!("authz-sa-{minor}");
        create(&s, minor, "default", &configmap(&name, &[("hook", "authz-sa")])).ok();
        assert_eq!(log.count("/deny-plainly", &name), 0);
        let name = format!("broken-{minor}");
        let out = create(&s, minor, "default", &configmap(&name, &[("hook", "broken-fail")]));
        let want = format!(r#"Error from server (Forbidden): error when creating "STDIN": configmaps "{name}" is forbidden: expression 'object.metadata.nope.x == 1' resulted in error: "#);
        assert!(out.code == 1 && out.stderr.contains(&want), "kubectl 1.{minor}: {out:?}");
        let name = format!("broken-ignored-{minor}");
        create(&s, minor, "default", &configmap(&name, &[("hook", "broken-ignore")])).ok();
        assert_eq!(log.count("/allow", &name), 0);

        let name = format!("warned-{minor}");
        let out = create(&s, minor, "default", &configmap(&name, &[("hook", "warn")]));
        assert_eq!(out.ok().trim(), format!("configmap/{name} created"));
        assert!(out.stderr.contains("Warning: this is a warning from the webhook"), "kubectl 1.{minor}: {out:?}");
    }
}

const SIDE_EFFECTS: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: side-effects
webhooks:
- name: none.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/allow, caBundle: CA_BUNDLE}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: effects}}
  rules: [{operations: ['*'], apiGroups: [''], apiVersions: [v1], resources: ['*']}]
- name: none-on-dry-run.example.com
  admissionReviewVersions: [v1]
  sideEffects: NoneOnDryRun
  clientConfig: {url: URL/allow, caBundle: CA_BUNDLE}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: effects}}
  rules: [{operations: ['*'], apiGroups: [''], apiVersions: [v1], resources: ['*']}]
";

/// `--dry-run=server` calls the webhooks without side effects, telling
/// them it is a dry run; reads (get, list, watch) call no webhook.
#[test]
fn dry_runs_call_only_webhooks_without_side_effects_and_reads_none() {
    let log = Log::default();
    let hooks = webhooks(Arc::new(Pki::new()), log.clone());
    let s = Server::start();
    s.kubectl(33, &["create", "namespace", "effects"]).ok();
    apply_and_wait(&s, &hooks, &log, SIDE_EFFECTS);
    for minor in [33, 27] {
        let name = format!("dry-{minor}");
        let out = s.kubectl_stdin(minor, &["create", "-n", "effects", "--dry-run=server", "-o", "name", "-f", "-"], Some(&configmap(&name, &[])));
        assert_eq!(out.ok().trim(), format!("configmap/{name}"), "kubectl 1.{minor}");
        let calls: Vec<Call> = log.calls().into_iter().filter(|c| c.name == name).collect();
        assert_eq!(calls.len(), 2, "kubectl 1.{minor}: {calls:?}");
        assert!(calls.iter().all(|c| c.dry_run && c.path == "/allow" && c.operation == "CREATE"), "kubectl 1.{minor}: {calls:?}");
        assert_eq!(s.kubectl(minor, &["get", "cm", &name, "-n", "effects"]).code, 1, "a dry run stores nothing");

        // For real, the webhooks are called without dryRun. (A webhook
        // with `sideEffects: Some`, which dry runs refuse, cannot be
        // created through v1: the configuration is refused.)
        let name = format!("some-{minor}");
        create(&s, minor, "effects", &configmap(&name, &[("hook", "some")])).ok();
        let calls: Vec<Call> = log.calls().into_iter().filter(|c| c.name == name).collect();
        assert!(calls.len() == 2 && calls.iter().all(|c| !c.dry_run), "kubectl 1.{minor}: {calls:?}");
    }

    // Reads: nothing reaches a webhook, whatever the client.
    let before = log.in_namespace("effects");
    for minor in [33, 27] {
        s.kubectl(minor, &["get", "cm", "-n", "effects"]).ok();
        s.kubectl(minor, &["get", "cm", "some-33", "-n", "effects", "-o", "yaml"]).ok();
        s.kubectl(minor, &["get", "cm", "-n", "effects", "-l", "hook=some", "-o", "name"]).ok();
        s.kubectl(minor, &["get", "--raw", "/api/v1/namespaces/effects/configmaps?watch=true&timeoutSeconds=1"]).ok();
    }
    assert_eq!(log.in_namespace("effects"), before, "{:?}", log.calls());
    // A write after them is still seen, so the count could move.
    s.kubectl(33, &["label", "cm", "some-33", "-n", "effects", "x=y"]).ok();
    assert!(log.in_namespace("effects") > before);
}

/// A webhook named by a Service reference: the server resolves
/// `hook.webhooks.svc` through the Service's EndpointSlice (a ready
/// endpoint at 127.0.0.1 on the webhook's port) and checks the certificate
/// for that name; a Service without endpoints, or none at all, fails the
/// call with kube's message.
#[test]
fn service_references_resolve_through_endpointslices() {
    let log = Log::default();
    let hooks = webhooks(Arc::new(Pki::with_names(&["hook.webhooks.svc"])), log.clone());
    let port = hooks.url.rsplit(':').next().unwrap().to_string();
    let s = Server::start();
    for ns in ["webhooks", "via-svc"] {
        s.kubectl(33, &["create", "namespace", ns]).ok();
    }
    let backend = format!(
        "apiVersion: v1
kind: Service
metadata: {{name: hook, namespace: webhooks}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: nowhere, namespace: webhooks}}
spec:
  ports: [{{name: https, port: 443, targetPort: 9443}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: hook-1
  namespace: webhooks
  labels: {{kubernetes.io/service-name: hook}}
addressType: IPv4
ports: [{{name: https, port: {port}, protocol: TCP}}]
endpoints:
- addresses: [127.0.0.1]
  conditions: {{ready: true}}
"
    );
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&backend)).ok();
    let config = "
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: via-service
webhooks:
- name: svc.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {namespace: webhooks, name: hook, path: /svc}
    caBundle: CA_BUNDLE
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: via-svc}}
  objectSelector: {matchExpressions: [{key: hook, operator: DoesNotExist}]}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: nowhere.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {namespace: webhooks, name: nowhere, path: /svc}
    caBundle: CA_BUNDLE
  objectSelector: {matchLabels: {hook: nowhere}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: missing.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {namespace: webhooks, name: missing, path: /svc, port: 8443}
    caBundle: CA_BUNDLE
  objectSelector: {matchLabels: {hook: missing}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
";
    apply_and_wait(&s, &hooks, &log, config);
    for minor in [33, 27] {
        let name = format!("svc-{minor}");
        create(&s, minor, "via-svc", &configmap(&name, &[])).ok();
        assert_eq!(log.count("/svc", &name), 1, "kubectl 1.{minor}");
        let got = s.kubectl(minor, &["get", "cm", &name, "-n", "via-svc", "-o", "jsonpath={.metadata.annotations.via-service}"]);
        assert_eq!(got.ok(), "yes", "kubectl 1.{minor}");
    }

    // A Service without endpoints, and no Service at all: kube's resolver
    // errors after the URL kube builds for the Service.
    for (hook, want) in [
        ("nowhere", r#"failed calling webhook "nowhere.example.com": failed to call webhook: Post "https://nowhere.webhooks.svc:443/svc?timeout=10s": no endpoints available for service "nowhere""#),
        ("missing", r#"failed calling webhook "missing.example.com": failed to call webhook: Post "https://missing.webhooks.svc:8443/svc?timeout=10s": service "missing" not found"#),
    ] {
        let out = create(&s, 33, "via-svc", &configmap(hook, &[("hook", hook)]));
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains(&format!("Error from server (InternalError): error when creating \"STDIN\": Internal error occurred: {want}")), "{out:?}");
    }
}

const ODD_ANSWERS: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: odd-answers
webhooks:
- name: frob-ignore.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: URL/frob, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: frob}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: yes-ignore.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: URL/allowed-yes, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: yes-ignore}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: yes-fail.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {url: URL/allowed-yes, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: yes-fail}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: deny-600.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/deny-600, caBundle: CA_BUNDLE}
  objectSelector: {matchLabels: {hook: deny-600}}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
";

/// Answers kube handles at different stages: a JSON Patch with an unknown
/// op fails the write with a 500 even under `failurePolicy: Ignore` (it
/// decodes, then does not apply); `\"allowed\": \"yes\"` does not decode, so
/// the failure policy decides (Ignore admits, Fail is kube's `failed
/// calling webhook`); a denial's code of 600 reaches the client as is.
#[test]
fn odd_answers_fail_where_kube_fails_them() {
    let log = Log::default();
    let hooks = webhooks(Arc::new(Pki::new()), log.clone());
    let s = Server::start();
    apply_and_wait(&s, &hooks, &log, ODD_ANSWERS);
    for minor in [33, 27] {
        let name = format!("frob-{minor}");
        let out = create(&s, minor, "default", &configmap(&name, &[("hook", "frob")]));
        let want = r#"Error from server (InternalError): error when creating "STDIN": Internal error occurred: Unexpected kind: frob"#;
        assert!(out.code == 1 && out.stderr.contains(want), "kubectl 1.{minor}: {out:?}");
        assert_eq!(log.count("/frob", &name), 1);

        let name = format!("yes-ignore-{minor}");
        let out = create(&s, minor, "default", &configmap(&name, &[("hook", "yes-ignore")]));
        assert_eq!(out.ok().trim(), format!("configmap/{name} created"), "kubectl 1.{minor}");
        assert_eq!(log.count("/allowed-yes", &name), 1);

        let out = create(&s, minor, "default", &configmap(&format!("yes-fail-{minor}"), &[("hook", "yes-fail")]));
        let want = r#"Internal error occurred: failed calling webhook "yes-fail.example.com": failed to call webhook: json: cannot unmarshal string into Go struct field AdmissionResponse.response.allowed of type bool"#;
        assert!(out.code == 1 && out.stderr.contains(want), "kubectl 1.{minor}: {out:?}");
    }
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"six-hundred","labels":{"hook":"deny-600"}}}"#;
    let out = crate::common::curl_admin(&s, "/api/v1/namespaces/default/configmaps", &["-X", "POST", "-H", "Content-Type: application/json", "-d", body]);
    assert!(out.starts_with("HTTP/2 600") || out.starts_with("HTTP/1.1 600"), "{out}");
    let status: Value = serde_json::from_str(&crate::common::body_of(&out)).unwrap_or_default();
    assert_eq!((status["code"].as_u64(), status["message"].as_str()), (Some(600), Some(r#"admission webhook "deny-600.example.com" denied the request: six hundred"#)), "{out}");
}

/// Configurations kube refuses, each with its message, through kubectl:
/// 422 with every cause, nothing stored.
#[test]
fn invalid_configurations_are_refused_with_kubes_messages() {
    let s = Server::start();
    let bad = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: bad
webhooks:
- name: short.name
  admissionReviewVersions: [v2]
  timeoutSeconds: 31
  failurePolicy: Maybe
  clientConfig: {url: 'http://u@h/x?a=b#f'}
  rules: [{operations: [GET], apiGroups: [], apiVersions: [v1], resources: ['*', pods]}]
- name: short.name
  admissionReviewVersions: []
  sideEffects: Some
  clientConfig: {}
  namespaceSelector: {matchExpressions: [{key: a, operator: Has}]}
";
    let wants = [
        r#"The ValidatingWebhookConfiguration "bad" is invalid: "#,
        r#"webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments separated by dots"#,
        r#"webhooks[0].rules[0].operations[0]: Unsupported value: "GET": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#,
        "webhooks[0].rules[0].apiGroups: Required value",
        r#"webhooks[0].rules[0].resources: Invalid value: []string{"*", "pods"}: if '*' is present, must not specify other resources without subresources"#,
        r#"webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore""#,
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        r#"webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
        r#"webhooks[0].clientConfig.url: Invalid value: "u": user information is not permitted in the URL"#,
        r#"webhooks[0].clientConfig.url: Invalid value: "f": fragments are not permitted in the URL"#,
        r#"webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL"#,
        r#"webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1"#,
        r#"webhooks[1].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun""#,
        r#"webhooks[1].namespaceSelector.matchExpressions[0].operator: Invalid value: "Has": not a valid selector operator"#,
        "webhooks[1].clientConfig: Required value: exactly one of url or service is required",
        "webhooks[1].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        r#"webhooks[1].name: Duplicate value: "short.name""#,
    ];
    for minor in [33, 27] {
        let out = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(bad));
        assert_eq!(out.code, 1, "kubectl 1.{minor}: {out:?}");
        for want in wants {
            assert!(out.stderr.contains(want), "kubectl 1.{minor}: want {want:?} in {}", out.stderr);
        }
    }
    let policy = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bad-policy
spec:
  failurePolicy: Sometimes
  paramKind: {apiVersion: example.com/v1}
  matchConstraints: {resourceRules: []}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: bad-binding
spec:
  policyName: bad-policy
  validationActions: [Deny, Warn, Shout]
";
    let out = s.kubectl_stdin(33, &["create", "-f", "-"], Some(policy));
    for want in [
        r#"ValidatingAdmissionPolicy.admissionregistration.k8s.io "bad-policy" is invalid: "#,
        r#"spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore""#,
        "spec.paramKind.kind: Required value",
        "spec.matchConstraints.resourceRules: Required value",
        "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
        r#"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "bad-binding" is invalid: "#,
        r#"spec.validationActions[2]: Unsupported value: "Shout": supported values: "Audit", "Deny", "Warn""#,
        "must not contain both Deny and Warn",
    ] {
        assert!(out.stderr.contains(want), "want {want:?} in {}", out.stderr);
    }
    let out = s.kubectl(33, &["get", "validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings", "-o", "name"]);
    assert_eq!(out.ok().trim(), "", "nothing stored");
}
