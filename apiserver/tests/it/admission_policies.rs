//! ValidatingAdmissionPolicy and MutatingAdmissionPolicy with their
//! bindings, enforced by real servers and driven by real kubectl 1.33 and
//! 1.27: the shared fixtures (replicas over 5 denied with the policy's
//! message; the annotation added, seen with `create --dry-run=server -o
//! yaml`), reads that no policy sees, the Warn and Audit actions (the
//! `Warning` kubectl prints, the annotations in the audit log), params from
//! a ConfigMap, `failurePolicy` Fail and Ignore for bad expressions, the
//! policies' `status.typeChecking`, a JSONPatch policy served as v1beta1,
//! and the CEL `authorizer` asking RBAC.
//!
//! Policies reach the plugins through the admission feed's informers, a
//! moment after they are stored: each test waits until a policy shows
//! (a server dry run it changes) before it asserts.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{fixtures, Out, Server};

const FIXTURE_DENIAL: &str =
    "ValidatingAdmissionPolicy 'deployment-replica-limit.example.com' with binding 'deployment-replica-limit.example.com' denied request: Deployment replicas must not exceed 5";

const MANAGED_BY: &str = "admission.example.com/managed-by: mutating-admission-policy";

/// Waits until `done` holds (policies take effect a moment after they are
/// stored), at most 30 s.
#[track_caller]
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after 30s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A Deployment `name` in `ns` with `replicas`.
fn deployment(name: &str, ns: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: c\n        image: nginx:1.25\n"
    )
}

fn create(s: &Server, minor: u32, yaml: &str, extra: &[&str]) -> Out {
    let mut args = vec!["create", "-f", "-"];
    args.extend_from_slice(extra);
    s.kubectl_stdin(minor, &args, Some(yaml))
}

