//! A ServiceAccount's `token` subresource: `POST
//! /api/v1/namespaces/<ns>/serviceaccounts/<name>/token` with an
//! `authentication.k8s.io/v1` TokenRequest answers a signed token (kube
//! `pkg/registry/core/serviceaccount/storage/token.go`).
//!
//! - `spec.audiences` defaults to `--api-audiences`;
//! - `spec.expirationSeconds` defaults to 3600, must be at least 600 and at
//!   most 2^32 (422 Invalid on the TokenRequest otherwise), and is cut to
//!   `--service-account-max-token-expiration`;
//! - `spec.boundObjectRef` (`Pod`, `Secret` or `Node`, `v1`) must name an
//!   existing object (404 otherwise), of the uid given if one is (409);
//!   the token is valid only while that object exists.
//!
//! The answer is the TokenRequest with the defaulted spec and `status.token`
//! and `status.expirationTimestamp` (RFC 3339).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::rest::{Context, GetOptions, Getter as _, Gvk, NamedCreater, Rest, WriteOptions};
use super::store::Store;
use super::subresources::Subresource;
use crate::authn::service_account::{BoundObject, Tokens};
use crate::errors::{Cause, Status};

/// Default `spec.expirationSeconds` (one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Shortest `spec.expirationSeconds` (ten minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest `spec.expirationSeconds` (2^32).
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// The `token` subresource over `tokens`.
pub fn subresource(tokens: Arc<Tokens>) -> Arc<dyn Subresource> {
    Arc::new(TokenSubresource(tokens))
}

struct TokenSubresource(Arc<Tokens>);

impl Subresource for TokenSubresource {
    fn name(&self) -> &str {
        "token"
    }
    fn rest(&self, store: &Arc<Store>) -> Arc<dyn Rest> {
        Arc::new(TokenRest { service_accounts: store.clone(), tokens: self.0.clone(), kind: Gvk::new("authentication.k8s.io", "v1", "TokenRequest") })
    }
}

struct TokenRest {
    service_accounts: Arc<Store>,
    tokens: Arc<Tokens>,
    kind: Gvk,
}

impl Rest for TokenRest {
    fn kind(&self) -> &Gvk {
        &self.kind
    }
    fn negotiated(&self) -> bool {
        false
    }
    fn named_creater(&self) -> Option<&dyn NamedCreater> {
        Some(self)
    }
}

fn invalid(name: &str, causes: Vec<Cause>) -> Status {
    Status::invalid("authentication.k8s.io", "TokenRequest", name, causes)
}

impl TokenRest {
    /// The bound object of `spec.boundObjectRef`, looked up.
    async fn bound(&self, ctx: &Context<'_>, name: &str, r: &Value) -> Result<Option<BoundObject>, Status> {
        if !r.is_object() {
            return Ok(None);
        }
        let kind = r["kind"].as_str().unwrap_or("");
        let api_version = r["apiVersion"].as_str().unwrap_or("v1");
        let resource = match (kind, api_version) {
            ("Pod", "v1") => "pods",
            ("Secret", "v1") => "secrets",
            ("Node", "v1") => "nodes",
            _ => return Err(Status::bad_request(format!("cannot bind token for serviceaccount {name:?} to object of type {api_version}, Kind={kind}"))),
        };
        let obj_name = r["name"].as_str().unwrap_or("");
        if obj_name.is_empty() {
            return Err(invalid(name, vec![Cause::required("spec.boundObjectRef.name", "")]));
        }
        let entry = self.lookup(ctx, resource, obj_name).await?;
        let uid = entry["metadata"]["uid"].as_str().unwrap_or("").to_string();
        if let Some(want) = r["uid"].as_str().filter(|u| !u.is_empty()) {
            if want != uid {
                let why = format!("the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated");
                return Err(Status::conflict("", kind, obj_name, &why));
            }
        }
        Ok(Some(BoundObject { kind: kind.to_string(), name: obj_name.to_string(), uid }))
    }

    /// Reads a bound object from the store the token authenticator
    /// checks; 404 in kube's wording when it is missing.
    async fn lookup(&self, ctx: &Context<'_>, resource: &str, name: &str) -> Result<Value, Status> {
        let ns = if resource == "nodes" { None } else { Some(ctx.namespace) };
        match self.tokens.storage().get(&crate::storage::keys::object("", resource, ns, name)).await {
            Ok(v) => Ok(v),
            Err(crate::storage::Error::NotFound) => Err(Status::not_found("", resource, name)),
            Err(e) => Err(Status::internal(e)),
        }
    }
}

#[async_trait]
impl NamedCreater for TokenRest {
    async fn create(&self, ctx: &Context<'_>, name: &str, obj: Value, opts: &WriteOptions) -> Result<Value, Status> {
        let sa = self.service_accounts.get(ctx, name, &GetOptions::default()).await?;
        let mut spec = obj.get("spec").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let audiences: Vec<String> = spec["audiences"].as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default();
        let audiences = if audiences.is_empty() { self.tokens.config().api_audiences.clone() } else { audiences };
        let mut seconds = match &spec["expirationSeconds"] {
            Value::Null => DEFAULT_EXPIRATION_SECONDS,
            v => v.as_i64().ok_or_else(|| invalid(name, vec![Cause::invalid("spec.expirationSeconds", v, "must be an integer")]))?,
        };
        if seconds < MIN_EXPIRATION_SECONDS {
            return Err(invalid(name, vec![Cause::invalid("spec.expirationSeconds", &json!(seconds), "may not specify a duration less than 10 minutes")]));
        }
        if seconds > MAX_EXPIRATION_SECONDS {
            return Err(invalid(name, vec![Cause::invalid("spec.expirationSeconds", &json!(seconds), "may not specify a duration larger than 2^32 seconds")]));
        }
        if let Some(max) = self.tokens.config().max_expiration {
            seconds = seconds.min(max.as_secs() as i64);
        }
        let bound = self.bound(ctx, name, &spec["boundObjectRef"]).await?;
        if let Some(b) = &bound {
            spec["boundObjectRef"]["uid"] = json!(b.uid);
            if spec["boundObjectRef"]["apiVersion"].is_null() {
                spec["boundObjectRef"]["apiVersion"] = json!("v1");
            }
        }
        spec["audiences"] = json!(audiences);
        spec["expirationSeconds"] = json!(seconds);
        let issued = if opts.dry_run { None } else { Some(self.tokens.issue(&sa, &audiences, seconds, bound.as_ref()).map_err(Status::internal)?) };
        let (token, expires) = match issued {
            Some(i) => (i.token, i.expires),
            None => (String::new(), 0),
        };
        let expiration = std::time::UNIX_EPOCH + std::time::Duration::from_secs(expires.max(0) as u64);
        Ok(json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ctx.namespace, "creationTimestamp": crate::meta::now()},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": humantime::format_rfc3339_seconds(expiration).to_string()},
        }))
    }
}
