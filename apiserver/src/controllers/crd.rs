//! The CustomResourceDefinition controllers (kube apiextensions-apiserver's
//! naming, establishing and finalizer controllers and its CRD handler,
//! reduced to conversion strategy None).
//!
//! An informer on CRDs queues every CRD that changes, on every node:
//!
//! - **Conditions** (every node; writes race harmlessly, a second writer
//!   finds nothing to change): `NamesAccepted` is `True` unless another
//!   CRD of the same group has already accepted one of its names (plural,
//!   singular, short names, kind, list kind); then `status.acceptedNames`
//!   is set and `Established` turns `True`.
//! - **Serving** (every node): an established CRD's served versions are
//!   added to the registry (watch cache, discovery, OpenAPI) and their
//!   schemas to the schema store; a change of names, scope or versions
//!   serves the new set; a CRD that is gone is withdrawn.
//! - **Cleanup** (the node holding the Lease `kube-system/crd-finalizer`):
//!   a CRD being deleted has every custom resource deleted (in all
//!   namespaces, through the store: finalizers hold as for any delete);
//!   once none remain, the `customresourcecleanup` finalizer is dropped
//!   and the CRD goes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use super::queue::Queue;
use crate::errors::Status;
use crate::meta;
use crate::registry::apiextensions::{condition_true, set_condition, CrdSpec, CLEANUP_FINALIZER};
use crate::registry::rest::{CollectionDeleter as _, Context, DeleteOptions, FieldValidation, ListOptions, Lister as _, UpdatedObjectInfo, WriteOptions};
use crate::registry::store::{Part, Store};
use crate::registry::Registry;
use crate::schema::SchemaStore;
use crate::warning::Warnings;

/// The cleanup loop's Lease name.
pub const LEASE: &str = "crd-finalizer";
/// Retry delay after a failed pass (a conflict, objects held by finalizers).
const RETRY: Duration = Duration::from_millis(200);

/// Queues every CRD that changes, for both loops.
struct Enqueue {
    serving: Queue,
    cleanup: Queue,
}

impl Enqueue {
    fn consider(&self, crd: &Value) {
        self.serving.add(meta::name(crd));
        if meta::is_deleting(crd) {
            self.cleanup.add(meta::name(crd));
        }
    }
}

impl EventHandler for Enqueue {
    fn on_add(&self, obj: &Value) {
        self.consider(obj);
    }
    fn on_update(&self, old: &Value, new: &Value) {
        self.consider(new);
        // A CRD whose names changed may free names another one waits for.
        if old["status"]["acceptedNames"] != new["status"]["acceptedNames"] {
            self.serving.add("");
        }
    }
    fn on_delete(&self, obj: &Value) {
        self.serving.add(meta::name(obj));
        // Its names are free now.
        self.serving.add("");
    }
}

/// What is served for one CRD on this node.
struct Served {
    /// The spec it is served from, with schemas.
    spec: CrdSpec,
    /// Whether the CRD is being deleted (its resources refuse creates).
    terminating: Arc<AtomicBool>,
}

/// `spec` without its schemas: what the registry entries are built from
/// (a change of schema alone only replaces the schemas).
fn shape_of(spec: &CrdSpec) -> CrdSpec {
    let mut s = spec.clone();
    for v in &mut s.versions {
        v.schema = Value::Null;
    }
    s
}

/// The controller.
pub struct CrdController {
    registry: Arc<Registry>,
    schemas: SchemaStore,
    crds: Arc<Store>,
    lister: Lister,
    serving: Queue,
    cleanup: Queue,
    served: Mutex<HashMap<String, Served>>,
}

/// The write of a CRD's status conditions (through `/status`).
struct Conditions {
    /// The other CRDs, as the informer has them.
    others: Vec<Arc<Value>>,
}

/// The first name of `crd` that another CRD of its group has accepted:
/// (condition reason, message).
fn conflict(crd: &Value, others: &[Arc<Value>]) -> Option<(&'static str, String)> {
    let spec = CrdSpec::of(crd);
    let group = &spec.group;
    for other in others {
        if meta::name(other) == meta::name(crd) || other["spec"]["group"].as_str() != Some(group.as_str()) {
            continue;
        }
        let taken = &other["status"]["acceptedNames"];
        let t = |k: &str| taken[k].as_str().unwrap_or("").to_string();
        let short: Vec<String> = taken["shortNames"].as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default();
        if !spec.plural.is_empty() && (t("plural") == spec.plural || t("singular") == spec.plural) {
            return Some(("PluralConflict", format!("{:?} is already in use", spec.plural)));
        }
        if !spec.singular.is_empty() && (t("singular") == spec.singular || t("plural") == spec.singular) {
            return Some(("SingularConflict", format!("{:?} is already in use", spec.singular)));
        }
        for s in &spec.short_names {
            if short.contains(s) || t("plural") == *s || t("singular") == *s {
                return Some(("ShortNamesConflict", format!("{s:?} is already in use")));
            }
        }
        if t("kind") == spec.kind || t("listKind") == spec.kind {
            return Some(("KindConflict", format!("{:?} is already in use", spec.kind)));
        }
        if t("listKind") == spec.list_kind || t("kind") == spec.list_kind {
            return Some(("ListKindConflict", format!("{:?} is already in use", spec.list_kind)));
        }
    }
    None
}

