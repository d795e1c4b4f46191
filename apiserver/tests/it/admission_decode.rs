//! What mutating admission returns is decoded again, as kube-apiserver
//! decodes a patched object (issue 19's review): a value of the wrong type
//! is a 500 whatever the failure policy, and fields the schema does not
//! declare are dropped, so nothing a typed client cannot read is stored.

use std::time::{Duration, Instant};

use crate::common::Server;

/// A MutatingAdmissionPolicy (on by default) patching `resource` of
/// `group` on create with `patch`, a CEL list of `JSONPatch`, under
/// failurePolicy Ignore.
fn policy(name: &str, group: &str, resource: &str, patch: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Ignore
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: ["{group}"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["{resource}"]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '{patch}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
"#
    )
}

#[test]
fn patched_objects_are_decoded_again() {
    let s = Server::start();
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&policy("bad-type", "apps", "deployments", r#"[JSONPatch{op: "replace", path: "/spec/replicas", value: "abc"}]"#))).ok();
    s.kubectl_stdin(
        33,
        &["apply", "-f", "-"],
        Some(&policy("unknown-field", "", "configmaps", r#"[JSONPatch{op: "add", path: "/bogus", value: "x"}, JSONPatch{op: "add", path: "/data", value: {"by": "policy"}}]"#)),
    )
    .ok();

    // The policies take effect a moment after they are stored.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    let refused = loop {
        i += 1;
        let out = s.kubectl(33, &["create", "deployment", &format!("d{i}"), "--image=nginx"]);
        if out.code != 0 {
            break out;
        }
        assert!(Instant::now() < deadline, "the policy never applied: {out:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(refused.stderr.contains("Internal error occurred: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"), "{refused:?}");
    let gone = s.kubectl(33, &["get", "deployment", &format!("d{i}")]);
    assert!(gone.stderr.contains("NotFound"), "the mistyped object was stored: {gone:?}");

    let deadline = Instant::now() + Duration::from_secs(30);
    let obj: serde_json::Value = loop {
        i += 1;
        let name = format!("c{i}");
        s.kubectl(33, &["create", "configmap", &name]).ok();
        let obj: serde_json::Value = serde_json::from_str(s.kubectl(33, &["get", "configmap", &name, "-o", "json"]).ok()).unwrap();
        if obj["data"]["by"] == "policy" {
            break obj;
        }
        assert!(Instant::now() < deadline, "the policy never applied: {obj}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(obj.get("bogus").is_none(), "an undeclared field was stored: {obj}");
}
