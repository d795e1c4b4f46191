//! The AdmissionReview a webhook is sent and the checks on its answer
//! (kube `admission/plugin/webhook/request`: `CreateAdmissionObjects`,
//! `VerifyAdmissionResponse`; `webhook/errors`: `ToStatusErr`).
//!
//! A request (`admission.k8s.io/v1`, or `v1beta1` when that comes first in
//! the webhook's `admissionReviewVersions`):
//!
//! ```json
//! {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
//!  "request": {"uid": "<fresh>", "kind": {"group": "", "version": "v1", "kind": "Pod"},
//!   "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "…",
//!   "requestKind": {…}, "requestResource": {…}, "requestSubResource": "…",
//!   "name": "…", "namespace": "…", "operation": "CREATE",
//!   "userInfo": {"username": "…", "uid": "…", "groups": […], "extra": {…}},
//!   "object": {…} | null, "oldObject": {…} | null, "dryRun": false,
//!   "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", …}}}
//! ```
//!
//! The answer carries `response.uid` (which must be the request's under
//! v1), `allowed`, and a `status` for a refusal, `patch` (base64 of a JSON
//! Patch) with `patchType: JSONPatch` (mutating webhooks only),
//! `warnings` and `auditAnnotations`.

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::admission::Attributes;
use crate::errors::go_quote;
use crate::errors::{Details, Status};

/// The AdmissionReview version a webhook is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `admission.k8s.io/v1`.
    V1,
    /// `admission.k8s.io/v1beta1`.
    V1beta1,
}

impl Version {
    /// The first entry of `admissionReviewVersions` this server speaks, as
    /// kube picks it; `None` when there is none.
    pub fn pick(versions: &Value) -> Option<Version> {
        versions.as_array()?.iter().filter_map(Value::as_str).find_map(|v| match v {
            "v1" => Some(Version::V1),
            "v1beta1" => Some(Version::V1beta1),
            _ => None,
        })
    }