/// The status a CRD should have: names accepted (or the conflict) and
/// established.
fn desired(crd: &Value, others: &[Arc<Value>]) -> Value {
    let mut next = crd.clone();
    if meta::is_deleting(crd) {
        return next;
    }
    match conflict(crd, others) {
        None => {
            let names = crd["spec"]["names"].clone();
            let spec = CrdSpec::of(crd);
            let mut accepted = json!({"plural": spec.plural, "singular": spec.singular, "kind": spec.kind, "listKind": spec.list_kind});
            if !names["shortNames"].is_null() {
                accepted["shortNames"] = names["shortNames"].clone();
            }
            if !names["categories"].is_null() {
                accepted["categories"] = names["categories"].clone();
            }
            next["status"]["acceptedNames"] = accepted;
            set_condition(&mut next, "NamesAccepted", "True", "NoConflicts", "no conflicts found");
            set_condition(&mut next, "Established", "True", "InitialNamesAccepted", "the initial names have been accepted");
        }
        Some((reason, message)) => {
            set_condition(&mut next, "NamesAccepted", "False", reason, &message);
            if !condition_true(crd, "Established") {
                set_condition(&mut next, "Established", "False", "NotAccepted", "not all names are accepted");
            }
        }
    }
    next
}

#[async_trait]
impl UpdatedObjectInfo for Conditions {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let crd = current.cloned().unwrap_or(Value::Null);
        Ok(desired(&crd, &self.others))
    }
    fn may_create(&self) -> bool {
        false
    }
}

/// Sets the `Terminating` condition.
struct SetTerminating<'a> {
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

#[async_trait]
impl UpdatedObjectInfo for SetTerminating<'_> {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let mut crd = current.cloned().unwrap_or(Value::Null);
        set_condition(&mut crd, "Terminating", self.status, self.reason, self.message);
        Ok(crd)
    }
    fn may_create(&self) -> bool {
        false
    }
}

/// Drops the cleanup finalizer.
struct DropFinalizer;

#[async_trait]
impl UpdatedObjectInfo for DropFinalizer {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let mut crd = current.cloned().unwrap_or(Value::Null);
        if let Some(list) = crd["metadata"]["finalizers"].as_array_mut() {
            list.retain(|f| f != &json!(CLEANUP_FINALIZER));
        }
        Ok(crd)
    }
    fn may_create(&self) -> bool {
        false
    }
}

fn write_options() -> WriteOptions {
    WriteOptions { kind: "UpdateOptions", dry_run: false, field_manager: Some("apiextensions-controller".into()), field_validation: FieldValidation::Ignore, force: false }
}

impl CrdController {
    /// Starts the informer on CRDs (`crds`, the CRD resource's store).
    pub fn new(registry: Arc<Registry>, crds: Arc<Store>, stop: watch::Receiver<bool>) -> Arc<Self> {
        let (serving, cleanup) = (Queue::new(), Queue::new());
        let lister = informer::start(crds.clone(), Arc::new(Enqueue { serving: serving.clone(), cleanup: cleanup.clone() }), stop);
        let schemas = registry.schemas().clone();
        Arc::new(CrdController { registry, schemas, crds, lister, serving, cleanup, served: Mutex::new(HashMap::new()) })
    }

    /// The conditions and serving loop, on every node, until `stop`.
    pub async fn run_serving(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        loop {
            let key = tokio::select! {
                k = self.serving.get() => k,
                _ = stop.wait_for(|s| *s) => return,
            };
            let Some(key) = key else { return };
            if key.is_empty() {
                // Names were freed: every CRD whose names are not accepted
                // tries again.
                for crd in self.lister.list() {
                    if !condition_true(&crd, "NamesAccepted") {
                        self.serving.add(meta::name(&crd));
                    }
                }
            } else if let Err(e) = self.sync(&key).await {
                tracing::debug!("crd {key}: {e}");
                self.serving.add_after(&key, RETRY);
            }
            self.serving.done(&key);
        }
    }

