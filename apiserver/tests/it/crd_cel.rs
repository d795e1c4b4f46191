//! CEL rules in CRD schemas (`x-kubernetes-validations`) driven by kubectl
//! 1.33 and 1.27: a ModelServer CRD modeled on
//! `../shared/fixtures/modelserver-crd.yaml` (one version, conversion
//! None) whose rules refuse a bad create with their message, whose
//! transition rules (`oldSelf`, one with a messageExpression, one with
//! `optionalOldSelf`) refuse bad updates while good ones pass, whose status
//! rule guards the status subresource; and CRDs whose rules do not compile
//! are refused at creation with kube's message.

use crate::common::{eventually, Out, Server};

/// The CRD, of group `aiTAG.course.example.com`.
fn crd(tag: &str) -> String {
    r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: modelservers.aiTAG.course.example.com
spec:
  group: aiTAG.course.example.com
  scope: Namespaced
  names:
    plural: modelservers
    singular: modelserver
    kind: ModelServer
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [model]
              x-kubernetes-validations:
                - rule: "self.replicas <= 8"
                  message: "replicas must be <= 8"
                - rule: "self.model.name == oldSelf.model.name"
                  message: "model is immutable"
                - rule: "self.server.port == oldSelf.server.port"
                  messageExpression: "'server.port may not change from ' + string(oldSelf.server.port) + ' to ' + string(self.server.port)"
                  reason: FieldValueForbidden
                  fieldPath: ".server.port"
                - rule: "oldSelf.hasValue() || self.replicas > 0"
                  optionalOldSelf: true
                  message: "a ModelServer starts with at least one replica"
              properties:
                model:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                replicas: {type: integer, format: int32, minimum: 0, default: 1}
                server:
                  type: object
                  default: {}
                  properties:
                    port: {type: integer, format: int32, default: 8000}
            status:
              type: object
              x-kubernetes-validations:
                - rule: "!has(self.phase) || self.phase in ['Pending', 'Running', 'Failed']"
                  message: "phase must be Pending, Running or Failed"
                  fieldPath: ".phase"
              properties:
                phase: {type: string}
                replicas: {type: integer, format: int32}
"#
    .replace("TAG", tag)
}

fn model_server(tag: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: ai{tag}.course.example.com/v1\nkind: ModelServer\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

#[track_caller]
fn refused(out: &Out, want: &str) {
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains(want), "wanted {want:?} in {out:?}");
}

