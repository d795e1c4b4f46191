//! Subresources: REST objects over their resource's store (kube's
//! `StatusREST`, `ScaleREST` and the namespace `FinalizeREST`).
//!
//! A resource lists the subresources it has ([`super::ResourceDef`]); the
//! registry builds each one's REST object over the resource's
//! [`Store`] when the resource is added. A new subresource (a service
//! account's `token`, a pod's `eviction`) is one more [`Subresource`] here
//! and touches neither the store nor the handlers.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::rest::{Context, GetOptions, Getter, Gvk, Rest, UpdatedObjectInfo, Updater, WriteOptions};
use super::store::{Part, ShownAs, Store};
use crate::errors::{Cause, Status};
use crate::meta;
use crate::selectors::LabelSelector;

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

/// `scale` (`autoscaling/v1` Scale of `spec.replicas`).
pub fn scale() -> Arc<dyn Subresource> {
    Arc::new(ScaleSubresource)
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

struct ScaleSubresource;

impl Subresource for ScaleSubresource {
    fn name(&self) -> &str {
        "scale"
    }
    fn rest(&self, store: &Arc<Store>) -> Arc<dyn Rest> {
        Arc::new(ScaleRest { store: store.clone(), kind: Gvk::new("autoscaling", "v1", "Scale") })
    }
}

/// The scale subresource's REST object: reads and writes a Scale, stored
/// as its object's `spec.replicas`.
struct ScaleRest {
    store: Arc<Store>,
    kind: Gvk,
}

/// An object as an `autoscaling/v1` Scale.
pub fn to_scale(obj: &Value) -> Value {
    let m = &obj["metadata"];
    let sel = LabelSelector::from_object(&obj["spec"]["selector"]);
    let selector: Vec<String> = sel
        .0
        .iter()
        .filter_map(|r| match r {
            crate::selectors::LabelRequirement::Equals(k, v, true) => Some(format!("{k}={v}")),
            _ => None,
        })
        .collect();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector.join(",")},
    })
}

/// Applies a Scale to its object: its replicas, under its resourceVersion.
///
/// # Errors
/// 400 for a Scale without `spec.replicas`; 422 Invalid on the Scale for
/// negative replicas.
pub fn from_scale(scale: &Value, old: &Value) -> Result<Value, Status> {
    let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| Status::bad_request("spec.replicas: Required value"))?;
    if replicas < 0 {
        // kube's `ValidateScale`, reported on the Scale, not its object.
        let cause = Cause::invalid("spec.replicas", &Value::from(replicas), "must be greater than or equal to 0");
        return Err(Status::invalid("autoscaling", "Scale", meta::name(old), vec![cause]));
    }
    let mut new = old.clone();
    new["spec"]["replicas"] = Value::from(replicas);
    let rv = meta::resource_version(scale);
    if !rv.is_empty() {
        new["metadata"]["resourceVersion"] = Value::String(rv.to_string());
    }
    Ok(new)
}

/// A Scale update as an update of its object.
struct ScaleUpdate<'a> {
    inner: &'a dyn UpdatedObjectInfo,
}

#[async_trait]
impl UpdatedObjectInfo for ScaleUpdate<'_> {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let Some(old) = current else { return Err(Status::internal("a scale update without its object")) };
        let scale = self.inner.updated_object(Some(&to_scale(old))).await?;
        from_scale(&scale, old)
    }

    fn may_create(&self) -> bool {
        false
    }

    fn apply_config(&self) -> Option<&Value> {
        self.inner.apply_config()
    }
}

/// An object as its Scale, for admission and server-side apply (kube's
/// scale REST and its `managedFields` handler): an entry of the object that
/// owns `.spec.replicas` owns the Scale's `.spec.replicas`; after an apply,
/// an entry that no longer owns it there loses it on the object, and a new
/// owner gets an entry on the object (with the object's apiVersion and
/// subresource `scale`).
struct AsScale;

