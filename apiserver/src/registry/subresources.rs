//! Subresources: REST objects over their resource's store (kube's
//! `StatusREST`, `ScaleREST` (in [`super::scale`]) and the namespace
//! `FinalizeREST`).
//!
//! A resource lists the subresources it has ([`super::ResourceDef`]); the
//! registry builds each one's REST object over the resource's
//! [`Store`] when the resource is added. A new subresource (a service
//! account's `token`, a pod's `eviction`) is one more [`Subresource`] here
//! and touches neither the store nor the handlers.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::rest::{Context, GetOptions, Getter, Gvk, Rest, UpdatedObjectInfo, Updater, WriteOptions};
use super::store::{Part, Store};
use crate::errors::{Cause, Status};
use crate::meta;

/// A subresource of a stored resource: its name and how to build its REST
/// object over the resource's store.
pub trait Subresource: Send + Sync {
    /// The name in the URL (`status`).
    fn name(&self) -> &str;

    /// The REST object over `store`.
    fn rest(&self, store: &Arc<Store>) -> Arc<dyn Rest>;
}

/// `status`: GET the object; PUT and PATCH change only its `status`.
pub fn status() -> Arc<dyn Subresource> {
    Arc::new(PartSubresource { name: "status", ephemeral_containers: false })
}

/// `ephemeralcontainers` (a pod's): GET the pod; PUT and PATCH change only
/// its `spec.ephemeralContainers`, which may grow but whose existing
/// containers may not change (kube's `EphemeralContainersREST`; `kubectl
/// debug` patches it).
pub fn ephemeral_containers() -> Arc<dyn Subresource> {
    Arc::new(PartSubresource { name: "ephemeralcontainers", ephemeral_containers: true })
}

/// `finalize` (a namespace's): PUT only.
pub fn finalize() -> Arc<dyn Subresource> {
    Arc::new(FinalizeSubresource)
}

/// A subresource that reads the whole object and writes one part of it:
/// `status`, or a pod's `ephemeralcontainers`.
struct PartSubresource {
    name: &'static str,
    ephemeral_containers: bool,
}

impl Subresource for PartSubresource {
    fn name(&self) -> &str {
        self.name
    }
    fn rest(&self, store: &Arc<Store>) -> Arc<dyn Rest> {
        Arc::new(PartRest { store: store.clone(), ephemeral_containers: self.ephemeral_containers })
    }
}

/// The REST object of a [`PartSubresource`].
struct PartRest {
    store: Arc<Store>,
    ephemeral_containers: bool,
}

impl Rest for PartRest {
    fn kind(&self) -> &Gvk {
        Rest::kind(self.store.as_ref())
    }
    fn getter(&self) -> Option<&dyn Getter> {
        Some(self)
    }
    fn updater(&self) -> Option<&dyn Updater> {
        Some(self)
    }
}

#[async_trait]
impl Getter for PartRest {
    async fn get(&self, ctx: &Context<'_>, name: &str, opts: &GetOptions) -> Result<Value, Status> {
        Getter::get(self.store.as_ref(), ctx, name, opts).await
    }
}

#[async_trait]
impl Updater for PartRest {
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status> {
        if self.ephemeral_containers {
            let part = Part { subresource: "ephemeralcontainers", status_only: false, shown_as: None };
            return self.store.update_part(ctx, name, &EphemeralContainersUpdate { inner: info }, opts, part).await;
        }
        self.store.update_part(ctx, name, info, opts, Part::STATUS).await
    }
}

struct FinalizeSubresource;

impl Subresource for FinalizeSubresource {
    fn name(&self) -> &str {
        "finalize"
    }
    fn rest(&self, store: &Arc<Store>) -> Arc<dyn Rest> {
        Arc::new(FinalizeRest { store: store.clone() })
    }
}

/// The finalize subresource's REST object: an update of the namespace.
struct FinalizeRest {
    store: Arc<Store>,
}

impl Rest for FinalizeRest {
    fn kind(&self) -> &Gvk {
        Rest::kind(self.store.as_ref())
    }
    fn updater(&self) -> Option<&dyn Updater> {
        Some(self)
    }
}

#[async_trait]
impl Updater for FinalizeRest {
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status> {
        self.store.update_part(ctx, name, info, opts, Part { subresource: "finalize", status_only: false, shown_as: None }).await
    }
}

/// An update of a pod through `ephemeralcontainers`: the current pod with
/// only `spec.ephemeralContainers` taken from what the client sent.
struct EphemeralContainersUpdate<'a> {
    inner: &'a dyn UpdatedObjectInfo,
}

#[async_trait]
impl UpdatedObjectInfo for EphemeralContainersUpdate<'_> {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let Some(old) = current else { return Err(Status::internal("an ephemeralcontainers update without its pod")) };
        let sent = self.inner.updated_object(Some(old)).await?;
        let wanted = sent["spec"]["ephemeralContainers"].as_array().cloned().unwrap_or_default();
        let existing = old["spec"]["ephemeralContainers"].as_array().cloned().unwrap_or_default();
        let mut causes = Vec::new();
        for (i, had) in existing.iter().enumerate() {
            let name = had["name"].as_str().unwrap_or("");
            if !wanted.iter().any(|w| w == had) {
                causes.push(Cause::forbidden(&format!("spec.ephemeralContainers[{i}]"), &format!("existing ephemeral containers \"{name}\" may not be changed")));
            }
        }
        if !causes.is_empty() {
            return Err(Status::invalid("", "Pod", meta::name(old), causes));
        }
        let mut pod = old.clone();
        pod["spec"]["ephemeralContainers"] = Value::Array(wanted);
        if let (Some(m), Some(rv)) = (meta::meta_mut(&mut pod), sent["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty())) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        Ok(pod)
    }

    fn may_create(&self) -> bool {
        false
    }
}