    /// The `apiVersion` of the review.
    pub fn api_version(self) -> &'static str {
        match self {
            Version::V1 => "admission.k8s.io/v1",
            Version::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// kube's wording when `admissionReviewVersions` names no version it
/// speaks.
pub const NO_KNOWN_VERSION: &str = "webhook does not accept known AdmissionReview versions (v1, v1beta1)";

/// The `request` of an AdmissionReview about `attrs`, with `uid`; also the
/// `request` variable of match conditions.
pub fn admission_request(attrs: &Attributes<'_>, uid: &str) -> Value {
    let kind = json!({"group": attrs.kind.group, "version": attrs.kind.version, "kind": attrs.kind.kind});
    let request_kind = json!({"group": attrs.request_kind.group, "version": attrs.request_kind.version, "kind": attrs.request_kind.kind});
    let resource = json!({"group": attrs.resource.group, "version": attrs.resource.version, "resource": attrs.resource.resource});
    let mut user = Map::new();
    user.insert("username".into(), json!(attrs.user.name));
    if !attrs.user.uid.is_empty() {
        user.insert("uid".into(), json!(attrs.user.uid));
    }
    if !attrs.user.groups.is_empty() {
        user.insert("groups".into(), json!(attrs.user.groups));
    }
    if !attrs.user.extra.is_empty() {
        user.insert("extra".into(), json!(attrs.user.extra));
    }
    let mut r = Map::new();
    r.insert("uid".into(), json!(uid));
    r.insert("kind".into(), kind);
    r.insert("resource".into(), resource.clone());
    if !attrs.subresource.is_empty() {
        r.insert("subResource".into(), json!(attrs.subresource));
    }
    r.insert("requestKind".into(), request_kind);
    r.insert("requestResource".into(), resource);
    if !attrs.subresource.is_empty() {
        r.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    if !attrs.name.is_empty() {
        r.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        r.insert("namespace".into(), json!(attrs.namespace));
    }
    r.insert("operation".into(), json!(attrs.operation.as_str()));
    r.insert("userInfo".into(), Value::Object(user));
    r.insert("object".into(), attrs.object.clone().unwrap_or(Value::Null));
    r.insert("oldObject".into(), attrs.old_object.cloned().unwrap_or(Value::Null));
    r.insert("dryRun".into(), json!(attrs.dry_run));
    r.insert("options".into(), options(attrs));
    Value::Object(r)
}

/// The options as admission sees them: a patch's `PatchOptions` become the
/// `UpdateOptions` (or, for a patch that creates, `CreateOptions`) of the
/// write it turns into, without `force`, as kube's patch handler hands them
/// to admission (`patchToUpdateOptions`, `patchToCreateOptions`).
fn options(attrs: &Attributes<'_>) -> Value {
    let mut o = attrs.options.clone();
    if o["kind"] == "PatchOptions" {
        if let Some(m) = o.as_object_mut() {
            let kind = if attrs.operation == crate::admission::Operation::Create { "CreateOptions" } else { "UpdateOptions" };
            m.insert("kind".into(), json!(kind));
            m.remove("force");
        }
    }
    o
}

/// The AdmissionReview sent about `attrs` under `uid`.
pub fn review(attrs: &Attributes<'_>, version: Version, uid: &str) -> Value {
    json!({"kind": "AdmissionReview", "apiVersion": version.api_version(), "request": admission_request(attrs, uid)})
}

/// A webhook's answer, checked ([`verify`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.status` (a `metav1.Status`), if any.
    pub status: Value,
    /// The JSON Patch (decoded from base64), when non-empty.
    pub patch: Option<Vec<u8>>,
    /// `response.patchType` (always `JSONPatch` for a v1beta1 patch).
    pub patch_type: String,
    /// `response.warnings`.
    pub warnings: Vec<String>,
    /// `response.auditAnnotations`, in key order.
    pub audit_annotations: Vec<(String, String)>,
}

/// Checks `body` (the webhook's JSON answer) against the request sent:
/// `version`, `uid`, and whether the webhook may patch (`mutating`).
///
/// # Errors
/// kube's words, which the caller puts after `received invalid webhook
/// response: `: an absent `response`, another uid or kind (v1), a patch
/// without its type or the reverse, or a patch from a validating webhook.
/// A `patch` that is not base64 is worded as Go's JSON decoder does
/// (`illegal base64 data at input byte N`); the caller reports it as a
/// failed call.
pub fn verify(body: &Value, version: Version, uid: &str, mutating: bool) -> Result<Answer, Invalid> {
    let r = &body["response"];
    if !r.is_object() {
        return Err(Invalid::Response("webhook response was absent".into()));
    }
    wrong_types(r)?;
    let patch = match r["patch"].as_str() {
        Some(p) if !p.is_empty() => Some(base64::engine::general_purpose::STANDARD.decode(p).map_err(|e| Invalid::Decode(go_base64_error(&e)))?),
        _ => None,
    };
    let patch_type = r.get("patchType").filter(|t| !t.is_null());
    let mut answer = Answer {
        allowed: r["allowed"].as_bool().unwrap_or(false),
        status: r.get("status").cloned().unwrap_or(Value::Null),
        patch: None,
        patch_type: String::new(),
        warnings: r["warnings"].as_array().map(|w| w.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default(),
        audit_annotations: r["auditAnnotations"]
            .as_object()
            .map(|m| {
                let mut v: Vec<(String, String)> = m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect();
                v.sort();
                v
            })
            .unwrap_or_default(),
    };
    match version {
        Version::V1 => {
            let got = r["uid"].as_str().unwrap_or_default();
            if got != uid {
                return Err(Invalid::Response(format!("expected response.uid={}, got {}", go_quote(uid), go_quote(got))));
            }
            let api_version = body["apiVersion"].as_str().unwrap_or_default();
            let kind = body["kind"].as_str().unwrap_or_default();
            if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                return Err(Invalid::Response(format!("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={kind}")));
            }
            if mutating {
                match (&patch, patch_type) {
                    (Some(_), None) => return Err(Invalid::Response("webhook returned response.patch but not response.patchType".into())),
                    (None, Some(_)) => return Err(Invalid::Response("webhook returned response.patchType but not response.patch".into())),
                    (_, Some(t)) if t.as_str().is_none_or(str::is_empty) => {
                        return Err(Invalid::Response(format!("webhook returned invalid response.patchType of {}", go_quote(t.as_str().unwrap_or_default()))));
                    }
                    _ => {}
                }
                answer.patch_type = patch_type.and_then(Value::as_str).unwrap_or_default().to_string();
                answer.patch = patch;
            } else if patch.is_some() {
                return Err(Invalid::Response("validating webhook may not return response.patch".into()));
            } else if patch_type.is_some() {
                return Err(Invalid::Response("validating webhook may not return response.patchType".into()));
            }
        }
        // v1beta1 answers were never checked for uid, kind or patch type.
        Version::V1beta1 => {
            if mutating && patch.is_some() {
                answer.patch_type = "JSONPatch".into();
                answer.patch = patch;
            }
        }
    }
    Ok(answer)
}

/// Go's JSON type word for a value (`UnmarshalTypeError.Value`).
fn go_json_kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Fields of `response` whose JSON type Go's decoder refuses (a string
/// `allowed`, a number `uid`, …), worded as its `UnmarshalTypeError`:
/// `json: cannot unmarshal string into Go struct field
/// AdmissionResponse.response.allowed of type bool`. Nulls decode as
/// zero values.
fn wrong_types(r: &Value) -> Result<(), Invalid> {
    let refuse =
        |v: &Value, field: &str, go_type: &str| Err(Invalid::Decode(format!("json: cannot unmarshal {} into Go struct field AdmissionResponse.response.{field} of type {go_type}", go_json_kind(v))));
    for (field, go_type, ok) in [
        ("uid", "types.UID", Value::is_string as fn(&Value) -> bool),
        ("allowed", "bool", Value::is_boolean),
        ("patchType", "v1.PatchType", Value::is_string),
        ("warnings", "[]string", Value::is_array),
        ("auditAnnotations", "map[string]string", Value::is_object),
    ] {
        match r.get(field) {
            Some(v) if !v.is_null() && !ok(v) => return refuse(v, field, go_type),
            _ => {}
        }
    }
    for w in r["warnings"].as_array().into_iter().flatten() {
        if !w.is_string() && !w.is_null() {
            return refuse(w, "warnings", "string");
        }
    }
    for v in r["auditAnnotations"].as_object().into_iter().flat_map(|m| m.values()) {
        if !v.is_string() && !v.is_null() {
            return refuse(v, "auditAnnotations", "string");
        }
    }
    Ok(())
}

/// Why an answer is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// The JSON decodes but breaks a rule (`received invalid webhook
    /// response: …`).
    Response(String),
    /// The JSON does not decode into an AdmissionReview (`failed to call
    /// webhook: …`).
    Decode(String),
}

/// Go's `encoding/base64` error as its JSON decoder reports it.
fn go_base64_error(e: &base64::DecodeError) -> String {
    let at = match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => *at,
        base64::DecodeError::InvalidLength(len) => *len,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}

/// The Status refusing a request a webhook denied (kube `ToStatusErr`):
/// the webhook's `status`, its message prefixed with `admission webhook
/// "<name>" denied the request: ` (its reason when it has no message,
/// ` without explanation` when it has neither), a code below 400 raised to
/// 400 (any other kept, 600 and up included), and `Failure`.
pub fn denied(webhook: &str, status: &Value) -> Status {
    let denied_by = format!("admission webhook {} denied the request", go_quote(webhook));
    let message = status["message"].as_str().unwrap_or_default();
    let reason = status["reason"].as_str().unwrap_or_default();
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    // Only codes below 400 are raised; kube keeps any other, 600 and up
    // included (a code past u16 is cut to 65535).
    let code = status["code"].as_i64().filter(|c| *c >= 400).map_or(400, |c| u16::try_from(c).unwrap_or(u16::MAX));
    let details: Option<Details> = status.get("details").and_then(|d| serde_json::from_value(d.clone()).ok());
    Status::failure(code, reason, message, details)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::TestRequest;
    use crate::admission::{Kind, Operation, Resource};
    use crate::authn::UserInfo;

    fn with_attrs(f: impl FnOnce(&Attributes<'_>)) {
        let req = TestRequest {
            user: UserInfo { name: "alice".into(), groups: vec!["system:authenticated".into()], ..Default::default() },
            options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
            ..Default::default()
        };
        let attrs = req.create(Resource { group: "", version: "v1", resource: "pods" }, Kind { group: "", version: "v1", kind: "Pod" }, "p", "default", json!({"metadata": {"name": "p"}}));
        f(&attrs)
    }

    #[test]
    fn the_request_carries_kubes_fields() {
        with_attrs(|a| {
            let r = review(a, Version::V1, "u-1");
            assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
            let q = &r["request"];
            assert_eq!(q["uid"], "u-1");
            assert_eq!(q["kind"], json!({"group": "", "version": "v1", "kind": "Pod"}));
            assert_eq!(q["requestResource"], json!({"group": "", "version": "v1", "resource": "pods"}));
            assert_eq!(q["operation"], "CREATE");
            assert_eq!(q["userInfo"], json!({"username": "alice", "groups": ["system:authenticated"]}));
            assert_eq!(q["oldObject"], Value::Null);
            assert_eq!(q["dryRun"], false);
            assert!(q.get("subResource").is_none());
            assert_eq!(q["options"]["kind"], "CreateOptions");
        });
        let req = TestRequest { options: json!({"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1", "force": true, "fieldManager": "m"}), ..Default::default() };
        let attrs = Attributes {
            operation: Operation::Update,
            object: None,
            ..req.create(Resource { group: "", version: "v1", resource: "pods" }, Kind { group: "", version: "v1", kind: "Pod" }, "p", "default", Value::Null)
        };
        assert_eq!(admission_request(&attrs, "u")["options"], json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "m"}));
        assert_eq!(Version::pick(&json!(["v2", "v1beta1", "v1"])), Some(Version::V1beta1));
        assert_eq!(Version::pick(&json!(["v2"])), None);
    }