    /// One CRD: its conditions, then what this node serves for it.
    async fn sync(&self, name: &str) -> Result<(), Status> {
        let Some(crd) = self.lister.get(name) else {
            self.withdraw(name);
            return Ok(());
        };
        let others: Vec<Arc<Value>> = self.lister.list().into_iter().filter(|o| meta::name(o) != name).collect();
        if desired(&crd, &others)["status"] != crd["status"] {
            let (user, warnings) = (internal_user(), Warnings::default());
            let ctx = Context { namespace: "", user: &user, user_agent: Some("apiextensions-controller"), warnings: &warnings, audit: None };
            match self.crds.update_part(&ctx, name, &Conditions { others }, &write_options(), Part::STATUS).await {
                // The informer brings the new state back; serving follows it.
                Ok(_) => return Ok(()),
                Err(s) if s.is_not_found() => {}
                Err(s) => return Err(s),
            }
        }
        if condition_true(&crd, "Established") {
            self.serve(name, CrdSpec::of(&crd), meta::is_deleting(&crd));
        }
        Ok(())
    }

    /// Serves `spec` for the CRD `name`, replacing what was served; while
    /// `terminating`, its resources refuse creates.
    fn serve(&self, name: &str, spec: CrdSpec, terminating: bool) {
        let mut served = self.served.lock();
        let before = served.get(name);
        if let Some(b) = before {
            b.terminating.store(terminating, Ordering::Release);
            if b.spec == spec {
                return;
            }
        }
        let (shape, before_shape) = (shape_of(&spec), before.map(|b| shape_of(&b.spec)));
        // A version whose resource is already served by something else (a
        // built-in, another CRD) is never taken over: its schema would
        // shadow the other kind's, and withdrawing or cleaning up this CRD
        // would remove or empty the other resource.
        let taken: Vec<&str> = spec
            .versions
            .iter()
            .filter(|v| {
                let ours = before_shape.as_ref().is_some_and(|b| b.group == spec.group && b.plural == spec.plural && b.versions.iter().any(|o| o.name == v.name));
                !ours && self.registry.entry(&spec.group, &v.name, &spec.plural).is_some()
            })
            .map(|v| v.name.as_str())
            .collect();
        if !taken.is_empty() {
            tracing::warn!("crd {name}: not served: {}/{} is already served by another resource ({})", spec.group, spec.plural, taken.join(", "));
            return;
        }
        // Schemas first, so the first request finds them.
        for v in &spec.versions {
            self.schemas.set_crd(&spec.group, &v.name, &spec.kind, &v.schema);
        }
        if let Some(b) = before {
            for v in &b.spec.versions {
                if !spec.versions.iter().any(|n| n.name == v.name) || b.spec.kind != spec.kind || b.spec.group != spec.group {
                    self.schemas.remove(&b.spec.group, &v.name, &b.spec.kind);
                }
            }
        }
        let terminating = before.map_or_else(|| Arc::new(AtomicBool::new(terminating)), |b| b.terminating.clone());
        if before_shape.as_ref() != Some(&shape) {
            if let Some(b) = &before_shape {
                for v in &b.versions {
                    self.registry.remove(&b.group, &v.name, &b.plural);
                }
            }
            if let Err(e) = self.registry.add_all(shape.resource_defs(&terminating)) {
                tracing::warn!("crd {name}: not served: {e}");
                for v in &spec.versions {
                    self.schemas.remove(&spec.group, &v.name, &spec.kind);
                }
                served.remove(name);
                return;
            }
            tracing::info!("crd {name}: serving {}", shape.versions.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "));
        }
        served.insert(name.to_string(), Served { spec, terminating });
    }

    /// Stops serving the CRD `name`.
    fn withdraw(&self, name: &str) {
        let Some(b) = self.served.lock().remove(name) else { return };
        for v in &b.spec.versions {
            self.registry.remove(&b.spec.group, &v.name, &b.spec.plural);
            self.schemas.remove(&b.spec.group, &v.name, &b.spec.kind);
        }
        tracing::info!("crd {name}: withdrawn");
    }

    /// The cleanup loop: works while `leading`, until `stop`.
    pub async fn run_cleanup(self: Arc<Self>, mut leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        loop {
            let Some(key) = self.cleanup.next_while_leading(&mut leading, &mut stop).await else { return };
            match self.clean(&key).await {
                Ok(true) => {}
                Ok(false) => self.cleanup.add_after(&key, RETRY),
                Err(e) => {
                    tracing::warn!("crd {key} cleanup: {e}");
                    self.cleanup.add_after(&key, RETRY);
                }
            }
            self.cleanup.done(&key);
        }
    }

    /// One pass over a CRD being deleted: `Ok(true)` when done with it.
    /// Its `Terminating` condition says how it goes, with kube's reasons.
    async fn clean(&self, name: &str) -> Result<bool, Status> {
        let Some(crd) = self.lister.get(name) else { return Ok(true) };
        let held = crd["metadata"]["finalizers"].as_array().is_some_and(|l| l.contains(&json!(CLEANUP_FINALIZER)));
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: "", user: &user, user_agent: Some("apiextensions-controller"), warnings: &warnings, audit: None };
        if meta::is_deleting(&crd) && !meta::has_finalizers(&crd) {
            // Nothing holds it, yet it is stored: an update that let go of
            // the last finalizer did not delete it (seen once; see
            // apiserver/NOTES.md). Any update deletes it now.
            tracing::warn!(resource_version = meta::resource_version(&crd), "crd {name}: deleting without finalizers but still stored; deleting it");
            return self.drop_finalizer(&ctx, name).await;
        }
        if !meta::is_deleting(&crd) || !held {
            return Ok(true);
        }
        let spec = CrdSpec::of(&crd);
        let done = if condition_true(&crd, "Established") {
            // Objects can exist only once served; wait until this node
            // serves them. Only what this CRD serves is emptied: the same
            // resource served by a built-in or another CRD is not its own.
            let ours = self.served.lock().get(name).is_some_and(|s| s.spec.group == spec.group && s.spec.plural == spec.plural && s.spec.storage_version == spec.storage_version);
            if !ours {
                if self.registry.entry(&spec.group, &spec.storage_version, &spec.plural).is_none() {
                    return Ok(false);
                }
                tracing::warn!("crd {name}: its resource is served by another; nothing of this CRD's to delete");
                ("OverlappingBuiltInResource", "instances overlap with built-in resources in storage".to_string())
            } else {
                let Some(store) = self.registry.store(&spec.group, &spec.storage_version, &spec.plural) else { return Ok(false) };
                if let Err(e) = store.list(&ctx, &ListOptions::default()).await {
                    self.set_terminating(&ctx, &crd, "True", "InstanceDeletionFailed", &format!("could not list instances: {}", e.message)).await;
                    return Err(e);
                }
                let objs = match store.delete_collection(&ctx, &DeleteOptions::default(), &ListOptions::default()).await {
                    Ok((objs, _)) => objs,
                    Err(e) => {
                        self.set_terminating(&ctx, &crd, "True", "InstanceDeletionFailed", &format!("could not issue all deletes: {}", e.message)).await;
                        return Err(e);
                    }
                };
                let remaining = objs.iter().filter(|o| store.resource().strategy.held_by_finalizers(o)).count();
                if remaining > 0 {
                    tracing::debug!("crd {name}: {remaining} objects wait for finalizers");
                    let msg = format!("could not confirm zero CustomResources remaining: {remaining} held by finalizers");
                    self.set_terminating(&ctx, &crd, "True", "InstanceDeletionCheck", &msg).await;
                    return Ok(false);
                }
                // A node that had not yet seen the CRD terminating may have
                // created objects after the list: look again before letting
                // go.
                let again = store.list(&ctx, &ListOptions::default()).await?;
                if !again.items.is_empty() || !again.encoded.is_empty() {
                    tracing::debug!("crd {name}: objects created during cleanup; another pass");
                    return Ok(false);
                }
                ("InstanceDeletionCompleted", "removed all instances".to_string())
            }
        } else {
            ("NeverEstablished", "resource was never established".to_string())
        };
        self.set_terminating(&ctx, &crd, "False", done.0, &done.1).await;
        self.drop_finalizer(&ctx, name).await
    }

    /// Sets the CRD's `Terminating` condition (through `/status`) unless
    /// it says so already; a failure is logged, the cleanup goes on.
    async fn set_terminating(&self, ctx: &Context<'_>, crd: &Value, status: &str, reason: &str, message: &str) {
        let current = crate::registry::apiextensions::condition(crd, "Terminating");
        if current.is_some_and(|c| c["status"] == json!(status) && c["reason"] == json!(reason) && c["message"] == json!(message)) {
            return;
        }
        let set = SetTerminating { status, reason, message };
        if let Err(e) = self.crds.update_part(ctx, meta::name(crd), &set, &write_options(), Part::STATUS).await {
            tracing::debug!("crd {}: Terminating condition: {e}", meta::name(crd));
        }
    }

    /// Drops the cleanup finalizer: `Ok(true)` once it is gone.
    async fn drop_finalizer(&self, ctx: &Context<'_>, name: &str) -> Result<bool, Status> {
        match self.crds.update_part(ctx, name, &DropFinalizer, &write_options(), Part::MAIN).await {
            Ok(_) => Ok(true),
            Err(s) if s.is_not_found() => Ok(true),
            Err(s) => Err(s),
        }
    }
}
