//! `authentication.k8s.io` and `authorization.k8s.io`: review resources
//! that are created and answered, never stored (kube
//! `pkg/registry/authentication/selfsubjectreview` and
//! `pkg/registry/authorization/*`).
//!
//! - SelfSubjectReview: the requesting user;
//! - TokenReview: the user of `spec.token`, as the server's authenticators
//!   see it for `spec.audiences` (default `--api-audiences`);
//! - SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview:
//!   the authorizer's decision for the spec's resource or non-resource
//!   attributes, for the requesting user (self) or the spec's user;
//! - SelfSubjectRulesReview: the authorizer's rules for the requesting user
//!   in the spec's namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::rest::{Context, Creater, Gvk, Rest, WriteOptions};
use super::{DefaultStrategy, Resource, ResourceDef};
use crate::authn::UserInfo;
use crate::authz::{Attributes, Authorizer, Decision, Rules};
use crate::errors::Status;

#[derive(Clone, Copy)]
enum Review {
    /// `SelfSubjectReview`: who am I.
    SelfSubject,
    /// `SelfSubjectAccessReview`: may I do this.
    SelfAccess,
    /// `SubjectAccessReview`, `LocalSubjectAccessReview`: may they do this.
    Access,
    /// `SelfSubjectRulesReview`: what may I do.
    Rules,
}

/// One review resource.
struct Reviews {
    review: Review,
    kind: Gvk,
    authorizer: Arc<dyn Authorizer>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default()
}

/// The user a SubjectAccessReview's spec names.
fn spec_user(spec: &Value) -> UserInfo {
    let mut extra = BTreeMap::new();
    if let Some(m) = spec["extra"].as_object() {
        for (k, v) in m {
            extra.insert(k.clone(), strings(v));
        }
    }
    UserInfo { name: spec["user"].as_str().unwrap_or("").into(), uid: spec["uid"].as_str().unwrap_or("").into(), groups: strings(&spec["groups"]), extra }
}

/// An access review's `status` for `user` and the spec's attributes.
async fn access(authorizer: &dyn Authorizer, user: &UserInfo, spec: &Value) -> Value {
    let ra = &spec["resourceAttributes"];
    let na = &spec["nonResourceAttributes"];
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let (verb, path, namespace, group, version, resource, subresource, name) = if ra.is_object() || !na.is_object() {
        (s(ra, "verb"), String::new(), s(ra, "namespace"), s(ra, "group"), s(ra, "version"), s(ra, "resource"), s(ra, "subresource"), s(ra, "name"))
    } else {
        (s(na, "verb"), s(na, "path"), String::new(), String::new(), String::new(), String::new(), String::new(), String::new())
    };
    let attrs = Attributes {
        user,
        verb: &verb,
        resource_request: ra.is_object() || !na.is_object(),
        path: &path,
        namespace: &namespace,
        api_group: &group,
        api_version: &version,
        resource: &resource,
        subresource: &subresource,
        name: &name,
    };
    let mut status = json!({});
    match authorizer.authorize(&attrs).await {
        Ok(a) => {
            status["allowed"] = json!(a.decision == Decision::Allow);
            if a.decision == Decision::Deny {
                status["denied"] = json!(true);
            }
            if !a.reason.is_empty() {
                status["reason"] = json!(a.reason);
            }
        }
        Err(e) => {
            status["allowed"] = json!(false);
            status["evaluationError"] = json!(e.to_string());
        }
    }
    status
}

/// A rules review's `status`.
fn rules_status(r: Result<Rules, crate::authz::Error>) -> Value {
    let rules = match r {
        Ok(r) => r,
        Err(e) => return json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true, "evaluationError": e.to_string()}),
    };
    let resource: Vec<Value> = rules
        .resource_rules
        .iter()
        .map(|r| {
            let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
            if !r.resource_names.is_empty() {
                v["resourceNames"] = json!(r.resource_names);
            }
            v
        })
        .collect();
    let non_resource: Vec<Value> = rules.non_resource_rules.iter().map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})).collect();
    let mut status = json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": rules.incomplete});
    if !rules.evaluation_error.is_empty() {
        status["evaluationError"] = json!(rules.evaluation_error);
    }
    status
}

impl Rest for Reviews {
    fn kind(&self) -> &Gvk {
        &self.kind
    }
    fn creater(&self) -> Option<&dyn Creater> {
        Some(self)
    }
}

#[async_trait]
impl Creater for Reviews {
    async fn create(&self, ctx: &Context<'_>, obj: Value, _opts: &WriteOptions) -> Result<Value, Status> {
        let api_version = if self.kind.group.is_empty() { self.kind.version.clone() } else { format!("{}/{}", self.kind.group, self.kind.version) };
        let mut out = json!({"kind": self.kind.kind, "apiVersion": api_version, "metadata": {"creationTimestamp": null}});
        let spec = &obj["spec"];
        if !spec.is_null() {
            out["spec"] = spec.clone();
        }
        out["status"] = match self.review {
            Review::SelfSubject => json!({"userInfo": ctx.user.to_json()}),
            Review::SelfAccess => access(self.authorizer.as_ref(), ctx.user, spec).await,
            Review::Access => {
                // A LocalSubjectAccessReview answers about its own namespace
                // only (kube's `localsubjectaccessreview` REST).
                if !ctx.namespace.is_empty() {
                    if !spec["resourceAttributes"].is_object() {
                        let why = if spec["nonResourceAttributes"].is_object() { "disallowed on this kind of request" } else { "Required value" };
                        return Err(Status::bad_request(format!("spec.resourceAttributes: {why}")));
                    }
                    let ns = spec["resourceAttributes"]["namespace"].as_str().unwrap_or("");
                    if ns != ctx.namespace {
                        return Err(Status::bad_request(format!("spec.resourceAttributes.namespace must match namespace: {}", ctx.namespace)));
                    }
                }
                access(self.authorizer.as_ref(), &spec_user(spec), spec).await
            }
            Review::Rules => rules_status(self.authorizer.rules_for(ctx.user, spec["namespace"].as_str().unwrap_or("")).await),
        };
        Ok(out)
    }
}