fn apply(s: &Server, yaml: &str) {
    s.kubectl_stdin(33, &["apply", "--validate=false", "-f", "-"], Some(yaml)).ok();
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The fixtures, through both kubectl versions, on one server with
/// MutatingAdmissionPolicy enabled; reads are never evaluated.
#[test]
fn fixture_policies_deny_too_many_replicas_and_annotate_new_deployments() {
    // MutatingAdmissionPolicy is on by default.
    let s = Server::start();
    let too_many = fixtures().join("deployment-too-many-replicas.yaml");
    let too_many = too_many.to_str().unwrap();

    s.kubectl(33, &["apply", "--validate=false", "-f", fixtures().join("validating-admission-policy.yaml").to_str().unwrap()]).ok();
    wait_for("the replica limit", || s.kubectl(33, &["create", "--dry-run=server", "-f", too_many]).code != 0);
    for minor in [33, 27] {
        let out = s.kubectl(minor, &["create", "-f", too_many]);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains(FIXTURE_DENIAL), "kubectl 1.{minor}: {out:?}");
        assert!(out.stderr.contains("The deployments \"too-many\" is invalid"), "422 Invalid, as kube answers: {out:?}");
        let fine = fixture("nginx-deployment.yaml").replace("name: nginx\n", &format!("name: nginx-{minor}\n"));
        assert_eq!(create(&s, minor, &fine, &[]).ok().trim(), format!("deployment.apps/nginx-{minor} created"));
    }
    // An update over the limit is refused as well; the stored object stays.
    let scaled = s.kubectl(33, &["patch", "deployment", "nginx-33", "--type=merge", "-p", r#"{"spec":{"replicas":6}}"#]);
    assert_eq!(scaled.code, 1, "{scaled:?}");
    assert_eq!(s.kubectl(33, &["get", "deployment", "nginx-33", "-o", "jsonpath={.spec.replicas}"]).ok(), "1");

    // Reads are not admitted: a policy refusing every operation on
    // ConfigMaps stops a create, never a get or a list.
    s.kubectl(33, &["create", "configmap", "before", "--from-literal=a=1"]).ok();
    apply(&s, DENY_ALL_CONFIGMAPS);
    wait_for("the deny-all policy", || s.kubectl(33, &["create", "configmap", "probe", "--dry-run=server"]).code != 0);
    let refused = s.kubectl(27, &["create", "configmap", "after"]);
    assert!(refused.stderr.contains("ValidatingAdmissionPolicy 'no-configmaps.example.com' with binding 'no-configmaps' denied request: no ConfigMaps here"), "{refused:?}");
    for minor in [33, 27] {
        assert_eq!(s.kubectl(minor, &["get", "configmap", "before", "-o", "jsonpath={.data.a}"]).ok(), "1");
        assert!(s.kubectl(minor, &["get", "configmaps", "-o", "name"]).ok().contains("configmap/before"));
    }
    // A delete is a write: `oldObject` is the ConfigMap, `object` null.
    let kept = s.kubectl(33, &["delete", "configmap", "before"]);
    assert!(kept.code == 1 && kept.stderr.contains("denied request: no ConfigMaps here"), "{kept:?}");
    assert_eq!(s.kubectl(33, &["get", "configmap", "before", "-o", "name"]).ok().trim(), "configmap/before");

    // The mutating fixture: the annotation shows in a server dry run.
    s.kubectl(33, &["apply", "--validate=false", "-f", fixtures().join("mutating-admission-policy.yaml").to_str().unwrap()]).ok();
    let dry = |minor: u32| {
        let fresh = fixture("nginx-deployment.yaml").replace("name: nginx\n", &format!("name: dry-{minor}\n"));
        create(&s, minor, &fresh, &["--dry-run=server", "-o", "yaml"])
    };
    wait_for("the annotation", || dry(33).stdout.contains(MANAGED_BY));
    for minor in [33, 27] {
        let out = dry(minor);
        assert!(out.ok().contains(MANAGED_BY), "kubectl 1.{minor}: {out:?}");
        assert!(out.stdout.contains(&format!("name: dry-{minor}")), "{out:?}");
        assert_eq!(s.kubectl(minor, &["get", "deployment", &format!("dry-{minor}")]).code, 1, "a dry run stores nothing");
    }
    // Stored for real, with the annotation; the policy is served as v1beta1
    // and v1alpha1 as well.
    let real = fixture("nginx-deployment.yaml").replace("name: nginx\n", "name: annotated\n");
    create(&s, 33, &real, &[]).ok();
    let got = s.kubectl(27, &["get", "deployment", "annotated", "-o", "jsonpath={.metadata.annotations.admission\\.example\\.com/managed-by}"]);
    assert_eq!(got.ok(), "mutating-admission-policy");
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let out = s.kubectl(
            33,
            &[
                "get",
                &format!("mutatingadmissionpolicies.{version}.admissionregistration.k8s.io"),
                "add-managed-by-annotation.example.com",
                "-o",
                "jsonpath={.apiVersion} {.spec.mutations[0].patchType}",
            ],
        );
        assert_eq!(out.ok(), format!("admissionregistration.k8s.io/{version} ApplyConfiguration"));
    }

    // A JSONPatch policy created as v1beta1 labels new ConfigMaps in `jp`.
    s.kubectl(33, &["create", "namespace", "jp"]).ok();
    apply(&s, JSON_PATCH_POLICY);
    wait_for("the label", || s.kubectl(33, &["create", "configmap", "probe", "-n", "jp", "--dry-run=server", "-o", "jsonpath={.metadata.labels.team}"]).stdout == "platform");
    s.kubectl(27, &["create", "configmap", "labelled", "-n", "jp"]).ok();
    assert_eq!(s.kubectl(33, &["get", "configmap", "labelled", "-n", "jp", "-o", "jsonpath={.metadata.labels.team}"]).ok(), "platform");
}

const DENY_ALL_CONFIGMAPS: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: no-configmaps.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["*"]
      resources: ["configmaps"]
  validations:
  - expression: "false"
    message: no ConfigMaps here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: no-configmaps
spec:
  policyName: no-configmaps.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: default
"#;

const JSON_PATCH_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: team-label.example.com
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/metadata/labels", value: {"team": "platform"}}]
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: team-label
spec:
  policyName: team-label.example.com
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: jp
"#;

const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: "apps"
    resources: ["deployments"]
- level: None
"#;

const WARN_AND_AUDIT: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-warn.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: object.spec.replicas <= 2
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' is over 2'"
  auditAnnotations:
  - key: replicas
    valueExpression: string(object.spec.replicas)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-warn-binding
spec:
  policyName: replica-warn.example.com
  validationActions: [Warn, Audit]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: warn
"#;

const PARAMS: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-param.example.com
spec:
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: object.spec.replicas <= int(params.data.max)
    messageExpression: "'replicas must be at most ' + params.data.max"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-param-binding
spec:
  policyName: replica-param.example.com
  validationActions: [Deny]
  paramRef:
    name: limits
    namespace: params
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: params
"#;

/// A policy with `expression` under `failure_policy`, bound to namespace `name`.
fn bad_policy(name: &str, failure_policy: &str, expression: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}.example.com
spec:
  failurePolicy: {failure_policy}
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  validations:
  - expression: "{expression}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {name}
"#
    )
}

