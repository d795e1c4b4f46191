//! Authorization by a remote service (kube
//! `plugin/pkg/authorizer/webhook`), `--authorization-mode=...,Webhook`
//! with `--authorization-webhook-config-file`.
//!
//! For each request the server POSTs a `SubjectAccessReview` to the webhook
//! the kubeconfig names ([`crate::webhook`]):
//!
//! ```json
//! {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
//!  "metadata": {"creationTimestamp": null},
//!  "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "group": "",
//!                                  "version": "v1", "resource": "pods"},
//!           "user": "jane", "uid": "7", "groups": ["dev", "system:authenticated"]},
//!  "status": {"allowed": false}}
//! ```
//!
//! (`nonResourceAttributes: {path, verb}` for a URL path). `status.allowed`
//! is Allow, `status.denied` a final Deny, neither NoOpinion (the next mode
//! decides); `status.reason` goes with the decision (into a 403's message)
//! and `status.evaluationError` is logged. Answers are cached by the review's
//! spec: allowed ones for `--authorization-webhook-cache-authorized-ttl`
//! (5m), the others for `--authorization-webhook-cache-unauthorized-ttl`
//! (30s). A webhook that cannot be reached has no opinion, and that is not
//! cached (kube's `decisionOnError`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::{Attributes, Authorized, Authorizer, Decision, Error, Result};
use crate::webhook::Client;

/// How long one SubjectAccessReview may take (kube's webhook default).
const TIMEOUT: Duration = Duration::from_secs(30);

/// Entries kept at most (see the token webhook's cache).
const CACHE_CAPACITY: usize = 65_536;

/// The authorization webhook's flags (kube's `WebhookOptions` of
/// `BuiltInAuthorizationOptions`).
#[derive(Debug, Clone, clap::Args)]
#[group(id = "authorization_webhook")]
pub struct Flags {
    /// A kubeconfig file naming the webhook that answers
    /// SubjectAccessReviews; needed by `--authorization-mode=Webhook`.
    #[arg(long)]
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// How long allowed answers are cached.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denied and no-opinion answers are cached.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// The SubjectAccessReview version sent: `v1` or `v1beta1`.
    #[arg(long, default_value = "v1")]
    pub authorization_webhook_version: String,
}

impl Flags {
    /// The webhook authorizer, when a config file is given.
    ///
    /// # Errors
    /// An unsupported version or an unusable kubeconfig.
    pub fn authorizer(&self) -> Result<Option<Arc<dyn Authorizer>>> {
        let Some(path) = &self.authorization_webhook_config_file else { return Ok(None) };
        let version = crate::authn::webhook::check_version(&self.authorization_webhook_version).map_err(|e| Error::Mode(format!("--authorization-webhook-version: {e}")))?;
        let client = Client::from_kubeconfig(path, TIMEOUT).map_err(|e| Error::Mode(format!("--authorization-webhook-config-file: {e}")))?;
        Ok(Some(Arc::new(Webhook {
            client,
            version,
            authorized_ttl: self.authorization_webhook_cache_authorized_ttl,
            unauthorized_ttl: self.authorization_webhook_cache_unauthorized_ttl,
            cache: Mutex::new(HashMap::new()),
        })))
    }
}

/// The webhook authorizer with its cache.
pub struct Webhook {
    client: Client,
    version: &'static str,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    /// By the SHA-256 of the review's spec: when it expires, and the answer.
    cache: Mutex<HashMap<[u8; 32], (Instant, Authorized)>>,
}

