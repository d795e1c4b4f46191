//! Protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`).
//!
//! kubectl's typed clients (`create namespace|configmap|secret|service|
//! serviceaccount|deployment|job|cronjob|ingress|poddisruptionbudget|quota|
//! role|rolebinding|clusterrole|clusterrolebinding|priorityclass`,
//! `autoscale`, `auth can-i`, `auth whoami`) send objects this way and do
//! not fall back to JSON on 415. The body is the 4-byte magic
//! `k8s\0` followed by a `runtime.Unknown` whose `typeMeta` names the
//! apiVersion and kind and whose `raw` holds the object's own message
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#protobuf-encoding>):
//!
//! ```text
//! 6b 38 73 00            "k8s\0"
//! 0a 0f                  Unknown.typeMeta, 15 bytes
//!   0a 02 76 31            apiVersion "v1"
//!   12 09 4e 61 6d ...     kind "Namespace"
//! 12 0c                  Unknown.raw, 12 bytes: the Namespace message
//!   0a 05 0a 03 66 6f 6f   metadata { name: "foo" }
//!   12 00 1a 00            spec {}, status {}
//! ```
//!
//! [`decode`] turns such a body into the JSON object a JSON client would
//! have sent; the request then continues on the normal JSON path. Only the
//! kinds in [`types`] are known; others get 415. Responses stay JSON, which
//! client-go accepts because it also sends `Accept: ...,application/json`.

pub mod types;

use prost::Message;
use serde::Serialize;
use serde_json::Value;

use crate::errors::Status;

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";

fn bad(what: impl std::fmt::Display) -> Status {
    Status::bad_request(format!("the body of the request could not be decoded as protobuf: {what}"))
}

fn to_json<M: Message + Default + Serialize>(raw: &[u8]) -> Result<Value, Status> {
    let m = M::decode(raw).map_err(bad)?;
    serde_json::to_value(&m).map_err(bad)
}