/// The audit events in `log`.
fn audit_events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn status_of(s: &Server, policy: &str) -> Value {
    let out = s.kubectl(33, &["get", "validatingadmissionpolicy", policy, "-o", "json"]);
    serde_json::from_str::<Value>(out.ok()).unwrap()["status"].clone()
}

/// Warn and Audit actions, params from a ConfigMap, bad expressions under
/// Fail and Ignore, and the status the type checker writes.
#[test]
fn actions_params_failure_policies_and_type_checking() {
    let files = tempfile::tempdir().unwrap();
    let policy_file = files.path().join("audit-policy.yaml");
    std::fs::write(&policy_file, AUDIT_POLICY).unwrap();
    let log = files.path().join("audit.log");
    let s = Server::start_with(&[format!("--audit-policy-file={}", policy_file.display()), format!("--audit-log-path={}", log.display())]);
    for ns in ["warn", "params", "bad-fail", "bad-ignore"] {
        s.kubectl(33, &["create", "namespace", ns]).ok();
    }

    // Warn and Audit: the write goes through, with a warning and two
    // audit annotations.
    apply(&s, WARN_AND_AUDIT);
    wait_for("the warning", || create(&s, 33, &deployment("probe", "warn", 3), &["--dry-run=server"]).stderr.contains("Validation failed"));
    let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'replica-warn.example.com' with binding 'replica-warn-binding': replicas 3 is over 2";
    for (minor, name) in [(33, "w33"), (27, "w27")] {
        let out = create(&s, minor, &deployment(name, "warn", 3), &[]);
        assert_eq!(out.ok().trim(), format!("deployment.apps/{name} created"));
        assert!(out.stderr.contains(warning), "kubectl 1.{minor}: {out:?}");
    }
    let quiet = create(&s, 33, &deployment("small", "warn", 2), &[]);
    assert!(!quiet.stderr.contains("Warning"), "{quiet:?}");
    let created = |events: &[Value]| -> Option<Value> {
        events.iter().find(|e| e["verb"] == "create" && e["objectRef"]["name"] == "w33" && e["stage"] == "ResponseComplete" && e["annotations"].is_object()).map(|e| e["annotations"].clone())
    };
    wait_for("the audit event of w33", || created(&audit_events(&log)).is_some());
    let annotations = created(&audit_events(&log)).unwrap();
    assert_eq!(
        annotations["validation.policy.admission.k8s.io/validation_failure"],
        r#"[{"message":"replicas 3 is over 2","policy":"replica-warn.example.com","binding":"replica-warn-binding","expressionIndex":0,"validationActions":["Warn","Audit"]}]"#,
        "{annotations}"
    );
    assert_eq!(annotations["replica-warn.example.com/replicas"], "3", "{annotations}");

    // Params from a ConfigMap; a missing one under parameterNotFoundAction: Deny.
    s.kubectl(33, &["create", "configmap", "limits", "-n", "params", "--from-literal=max=2"]).ok();
    apply(&s, PARAMS);
    let param_denial = "ValidatingAdmissionPolicy 'replica-param.example.com' with binding 'replica-param-binding' denied request: replicas must be at most 2";
    wait_for("the param policy", || create(&s, 33, &deployment("probe", "params", 3), &["--dry-run=server"]).stderr.contains(param_denial));
    for minor in [33, 27] {
        let out = create(&s, minor, &deployment(&format!("p{minor}"), "params", 3), &[]);
        assert!(out.code == 1 && out.stderr.contains(param_denial), "kubectl 1.{minor}: {out:?}");
    }
    create(&s, 33, &deployment("p-ok", "params", 2), &[]).ok();
    s.kubectl(33, &["delete", "configmap", "limits", "-n", "params"]).ok();
    let out = create(&s, 27, &deployment("p-none", "params", 1), &[]);
    assert!(
        out.stderr.contains("ValidatingAdmissionPolicy 'replica-param.example.com' with binding 'replica-param-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{out:?}"
    );

    // An expression that does not parse is refused when the policy is
    // written (422, kube's compile error); one that fails when it runs
    // denies under Fail and is skipped under Ignore.
    let out = s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&bad_policy("bad-syntax", "Fail", "object.spec.replicas <")));
    assert!(out.code == 1 && out.stderr.contains(r#"spec.validations[0].expression: Invalid value: "object.spec.replicas <": compilation failed: ERROR: <input>:1:"#), "{out:?}");
    apply(&s, &bad_policy("bad-fail", "Fail", "object.spec.replica > 1"));
    apply(&s, &bad_policy("bad-ignore", "Ignore", "object.spec.replica > 1"));
    wait_for("the failing policy", || create(&s, 33, &deployment("probe", "bad-fail", 1), &["--dry-run=server"]).code != 0);
    for minor in [33, 27] {
        let out = create(&s, minor, &deployment(&format!("f{minor}"), "bad-fail", 1), &[]);
        assert!(out.code == 1 && out.stderr.contains("ValidatingAdmissionPolicy 'bad-fail.example.com' with binding 'bad-fail' denied request: ") && out.stderr.contains("replica"), "{out:?}");
        create(&s, minor, &deployment(&format!("i{minor}"), "bad-ignore", 1), &[]).ok();
    }

    // Type checking: warnings for what does not compile or names a field
    // a Deployment does not have; none for a sound policy.
    apply(&s, &fixture("validating-admission-policy.yaml"));
    wait_for("the policies' status", || ["bad-fail.example.com", "bad-ignore.example.com", "deployment-replica-limit.example.com"].iter().all(|p| status_of(&s, p)["observedGeneration"] == 1));
    let ignore = status_of(&s, "bad-ignore.example.com");
    let w = &ignore["typeChecking"]["expressionWarnings"][0];
    assert_eq!(w["fieldRef"], "spec.validations[0].expression", "{ignore}");
    assert_eq!(w["warning"], "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'\n | object.spec.replica > 1\n | ...........^\n", "{ignore}");
    let fail = status_of(&s, "bad-fail.example.com");
    assert!(fail["typeChecking"]["expressionWarnings"][0]["warning"].as_str().is_some_and(|w| w.starts_with("apps/v1, Kind=Deployment: ERROR: <input>:1:")), "{fail}");
    assert_eq!(status_of(&s, "deployment-replica-limit.example.com")["typeChecking"], serde_json::json!({}));
}

const SECRET_READERS: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: secret-readers.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  variables:
  - name: canReadSecrets
    expression: authorizer.group('').resource('secrets').namespace(request.namespace).check('get').allowed()
  validations:
  - expression: variables.canReadSecrets
    messageExpression: "request.userInfo.username + ' may not read secrets in ' + request.namespace"
  - expression: authorizer.requestResource.check('create').allowed()
  - expression: authorizer.serviceAccount('authz', 'robot').group('').resource('configmaps').namespace('authz').check('create').allowed()
    message: the robot may not create configmaps
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: secret-readers
spec:
  policyName: secret-readers.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: authz
"#;

/// The CEL `authorizer` asks RBAC: as the requester, for the request's own
/// resource and as a ServiceAccount.
#[test]
fn authorizer_checks_ask_rbac() {
    let s = Server::start_with(&["--authorization-mode=RBAC".to_string()]);
    s.kubectl(33, &["create", "namespace", "authz"]).ok();
    s.kubectl(33, &["create", "role", "cm-writer", "--verb=create,get", "--resource=configmaps", "-n", "authz"]).ok();
    s.kubectl(33, &["create", "rolebinding", "alice-writes", "--role=cm-writer", "--user=alice", "--serviceaccount=authz:robot", "-n", "authz"]).ok();
    apply(&s, SECRET_READERS);
    let denial = "ValidatingAdmissionPolicy 'secret-readers.example.com' with binding 'secret-readers' denied request: alice may not read secrets in authz";
    wait_for("the authorizer policy", || s.kubectl(33, &["create", "configmap", "probe", "-n", "authz", "--as", "alice", "--dry-run=server"]).stderr.contains(denial));
    for minor in [33, 27] {
        let out = s.kubectl(minor, &["create", "configmap", &format!("a{minor}"), "-n", "authz", "--as", "alice"]);
        assert!(out.code == 1 && out.stderr.contains(denial), "kubectl 1.{minor}: {out:?}");
        // The admin may read secrets; the robot may create configmaps.
        assert_eq!(s.kubectl(minor, &["create", "configmap", &format!("admin{minor}"), "-n", "authz"]).ok().trim(), format!("configmap/admin{minor} created"));
    }
    // Without the robot's rights the third validation fails.
    s.kubectl(33, &["delete", "rolebinding", "alice-writes", "-n", "authz"]).ok();
    s.kubectl(33, &["create", "rolebinding", "alice-writes", "--role=cm-writer", "--user=alice", "-n", "authz"]).ok();
    wait_for("the robot losing its rights", || s.kubectl(33, &["create", "configmap", "probe", "-n", "authz", "--dry-run=server"]).stderr.contains("the robot may not create configmaps"));
}

/// A policy whose paramKind names no served kind: under Fail the writes it
/// matches are refused with kube's configuration error (422 Invalid, as
/// kube answers a policy denial without a reason); under Ignore they pass.
#[test]
fn a_param_kind_that_is_not_served_fails_the_policy() {
    let s = Server::start();
    s.kubectl(33, &["create", "namespace", "nothing"]).ok();
    let policy = |name: &str, failure: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: {failure}
  paramKind: {{apiVersion: example.com/v1, kind: Nothing}}
  matchConstraints:
    resourceRules: [{{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
    objectSelector: {{matchLabels: {{policy: {name}}}}}
  validations: [{{expression: 'true'}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [Deny]
  paramRef: {{name: p, parameterNotFoundAction: Deny}}
"
        )
    };
    apply(&s, &policy("nothing-fail", "Fail"));
    apply(&s, &policy("nothing-ignore", "Ignore"));
    let cm = |name: &str, label: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: nothing\n  labels: {{policy: {label}}}\n");
    let denial = "ValidatingAdmissionPolicy 'nothing-fail' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Nothing'";
    wait_for("the policy", || create(&s, 33, &cm("probe", "nothing-fail"), &["--dry-run=server"]).stderr.contains(denial));
    for minor in [33, 27] {
        let name = format!("refused-{minor}");
        let out = create(&s, minor, &cm(&name, "nothing-fail"), &[]);
        // kubectl prints a 422 by its causes; the message is kube's
        // `configmaps "<name>" is forbidden: <denial>`.
        let want = format!(r#"The configmaps "{name}" is invalid: : {denial}"#);
        assert!(out.code == 1 && out.stderr.contains(&want), "kubectl 1.{minor}: {out:?}");
        let name = format!("ignored-{minor}");
        let out = create(&s, minor, &cm(&name, "nothing-ignore"), &[]);
        assert_eq!(out.ok().trim(), format!("configmap/{name} created"), "kubectl 1.{minor}");
    }
}
