//! The order of admission (issue 19): MutatingAdmissionPolicy, mutating
//! webhooks, object and schema validation, ValidatingAdmissionPolicy,
//! validating webhooks; each stage sees what the earlier ones changed.
//!
//! One ConfigMap create goes through all five stages:
//! 1. a MutatingAdmissionPolicy adds the label `stage1: map`;
//! 2. a mutating webhook records the labels it got and adds
//!    `stage2: saw-<stage1>` (so `saw-map` only if it saw stage 1);
//! 3. validation checks the labels (a webhook-added bad label value is a
//!    422 from it, so it runs on the mutated object);
//! 4. a ValidatingAdmissionPolicy requires `stage2 == 'saw-map'`;
//! 5. a validating webhook records the labels it got.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::https::{HttpsServer, Pki};
use crate::common::Server;

/// What each webhook saw: (path, labels of the object).
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, Value)>>>);

impl Seen {
    fn at(&self, path: &str) -> Vec<Value> {
        self.0.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, l)| l.clone()).collect()
    }
}

fn webhook(seen: Seen) -> HttpsServer {
    HttpsServer::start(
        0,
        Arc::new(Pki::new()),
        Arc::new(move |_method: &str, path: &str, _auth: &str, body: &[u8]| {
            let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let req = &review["request"];
            let labels = req["object"]["metadata"]["labels"].clone();
            seen.0.lock().unwrap().push((path.to_string(), labels.clone()));
            let mut response = json!({"uid": req["uid"], "allowed": true});
            if path == "/mutate" {
                let stage1 = labels["stage1"].as_str().unwrap_or("nothing");
                let bad = req["object"]["metadata"]["annotations"]["break"] == json!("true");
                let value = if bad { "not a valid label value!".to_string() } else { format!("saw-{stage1}") };
                let patch = json!([{"op": "add", "path": "/metadata/labels/stage2", "value": value}]);
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
            }
            (200, json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
        }),
    )
}

const CONFIG: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: order-stage1.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"stage1": "map"}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: order-stage1.example.com}
spec:
  policyName: order-stage1.example.com
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: order}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: order-stage2.example.com}
webhooks:
- name: order-stage2.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/mutate, caBundle: CA_BUNDLE}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: order}}
  objectSelector: {matchExpressions: [{key: skip-webhook, operator: DoesNotExist}]}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: order-stage4.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "has(object.metadata.labels) && 'stage2' in object.metadata.labels && object.metadata.labels['stage2'] == 'saw-map'"
    message: the validating policy did not see the mutating webhook's label
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: order-stage4.example.com}
spec:
  policyName: order-stage4.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: order}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: order-stage5.example.com}
webhooks:
- name: order-stage5.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: URL/validate, caBundle: CA_BUNDLE}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: order}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
"#;

fn configmap(name: &str, labels: &str, annotations: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: order\n  labels: {{{labels}}}\n  annotations: {{{annotations}}}\ndata: {{a: '1'}}\n")
}

/// Each stage sees the earlier stages' changes, with kubectl 1.33 and 1.27.
#[test]
fn each_stage_sees_the_earlier_stages_changes() {
    let seen = Seen::default();
    let hooks = webhook(seen.clone());
    let s = Server::start();
    s.kubectl(33, &["create", "namespace", "order"]).ok();
    let ca = base64::engine::general_purpose::STANDARD.encode(&hooks.pki.ca_pem);
    let file = s.dir.path().join("order.yaml");
    std::fs::write(&file, CONFIG.replace("URL", &hooks.url).replace("CA_BUNDLE", &ca)).unwrap();
    s.kubectl(33, &["apply", "-f", file.to_str().unwrap()]).ok();

    // The five stages are in force once a dry-run create comes back with
    // both mutations and both webhooks were called.
    let mut ready = false;
    for _ in 0..150 {
        let out = s.kubectl_stdin(33, &["create", "--dry-run=server", "-o", "json", "-f", "-"], Some(&configmap("probe", "", "")));
        if out.code == 0 {
            let obj: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
            if obj["metadata"]["labels"]["stage2"] == json!("saw-map") && !seen.at("/validate").is_empty() {
                ready = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(ready, "the policies and webhooks never all took effect");

    for minor in [33, 27] {
        let name = format!("ordered-{minor}");
        let before = seen.at("/validate").len();
        let out = s.kubectl_stdin(minor, &["create", "-o", "json", "-f", "-"], Some(&configmap(&name, "", "")));
        assert!(out.code == 0, "kubectl 1.{minor} create: {}", out.stderr);
        let obj: Value = serde_json::from_str(&out.stdout).unwrap();
        // Stage 1 then stage 2 both reached the stored object.
        assert_eq!(obj["metadata"]["labels"]["stage1"], json!("map"), "{obj}");
        assert_eq!(obj["metadata"]["labels"]["stage2"], json!("saw-map"), "the mutating webhook saw the policy's label: {obj}");
        // Stage 2 got the object with stage 1's label.
        assert!(seen.at("/mutate").iter().any(|l| l["stage1"] == json!("map")));
        // Stage 5 saw both mutations.
        let v = seen.at("/validate");
        assert!(v.len() > before);
        assert_eq!(v.last().unwrap()["stage2"], json!("saw-map"), "{v:?}");
        assert_eq!(v.last().unwrap()["stage1"], json!("map"), "{v:?}");
    }

    // Stage 3 validates the mutated object: the webhook's bad label value
    // is refused as validation refuses it, and no validating stage runs.
    let before = seen.at("/validate").len();
    let out = s.kubectl_stdin(33, &["create", "-f", "-"], Some(&configmap("broken", "", "break: 'true'")));
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("is invalid") && out.stderr.contains("metadata.labels"), "{}", out.stderr);
    assert_eq!(seen.at("/validate").len(), before, "a validating webhook ran after validation failed");

    // Stage 4 really checks: without the webhook (excluded by its object
    // selector), the validating policy refuses, and stage 5 is not reached.
    let out = s.kubectl_stdin(33, &["create", "-f", "-"], Some(&configmap("skipped", "skip-webhook: 'yes'", "")));
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains("ValidatingAdmissionPolicy 'order-stage4.example.com' with binding 'order-stage4.example.com' denied request: the validating policy did not see the mutating webhook's label"),
        "{}",
        out.stderr
    );
    assert_eq!(seen.at("/validate").len(), before);
}
