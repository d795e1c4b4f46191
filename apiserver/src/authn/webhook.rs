//! Bearer tokens checked by a remote service (kube
//! `plugin/pkg/authenticator/token/webhook` behind
//! `authentication/token/cache`), `--authentication-token-webhook-config-file`.
//!
//! For a bearer token the server POSTs a `TokenReview` to the webhook the
//! kubeconfig names ([`crate::webhook`]):
//!
//! ```json
//! {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
//!  "metadata": {"creationTimestamp": null}, "spec": {"token": "<token>"}, "status": {"user": {}}}
//! ```
//!
//! and reads `status`: `authenticated: true` with `user` (`username`,
//! `uid`, `groups`, `extra`) is that user, plus `system:authenticated`;
//! `authenticated: false` with an `error` is a failure (401), without one it
//! is no opinion (the token is nobody's: 401 unless another authenticator
//! knows it). Answers are cached by the token's SHA-256 for
//! `--authentication-token-webhook-cache-ttl` (default 2m), whether the
//! token was accepted or not, as kube's cached token authenticator does;
//! failures to reach the webhook are not cached.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::{bearer_token, Authenticator, Credentials, Error, Result, UserInfo, ALL_AUTHENTICATED};
use crate::webhook::Client;

/// How long one TokenReview may take (kube's webhook default of 30 s).
const TIMEOUT: Duration = Duration::from_secs(30);

/// Entries kept at most; past this, expired entries are dropped and then,
/// if still full, all.
const CACHE_CAPACITY: usize = 65_536;

/// The token webhook's flags (kube's `WebhookAuthenticationOptions`).
#[derive(Debug, Clone, clap::Args)]
#[group(id = "token_webhook")]
pub struct Flags {
    /// A kubeconfig file naming the webhook (server URL, CA, client
    /// credentials) that answers TokenReviews.
    #[arg(long)]
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// How long the webhook's answers are cached.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// The TokenReview version sent: `v1` or `v1beta1`.
    #[arg(long, default_value = "v1")]
    pub authentication_token_webhook_version: String,
}

impl Flags {
    /// The authenticator these flags configure, if any.
    ///
    /// # Errors
    /// An unsupported version or an unusable kubeconfig.
    pub fn authenticator(&self) -> std::result::Result<Option<Arc<dyn Authenticator>>, String> {
        let Some(path) = &self.authentication_token_webhook_config_file else { return Ok(None) };
        let version = check_version(&self.authentication_token_webhook_version).map_err(|e| format!("--authentication-token-webhook-version: {e}"))?;
        let client = Client::from_kubeconfig(path, TIMEOUT).map_err(|e| format!("--authentication-token-webhook-config-file: {e}"))?;
        Ok(Some(Arc::new(TokenWebhook::new(client, version, self.authentication_token_webhook_cache_ttl))))
    }
}

/// `v1` or `v1beta1`, the versions kube speaks to webhooks.
///
/// # Errors
/// Any other version.
pub fn check_version(v: &str) -> std::result::Result<&'static str, String> {
    match v {
        "v1" => Ok("v1"),
        "v1beta1" => Ok("v1beta1"),
        other => Err(format!("unsupported webhook version {other:?} (supported: v1, v1beta1)")),
    }
}

/// A webhook's answer: a user, nobody, or an error it reported.
type Answer = std::result::Result<Option<UserInfo>, String>;

/// The webhook token authenticator with its cache.
pub struct TokenWebhook {
    client: Client,
    version: &'static str,
    ttl: Duration,
    cache: Mutex<HashMap<[u8; 32], (Instant, Answer)>>,
}

impl TokenWebhook {
    /// An authenticator that asks `client` with TokenReview `version` and
    /// caches answers for `ttl` (zero: no cache).
    pub fn new(client: Client, version: &'static str, ttl: Duration) -> Self {
        TokenWebhook { client, version, ttl, cache: Mutex::new(HashMap::new()) }
    }

    /// Asks the webhook.
    ///
    /// # Errors
    /// The webhook could not be reached or answered something that is not
    /// a TokenReview.
    async fn review(&self, token: &str) -> std::result::Result<Answer, String> {
        let review = json!({
            "apiVersion": format!("authentication.k8s.io/{}", self.version),
            "kind": "TokenReview",
            "metadata": {"creationTimestamp": null},
            "spec": {"token": token},
            "status": {"user": {}},
        });
        let resp = self.client.post_json(&review).await.map_err(|e| format!("webhook token authenticator: {e}"))?;
        Ok(answer_of(&resp))
    }
}

/// The answer a TokenReview response gives (see the module doc).
pub fn answer_of(resp: &Value) -> Answer {
    let status = &resp["status"];
    if status["authenticated"].as_bool() != Some(true) {
        return match status["error"].as_str() {
            Some(e) if !e.is_empty() => Err(e.to_string()),
            _ => Ok(None),
        };
    }
    let u = &status["user"];
    let strings = |v: &Value| -> Vec<String> { v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default() };
    let mut groups = strings(&u["groups"]);
    if !groups.iter().any(|g| g == ALL_AUTHENTICATED) {
        groups.push(ALL_AUTHENTICATED.into());
    }
    let extra = u["extra"].as_object().map(|m| m.iter().map(|(k, v)| (k.to_lowercase(), strings(v))).collect()).unwrap_or_default();
    Ok(Some(UserInfo { name: u["username"].as_str().unwrap_or_default().to_string(), uid: u["uid"].as_str().unwrap_or_default().to_string(), groups, extra }))
}

#[async_trait]
impl Authenticator for TokenWebhook {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        let Some(token) = bearer_token(req.headers) else { return Ok(None) };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let cached = self.cache.lock().get(&key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, a)| a.clone());
        let answer = match cached {
            Some(a) => a,
            None => {
                let a = self.review(token).await.map_err(|e| {
                    tracing::warn!("{e}");
                    Error::Rejected(e)
                })?;
                if !self.ttl.is_zero() {
                    let mut cache = self.cache.lock();
                    if cache.len() >= CACHE_CAPACITY {
                        let ttl = self.ttl;
                        cache.retain(|_, (at, _)| at.elapsed() < ttl);
                        if cache.len() >= CACHE_CAPACITY {
                            cache.clear();
                        }
                    }
                    cache.insert(key, (Instant::now(), a.clone()));
                }
                a
            }
        };
        answer.map_err(Error::Rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_reviews_answer_as_kube() {
        let ok = json!({"status": {"authenticated": true, "user": {"username": "jane", "uid": "7", "groups": ["dev"], "extra": {"Scopes": ["a"]}}}});
        let u = answer_of(&ok).ok().flatten().unwrap_or_default();
        assert_eq!((u.name.as_str(), u.uid.as_str(), u.groups.clone()), ("jane", "7", vec!["dev".to_string(), ALL_AUTHENTICATED.into()]));
        assert_eq!(u.extra.get("scopes"), Some(&vec!["a".to_string()]));
        assert_eq!(answer_of(&json!({"status": {"authenticated": false}})), Ok(None));
        assert_eq!(answer_of(&json!({"status": {"authenticated": false, "error": "expired"}})), Err("expired".to_string()));
        assert_eq!(answer_of(&json!({})), Ok(None));
        assert!(check_version("v2").is_err());
    }
}
