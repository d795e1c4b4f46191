//! Admission of the scale subresource sees a Scale, as kube's scale REST
//! shows it (issue 19's review): a webhook on `deployments/scale` gets an
//! `autoscaling/v1` Scale as `kind` and object, and its JSON patch of the
//! Scale reaches the Deployment.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::https::{Handler, HttpsServer, Pki};
use crate::common::Server;

const HOOK: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: scale-hook
webhooks:
- name: scale.hook.example.com
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
  clientConfig:
    url: URL/scale
    caBundle: CA_BUNDLE
  rules:
  - apiGroups: [apps]
    apiVersions: [v1]
    operations: [UPDATE]
    resources: [deployments/scale]
"#;

#[test]
fn webhooks_on_scale_get_a_scale() {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    // Doubles whatever replicas the Scale asks for.
    let handler: Handler = Arc::new(move |_method: &str, _path: &str, _auth: &str, body: &[u8]| {
        let review: Value = serde_json::from_slice(body).unwrap_or_default();
        let req = review["request"].clone();
        log.lock().unwrap().push(req.clone());
        let want = req["object"]["spec"]["replicas"].as_i64().unwrap_or(0) * 2;
        let patch = json!([{"op": "replace", "path": "/spec/replicas", "value": want}]);
        let response = json!({"uid": req["uid"], "allowed": true, "patchType": "JSONPatch", "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string())});
        (200, json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
    });
    let hooks = HttpsServer::start(0, Arc::new(Pki::new()), handler);
    let s = Server::start();
    s.kubectl(33, &["create", "deployment", "sc", "--image=nginx"]).ok();
    let config = HOOK.replace("URL", &hooks.url).replace("CA_BUNDLE", &base64::engine::general_purpose::STANDARD.encode(&hooks.pki.ca_pem));
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&config)).ok();

    // The configuration takes effect a moment after it is stored.
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the webhook was never called");
        s.kubectl(33, &["scale", "deployment/sc", "--replicas=3"]).ok();
        std::thread::sleep(Duration::from_millis(200));
    }
    let req = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(req["kind"], json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}), "{req}");
    assert_eq!(req["resource"], json!({"group": "apps", "version": "v1", "resource": "deployments"}), "{req}");
    assert_eq!(req["subResource"], "scale");
    assert_eq!(req["object"]["kind"], "Scale", "{req}");
    assert_eq!(req["object"]["spec"]["replicas"], 3, "{req}");
    assert_eq!(req["oldObject"]["kind"], "Scale", "{req}");
    assert!(req["object"]["status"]["selector"].is_string(), "{req}");
    // The patched Scale is what the Deployment got.
    assert_eq!(s.kubectl(33, &["get", "deployment/sc", "-o", "jsonpath={.spec.replicas}"]).ok(), "6");
}