/// Decodes a `k8s\0` + `runtime.Unknown` body into a JSON object with its
/// `apiVersion` and `kind`.
///
/// # Errors
/// 400 BadRequest for a missing magic, a malformed envelope or message, or
/// a content encoding; 415 UnsupportedMediaType for a kind this server does
/// not decode from protobuf (kube's wording for a resource without a
/// protobuf form, listing JSON and YAML).
pub fn decode(body: &[u8]) -> Result<Value, Status> {
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| bad("missing the k8s\\0 prefix"))?;
    let unknown = types::Unknown::decode(rest).map_err(bad)?;
    if !unknown.content_encoding.is_empty() {
        return Err(bad(format_args!("unsupported content encoding {:?}", unknown.content_encoding)));
    }
    let tm = unknown.type_meta.unwrap_or_default();
    let (group, version) = match tm.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", tm.api_version.as_str()),
    };
    let raw = unknown.raw.as_slice();
    use types as t;
    let mut obj = match (group, version, tm.kind.as_str()) {
        ("", "v1", "Namespace") => to_json::<t::Namespace>(raw)?,
        ("", "v1", "ConfigMap") => to_json::<t::ConfigMap>(raw)?,
        ("", "v1", "Secret") => to_json::<t::Secret>(raw)?,
        ("", "v1", "ServiceAccount") => to_json::<t::ServiceAccount>(raw)?,
        ("", "v1", "Service") => to_json::<t::Service>(raw)?,
        ("", "v1", "ResourceQuota") => to_json::<t::ResourceQuota>(raw)?,
        ("apps", "v1", "Deployment") => to_json::<t::Deployment>(raw)?,
        ("batch", "v1", "Job") => to_json::<t::Job>(raw)?,
        ("batch", "v1", "CronJob") => to_json::<t::CronJob>(raw)?,
        ("networking.k8s.io", "v1", "Ingress") => to_json::<t::Ingress>(raw)?,
        ("policy", "v1", "PodDisruptionBudget") => to_json::<t::PodDisruptionBudget>(raw)?,
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => to_json::<t::HorizontalPodAutoscalerV1>(raw)?,
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => to_json::<t::HorizontalPodAutoscalerV2>(raw)?,
        ("rbac.authorization.k8s.io", "v1", "Role" | "ClusterRole") => to_json::<t::Role>(raw)?,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding" | "ClusterRoleBinding") => to_json::<t::RoleBinding>(raw)?,
        ("scheduling.k8s.io", "v1", "PriorityClass") => to_json::<t::PriorityClass>(raw)?,
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => to_json::<t::SelfSubjectAccessReview>(raw)?,
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => to_json::<t::SelfSubjectRulesReview>(raw)?,
        ("authentication.k8s.io", "v1" | "v1beta1" | "v1alpha1", "SelfSubjectReview") => to_json::<t::SelfSubjectReview>(raw)?,
        _ => {
            // kube's answer for a resource that has no protobuf form (as
            // custom resources): 415 listing the types it does take.
            return Err(Status::unsupported_media_type(&["application/json", "application/yaml"]));
        }
    };
    if let Some(o) = obj.as_object_mut() {
        // Put apiVersion and kind first, as a JSON client would.
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), Value::String(tm.kind.clone()));
        out.insert("apiVersion".into(), Value::String(tm.api_version.clone()));
        out.append(o);
        obj = Value::Object(out);
    }
    Ok(obj)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = types::Unknown { type_meta: Some(types::TypeMeta { api_version: api_version.into(), kind: kind.into() }), raw, ..Default::default() };
        let mut b = MAGIC.to_vec();
        b.extend(u.encode_to_vec());
        b
    }

    #[test]
    fn namespace_and_configmap() {
        let ns = types::Namespace { metadata: Some(types::ObjectMeta { name: "foo".into(), ..Default::default() }), spec: Some(Default::default()) };
        let v = decode(&envelope("v1", "Namespace", ns.encode_to_vec())).unwrap();
        assert_eq!(v, json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "foo"}, "spec": {}}));

        let mut cm = types::ConfigMap { metadata: Some(types::ObjectMeta { name: "c".into(), namespace: "default".into(), ..Default::default() }), ..Default::default() };
        cm.data.insert("a".into(), "1".into());
        cm.binary_data.insert("b".into(), vec![0, 1]);
        let v = decode(&envelope("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(v["data"], json!({"a": "1"}));
        assert_eq!(v["binaryData"], json!({"b": "AAE="}));
    }

    #[test]
    fn deployment_keeps_pointer_zeros() {
        let d = types::Deployment {
            metadata: Some(types::ObjectMeta { name: "web".into(), ..Default::default() }),
            spec: Some(types::DeploymentSpec {
                replicas: Some(0),
                template: Some(types::PodTemplateSpec {
                    metadata: None,
                    spec: Some(types::PodSpec { containers: vec![types::Container { name: "nginx".into(), image: "nginx".into(), resources: Some(Default::default()), ..Default::default() }], ..Default::default() }),
                }),
                strategy: Some(types::DeploymentStrategy { r#type: "RollingUpdate".into(), rolling_update: Some(types::RollingUpdateDeployment { max_surge: Some(types::IntOrString { r#type: 1, str_val: "25%".into(), int_val: 0 }), max_unavailable: Some(types::IntOrString { r#type: 0, int_val: 1, str_val: String::new() }) }) }),
                ..Default::default()
            }),
        };
        let v = decode(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap();
        assert_eq!(v["spec"]["replicas"], 0);
        assert_eq!(v["spec"]["template"]["spec"]["containers"], json!([{"name": "nginx", "image": "nginx", "resources": {}}]));
        assert_eq!(v["spec"]["strategy"]["rollingUpdate"], json!({"maxUnavailable": 1, "maxSurge": "25%"}));
    }

    #[test]
    fn ingress_rules_inline_their_value_and_quota_quantities_are_strings() {
        let path = types::HttpIngressPath {
            path: "/bar".into(),
            path_type: Some("Exact".into()),
            backend: Some(types::IngressBackend { service: Some(types::IngressServiceBackend { name: "svc".into(), port: Some(types::ServiceBackendPort { name: String::new(), number: 8080 }) }), resource: None }),
        };
        let rule = types::IngressRule { host: "foo.com".into(), value: Some(types::IngressRuleValue { http: Some(types::HttpIngressRuleValue { paths: vec![path] }) }) };
        let ing = types::Ingress { metadata: None, spec: Some(types::IngressSpec { rules: vec![rule], ..Default::default() }) };
        let v = decode(&envelope("networking.k8s.io/v1", "Ingress", ing.encode_to_vec())).unwrap();
        assert_eq!(v["spec"]["rules"], json!([{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Exact", "backend": {"service": {"name": "svc", "port": {"number": 8080}}}}]}}]));

        let mut q = types::ResourceQuota { metadata: None, spec: Some(Default::default()) };
        if let Some(spec) = q.spec.as_mut() {
            spec.hard.insert("pods".into(), types::Quantity { string: "2".into() });
        }
        let v = decode(&envelope("v1", "ResourceQuota", q.encode_to_vec())).unwrap();
        assert_eq!(v["spec"], json!({"hard": {"pods": "2"}}));
    }

    #[test]
    fn malformed_bodies_are_400_and_unknown_kinds_415() {
        let cases: &[(&[u8], u16)] = &[(b"", 400), (b"{}", 400), (b"k8s\0\xff\xff\xff", 400), (b"k8s\0\x12\x05ab", 400)];
        for (body, code) in cases {
            assert_eq!(decode(body).map_err(|s| s.code).err(), Some(*code), "{body:?}");
        }
        let truncated = envelope("v1", "ConfigMap", vec![0x0a, 0x10, 0x0a]);
        assert_eq!(decode(&truncated).map_err(|s| s.code).err(), Some(400));
        let other = envelope("v1", "Pod", vec![]);
        assert_eq!(decode(&other).map_err(|s| s.code).err(), Some(415));
    }
}
