//! `authentication.k8s.io` and `authorization.k8s.io`: review resources
//! that are created and answered, never stored (kube
//! `pkg/registry/authentication/selfsubjectreview` and
//! `pkg/registry/authorization/*`).
//!
//! Until RBAC arrives every authenticated user may do everything, so access
//! reviews answer `allowed: true` and rules reviews list `*` rules.

use serde_json::{json, Value};

use super::strategy::Strategy;
use super::Resource;
use crate::authn::UserInfo;

const CREATE: &[&str] = &["create"];

#[derive(Clone, Copy)]
enum Review {
    /// `SelfSubjectReview`: who am I.
    SelfSubject,
    /// `SelfSubjectAccessReview`, `SubjectAccessReview`,
    /// `LocalSubjectAccessReview`: may they do this.
    Access,
    /// `SelfSubjectRulesReview`: what may I do.
    Rules,
}

struct Reviews(Review);

impl Strategy for Reviews {
    fn review(&self, obj: &Value, user: &UserInfo) -> Option<Value> {
        let mut out = json!({
            "kind": obj["kind"],
            "apiVersion": obj["apiVersion"],
            "metadata": {"creationTimestamp": null},
        });
        if !obj["spec"].is_null() {
            out["spec"] = obj["spec"].clone();
        }
        out["status"] = match self.0 {
            Review::SelfSubject => json!({"userInfo": {"username": user.name, "groups": user.groups}}),
            Review::Access => json!({"allowed": true}),
            Review::Rules => json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            }),
        };
        Some(out)
    }
}

fn review(group: &'static str, version: &'static str, resource: &'static str, singular: &'static str, kind: &'static str, namespaced: bool, r: Review) -> Resource {
    Resource { group, version, resource, singular, kind, namespaced, verbs: CREATE, short_names: &[], categories: &[], subresources: &[], strategy: Box::new(Reviews(r)) }
}

/// authentication.k8s.io v1 and v1beta1 (kubectl 1.27's `auth whoami`
/// asks v1beta1), then authorization.k8s.io v1.
pub fn resources() -> Vec<Resource> {
    const AUTHN: &str = "authentication.k8s.io";
    const AUTHZ: &str = "authorization.k8s.io";
    vec![
        review(AUTHN, "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, Review::SelfSubject),
        review(AUTHN, "v1beta1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, Review::SelfSubject),
        review(AUTHZ, "v1", "localsubjectaccessreviews", "localsubjectaccessreview", "LocalSubjectAccessReview", true, Review::Access),
        review(AUTHZ, "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview", false, Review::Access),
        review(AUTHZ, "v1", "selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview", false, Review::Rules),
        review(AUTHZ, "v1", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false, Review::Access),
    ]
}