/// `authentication.k8s.io/v1` TokenReview (kube
/// `pkg/registry/authentication/tokenreview`): asks `authenticator` about
/// a bearer token.
struct TokenReviews {
    kind: Gvk,
    authenticator: Arc<dyn crate::authn::Authenticator>,
    api_audiences: Vec<String>,
}

impl Rest for TokenReviews {
    fn kind(&self) -> &Gvk {
        &self.kind
    }
    fn creater(&self) -> Option<&dyn Creater> {
        Some(self)
    }
}

#[async_trait]
impl Creater for TokenReviews {
    async fn create(&self, _ctx: &Context<'_>, obj: Value, _opts: &WriteOptions) -> Result<Value, Status> {
        let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
        let token = spec["token"].as_str().unwrap_or("");
        if token.is_empty() {
            return Err(Status::bad_request("token is required for TokenReview in authentication"));
        }
        let asked = strings(&spec["audiences"]);
        let audiences = if asked.is_empty() { self.api_audiences.clone() } else { asked };
        let mut req = http::Request::new(());
        let header = http::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| Status::bad_request("the token is not a valid header value"))?;
        req.headers_mut().insert(http::header::AUTHORIZATION, header);
        req.extensions_mut().insert(crate::authn::service_account::Audiences(audiences.clone()));
        let mut status = json!({"user": {}});
        match self.authenticator.authenticate(&crate::authn::Credentials::of(&req)).await {
            Ok(Some(user)) => {
                status["authenticated"] = json!(true);
                status["user"] = user.to_json();
                status["audiences"] = json!(token_audiences(token, &audiences));
            }
            Ok(None) => {}
            Err(e) => status["error"] = json!(e.to_string()),
        }
        Ok(json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {"creationTimestamp": null}, "spec": spec, "status": status}))
    }
}

/// The audiences a token is good for among `wanted`: the JWT's `aud`
/// claim intersected with them, or all of them for tokens that name none
/// (kube's audience-agnostic authenticators).
fn token_audiences(token: &str, wanted: &[String]) -> Vec<String> {
    use base64::Engine as _;
    let aud = token.split('.').nth(1).and_then(|p| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(p).ok()).and_then(|b| serde_json::from_slice::<Value>(&b).ok()).map(|c| c["aud"].clone());
    let names: Vec<String> = match aud {
        Some(Value::String(a)) => vec![a],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(String::from).collect(),
        _ => return wanted.to_vec(),
    };
    wanted.iter().filter(|w| names.contains(w)).cloned().collect()
}

/// `authentication.k8s.io/v1` tokenreviews, answered by `authenticator`
/// (the server's whole authenticator: the token file, ServiceAccount
/// tokens and whatever else joins it) for `api_audiences` by default.
pub fn token_reviews(authenticator: Arc<dyn crate::authn::Authenticator>, api_audiences: Vec<String>) -> ResourceDef {
    let rest = Arc::new(TokenReviews { kind: Gvk::new("authentication.k8s.io", "v1", "TokenReview"), authenticator, api_audiences });
    ResourceDef::rest(Resource::new("authentication.k8s.io", "v1", "tokenreviews", "tokenreview", "TokenReview", false, Arc::new(DefaultStrategy)), rest)
}

#[allow(clippy::too_many_arguments)] // a table row of the registry
fn review(group: &str, version: &str, resource: &str, singular: &str, kind: &str, namespaced: bool, r: Review, authorizer: &Arc<dyn Authorizer>) -> ResourceDef {
    let rest = Arc::new(Reviews { review: r, kind: Gvk::new(group, version, kind), authorizer: authorizer.clone() });
    ResourceDef::rest(Resource::new(group, version, resource, singular, kind, namespaced, Arc::new(DefaultStrategy)), rest)
}

/// authentication.k8s.io v1 and v1beta1 (kubectl 1.27's `auth whoami`
/// asks v1beta1), then authorization.k8s.io v1, answered by `authorizer`.
pub fn resources(authorizer: Arc<dyn Authorizer>) -> Vec<ResourceDef> {
    const AUTHN: &str = "authentication.k8s.io";
    const AUTHZ: &str = "authorization.k8s.io";
    let a = &authorizer;
    vec![
        review(AUTHN, "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, Review::SelfSubject, a),
        review(AUTHN, "v1beta1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, Review::SelfSubject, a),
        review(AUTHZ, "v1", "localsubjectaccessreviews", "localsubjectaccessreview", "LocalSubjectAccessReview", true, Review::Access, a),
        review(AUTHZ, "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview", false, Review::SelfAccess, a),
        review(AUTHZ, "v1", "selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview", false, Review::Rules, a),
        review(AUTHZ, "v1", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false, Review::Access, a),
    ]
}