/// The `spec` of the SubjectAccessReview for `attrs`.
pub fn review_spec(attrs: &Attributes<'_>) -> Value {
    let mut spec = serde_json::Map::new();
    if attrs.resource_request {
        let mut ra = serde_json::Map::new();
        for (k, v) in [
            ("namespace", attrs.namespace),
            ("verb", attrs.verb),
            ("group", attrs.api_group),
            ("version", attrs.api_version),
            ("resource", attrs.resource),
            ("subresource", attrs.subresource),
            ("name", attrs.name),
        ] {
            if !v.is_empty() {
                ra.insert(k.into(), v.into());
            }
        }
        spec.insert("resourceAttributes".into(), Value::Object(ra));
    } else {
        spec.insert("nonResourceAttributes".into(), json!({"path": attrs.path, "verb": attrs.verb}));
    }
    let u = attrs.user;
    spec.insert("user".into(), u.name.clone().into());
    if !u.uid.is_empty() {
        spec.insert("uid".into(), u.uid.clone().into());
    }
    if !u.groups.is_empty() {
        spec.insert("groups".into(), u.groups.clone().into());
    }
    if !u.extra.is_empty() {
        let extra: BTreeMap<&String, &Vec<String>> = u.extra.iter().collect();
        spec.insert("extra".into(), json!(extra));
    }
    Value::Object(spec)
}

/// The decision a SubjectAccessReview response gives.
pub fn decision_of(resp: &Value) -> Authorized {
    let status = &resp["status"];
    let reason = status["reason"].as_str().unwrap_or_default().to_string();
    let decision = if status["allowed"].as_bool() == Some(true) {
        Decision::Allow
    } else if status["denied"].as_bool() == Some(true) {
        Decision::Deny
    } else {
        Decision::NoOpinion
    };
    Authorized { decision, reason }
}

#[async_trait]
impl Authorizer for Webhook {
    async fn authorize(&self, attrs: &Attributes<'_>) -> Result<Authorized> {
        let spec = review_spec(attrs);
        let key: [u8; 32] = Sha256::digest(spec.to_string().as_bytes()).into();
        if let Some((until, a)) = self.cache.lock().get(&key) {
            if Instant::now() < *until {
                return Ok(a.clone());
            }
        }
        let review = json!({
            "apiVersion": format!("authorization.k8s.io/{}", self.version),
            "kind": "SubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"allowed": false},
        });
        let resp = match self.client.post_json(&review).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("authorization webhook: {e}");
                return Err(Error::Evaluation(format!("authorization webhook: {e}")));
            }
        };
        if let Some(e) = resp["status"]["evaluationError"].as_str().filter(|e| !e.is_empty()) {
            tracing::info!("authorization webhook evaluation error: {e}");
        }
        let answer = decision_of(&resp);
        let ttl = if answer.decision == Decision::Allow { self.authorized_ttl } else { self.unauthorized_ttl };
        if !ttl.is_zero() {
            let mut cache = self.cache.lock();
            if cache.len() >= CACHE_CAPACITY {
                let now = Instant::now();
                cache.retain(|_, (until, _)| now < *until);
                if cache.len() >= CACHE_CAPACITY {
                    cache.clear();
                }
            }
            cache.insert(key, (Instant::now() + ttl, answer.clone()));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;

    #[test]
    fn reviews_and_decisions_as_kube() {
        let user = UserInfo { name: "jane".into(), groups: vec!["dev".into()], ..Default::default() };
        let attrs = Attributes {
            user: &user,
            verb: "list",
            resource_request: true,
            path: "/api/v1/namespaces/a/pods",
            namespace: "a",
            api_group: "",
            api_version: "v1",
            resource: "pods",
            subresource: "",
            name: "",
        };
        assert_eq!(review_spec(&attrs), json!({"resourceAttributes": {"namespace": "a", "verb": "list", "version": "v1", "resource": "pods"}, "user": "jane", "groups": ["dev"]}));
        let path = Attributes { resource_request: false, path: "/metrics", verb: "get", ..attrs };
        assert_eq!(review_spec(&path)["nonResourceAttributes"], json!({"path": "/metrics", "verb": "get"}));
        // (status, decision, reason)
        let cases = [
            (json!({"allowed": true, "reason": "ok"}), Decision::Allow, "ok"),
            (json!({"allowed": false, "denied": true, "reason": "no"}), Decision::Deny, "no"),
            (json!({"allowed": false, "reason": "dunno"}), Decision::NoOpinion, "dunno"),
            (json!({}), Decision::NoOpinion, ""),
        ];
        for (status, d, r) in cases {
            assert_eq!(decision_of(&json!({ "status": status })), Authorized { decision: d, reason: r.into() });
        }
    }
}