    #[test]
    fn answers_are_checked_as_kube_checks_them() {
        let ok = |resp: Value| json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp});
        let patch = base64::engine::general_purpose::STANDARD.encode(br#"[{"op":"add","path":"/x","value":1}]"#);
        let a = verify(&ok(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch", "warnings": ["w"]})), Version::V1, "u", true);
        let a = a.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((a.allowed, a.patch_type.as_str(), a.warnings), (true, "JSONPatch", vec!["w".to_string()]));
        for (resp, version, mutating, want) in [
            (json!({"uid": "other", "allowed": true}), Version::V1, true, Invalid::Response(r#"expected response.uid="u", got "other""#.into())),
            (json!({"uid": "u", "allowed": true, "patch": patch}), Version::V1, true, Invalid::Response("webhook returned response.patch but not response.patchType".into())),
            (json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"}), Version::V1, true, Invalid::Response("webhook returned response.patchType but not response.patch".into())),
            (json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch"}), Version::V1, false, Invalid::Response("validating webhook may not return response.patch".into())),
            (json!({"uid": "u", "allowed": true, "patch": "!!"}), Version::V1, true, Invalid::Decode("illegal base64 data at input byte 0".into())),
            (json!({"uid": "u", "allowed": "yes"}), Version::V1, false, Invalid::Decode("json: cannot unmarshal string into Go struct field AdmissionResponse.response.allowed of type bool".into())),
            (json!({"uid": 7, "allowed": true}), Version::V1, false, Invalid::Decode("json: cannot unmarshal number into Go struct field AdmissionResponse.response.uid of type types.UID".into())),
        ] {
            assert_eq!(verify(&ok(resp.clone()), version, "u", mutating), Err(want), "{resp}");
        }
        let wrong_kind = json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true}});
        assert_eq!(
            verify(&wrong_kind, Version::V1, "u", false),
            Err(Invalid::Response("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview".into()))
        );
        assert_eq!(verify(&json!({}), Version::V1, "u", false), Err(Invalid::Response("webhook response was absent".into())));
        // v1beta1: any uid, and a patch is a JSON Patch.
        let beta = verify(&json!({"response": {"uid": "x", "allowed": true, "patch": patch}}), Version::V1beta1, "u", true).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(beta.patch_type, "JSONPatch");
    }

    #[test]
    fn denials_carry_the_webhooks_status() {
        let s = denied("deny.example.com", &json!({"code": 403, "reason": "Forbidden", "message": "no privileged containers"}));
        assert_eq!((s.code, s.reason.as_str(), s.message.as_str()), (403, "Forbidden", r#"admission webhook "deny.example.com" denied the request: no privileged containers"#));
        let s = denied("d", &Value::Null);
        assert_eq!((s.code, s.reason.as_str(), s.message.as_str(), s.status.as_str()), (400, "", r#"admission webhook "d" denied the request without explanation"#, "Failure"));
        let s = denied("d", &json!({"code": 200, "reason": "NotGood"}));
        assert_eq!((s.code, s.message.as_str()), (400, r#"admission webhook "d" denied the request: NotGood"#));
        assert_eq!(denied("d", &json!({"code": 600, "message": "m"})).code, 600);
        assert_eq!(denied("d", &json!({"code": 799})).code, 799);
        assert_eq!(denied("d", &json!({"code": -1})).code, 400);
    }
}