fn rules_on_writes(s: &Server, minor: u32) {
    let tag = minor.to_string();
    let name = format!("modelservers.ai{tag}.course.example.com");
    let ms = format!("modelservers.ai{tag}.course.example.com");
    let applied = s.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&crd(&tag)));
    assert_eq!(applied.ok().trim(), format!("customresourcedefinition.apiextensions.k8s.io/{name} created"));
    s.kubectl(minor, &["wait", "--for=condition=Established", &format!("crd/{name}"), "--timeout=30s"]).ok();

    // A good create, once kubectl knows the kind.
    let good = model_server(&tag, "qwen", "  model:\n    name: Qwen/Qwen3-0.6B\n  replicas: 2\n");
    let created = eventually("the ModelServer kind", || {
        let out = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&good));
        (out.code == 0).then_some(out)
    });
    assert_eq!(created.stdout.trim(), format!("modelserver.ai{tag}.course.example.com/qwen created"));

    // A bad create: the rule's message, at the rule's node.
    let big = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&model_server(&tag, "big", "  model:\n    name: m\n  replicas: 9\n")));
    refused(&big, r#"The ModelServer "big" is invalid: spec: Invalid value: "object": replicas must be <= 8"#);
    // optionalOldSelf: the rule runs on create, with no old value.
    let zero = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&model_server(&tag, "zero", "  model:\n    name: m\n  replicas: 0\n")));
    refused(&zero, r#"The ModelServer "zero" is invalid: spec: Invalid value: "object": a ModelServer starts with at least one replica"#);
    assert_eq!(s.kubectl(minor, &["get", &ms, "big"]).code, 1);

    // Transition rules: a changed model is refused with the message; a
    // changed port with the messageExpression's, as Forbidden, at fieldPath.
    let renamed = s.kubectl(minor, &["patch", &ms, "qwen", "--type=merge", "-p", r#"{"spec":{"model":{"name":"other"}}}"#]);
    refused(&renamed, r#"The ModelServer "qwen" is invalid: spec: Invalid value: "object": model is immutable"#);
    let port = s.kubectl(minor, &["patch", &ms, "qwen", "--type=merge", "-p", r#"{"spec":{"server":{"port":9000}}}"#]);
    refused(&port, r#"The ModelServer "qwen" is invalid: spec.server.port: Forbidden: server.port may not change from 8000 to 9000"#);
    // Good updates pass, scaling to zero included (the optional rule sees
    // the old value now).
    for replicas in [5, 0] {
        let scaled = s.kubectl(minor, &["patch", &ms, "qwen", "--type=merge", "-p", &format!(r#"{{"spec":{{"replicas":{replicas}}}}}"#)]);
        assert_eq!(scaled.ok().trim(), format!("modelserver.ai{tag}.course.example.com/qwen patched"));
    }
    let too_many = s.kubectl(minor, &["patch", &ms, "qwen", "--type=merge", "-p", r#"{"spec":{"replicas":12}}"#]);
    refused(&too_many, r#"spec: Invalid value: "object": replicas must be <= 8"#);
    let got: serde_json::Value = serde_json::from_str(s.kubectl(minor, &["get", &ms, "qwen", "-o", "json"]).ok()).unwrap();
    assert_eq!(got["spec"]["replicas"], 0, "{got}");
    assert_eq!(got["spec"]["model"]["name"], "Qwen/Qwen3-0.6B", "{got}");
    assert_eq!(got["spec"]["server"]["port"], 8000, "{got}");

    // The status subresource's writes run the rules too.
    let raw = format!("/apis/ai{tag}.course.example.com/v1/namespaces/default/modelservers/qwen/status");
    let mut with_status = got.clone();
    with_status["status"] = serde_json::json!({"phase": "Sleeping"});
    let file = s.dir.path().join(format!("status-{tag}.json"));
    std::fs::write(&file, with_status.to_string()).unwrap();
    let bad_phase = s.kubectl(minor, &["replace", "--raw", &raw, "-f", file.to_str().unwrap()]);
    refused(&bad_phase, r#"The ModelServer "qwen" is invalid: status.phase: Invalid value: "object": phase must be Pending, Running or Failed"#);
    with_status["status"] = serde_json::json!({"phase": "Running"});
    std::fs::write(&file, with_status.to_string()).unwrap();
    s.kubectl(minor, &["replace", "--raw", &raw, "-f", file.to_str().unwrap()]).ok();
    assert_eq!(s.kubectl(minor, &["get", &ms, "qwen", "-o", "jsonpath={.status.phase}"]).ok(), "Running");

    s.kubectl(minor, &["delete", "crd", &name]).ok();
}

/// Rules that do not compile refuse the CRD, with kube's message.
fn rules_checked_at_crd_creation(s: &Server, minor: u32) {
    let tag = format!("bad{minor}");
    let with_rule = |rule: &str| crd(&tag).replace(r#""self.replicas <= 8""#, &format!("{rule:?}"));
    let at = r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"#;

    let syntax = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&with_rule("self.replicas <=")));
    refused(
        &syntax,
        &format!(
            r#"{at}"self.replicas <=", Message:"replicas must be <= 8", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}}: compilation failed: ERROR: <input>:1:"#
        ),
    );
    assert!(syntax.stderr.contains(" | self.replicas <=\n"), "{syntax:?}");

    let typo = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&with_rule("self.replica <= 8")));
    refused(&typo, "compilation failed: ERROR: <input>:1:6: undefined field 'replica'\n | self.replica <= 8\n | .....^");

    let unknown = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&with_rule("replicas <= 8")));
    refused(&unknown, "compilation failed: ERROR: <input>:1:1: undeclared reference to 'replicas' (in container '')");

    let name = format!("modelservers.ai{tag}.course.example.com");
    let gone = s.kubectl(minor, &["get", "crd", &name]);
    assert_eq!(gone.code, 1, "a CRD with a bad rule was stored: {gone:?}");
}

#[test]
fn crd_cel_rules_with_kubectl() {
    let s = Server::start();
    for minor in [33, 27] {
        rules_on_writes(&s, minor);
        rules_checked_at_crd_creation(&s, minor);
    }
}