/// Entries are the same manager when manager, operation and subresource
/// agree (the apiVersions of the two kinds differ).
fn same_manager(a: &Value, b: &Value) -> bool {
    ["manager", "operation", "subresource"].iter().all(|k| a.get(*k).and_then(Value::as_str).unwrap_or("") == b.get(*k).and_then(Value::as_str).unwrap_or(""))
}

fn owns_replicas(entry: &Value) -> bool {
    entry["fieldsV1"]["f:spec"].get("f:replicas").is_some()
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default()
}

/// `entry` owning only `.spec.replicas`, as of `api_version`.
fn replicas_entry(entry: &Value, api_version: &str) -> Value {
    let mut e = json!({"manager": entry["manager"], "operation": entry["operation"], "apiVersion": api_version, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}});
    for k in ["time", "subresource"] {
        if let Some(v) = entry.get(k) {
            e[k] = v.clone();
        }
    }
    e
}

fn set_entries(obj: &mut Value, list: Vec<Value>) {
    if let Some(m) = meta::meta_mut(obj) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

impl ShownAs for AsScale {
    fn kind(&self) -> (&'static str, &'static str, &'static str) {
        ("autoscaling", "v1", "Scale")
    }

    fn shown(&self, obj: &Value) -> Value {
        let mut scale = to_scale(obj);
        let mapped = entries(obj).iter().filter(|e| owns_replicas(e)).map(|e| replicas_entry(e, "autoscaling/v1")).collect();
        set_entries(&mut scale, mapped);
        scale
    }

    fn carry_back(&self, sub: &Value, obj: &Value) -> Result<Value, Status> {
        let mut new = from_scale(sub, obj)?;
        let owners = entries(sub);
        let mut out = Vec::new();
        for mut e in entries(obj) {
            if owns_replicas(&e) && !owners.iter().any(|s| same_manager(s, &e)) {
                if let Some(spec) = e["fieldsV1"].get_mut("f:spec").and_then(Value::as_object_mut) {
                    spec.remove("f:replicas");
                    if spec.is_empty() {
                        if let Some(f) = e["fieldsV1"].as_object_mut() {
                            f.remove("f:spec");
                        }
                    }
                }
                if e["fieldsV1"].as_object().is_some_and(serde_json::Map::is_empty) {
                    continue;
                }
            }
            out.push(e);
        }
        let api_version = obj["apiVersion"].as_str().unwrap_or("");
        for s in &owners {
            match out.iter_mut().find(|e| same_manager(e, s)) {
                Some(e) if !owns_replicas(e) => {
                    e["fieldsV1"]["f:spec"]["f:replicas"] = json!({});
                    if let Some(t) = s.get("time") {
                        e["time"] = t.clone();
                    }
                }
                Some(_) => {}
                None => out.push(replicas_entry(s, api_version)),
            }
        }
        set_entries(&mut new, out);
        Ok(new)
    }
}

impl Rest for ScaleRest {
    fn kind(&self) -> &Gvk {
        &self.kind
    }
    fn negotiated(&self) -> bool {
        false
    }
    fn getter(&self) -> Option<&dyn Getter> {
        Some(self)
    }
    fn updater(&self) -> Option<&dyn Updater> {
        Some(self)
    }
}

#[async_trait]
impl Getter for ScaleRest {
    async fn get(&self, ctx: &Context<'_>, name: &str, opts: &GetOptions) -> Result<Value, Status> {
        Getter::get(self.store.as_ref(), ctx, name, opts).await.map(|o| to_scale(&o))
    }
}

#[async_trait]
impl Updater for ScaleRest {
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status> {
        let part = Part { subresource: "scale", status_only: false, shown_as: Some(&AsScale) };
        let (obj, created) = self.store.update_part(ctx, name, &ScaleUpdate { inner: info }, opts, part).await?;
        Ok((to_scale(&obj), created))
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
