//! The namespace controller (kube `pkg/controller/namespace`, reduced):
//! empties a namespace that is being deleted, then finalizes it.
//!
//! An informer on namespaces queues every namespace with a
//! `deletionTimestamp` (at start too, so deletion resumes after a restart).
//! One worker, on the node that holds the controller's Lease, takes each
//! namespace in turn (the queue never hands one out twice at a time):
//!
//! 1. deletes the namespace's objects of every namespaced resource through
//!    the resources' stores (deletecollection: graceful deletion,
//!    finalizers and admission as for any client);
//! 2. while objects remain (held by their finalizers), tries again later,
//!    backing off from 100 ms to 5 s;
//! 3. once none remain, drops `spec.finalizers`; the namespace store then
//!    deletes the namespace, unless `metadata.finalizers` still hold it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use super::queue::Queue;
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::{CollectionDeleter as _, Context, DeleteOptions, FieldValidation, ListOptions, UpdatedObjectInfo, WriteOptions};
use crate::registry::store::{Part, Store};
use crate::registry::Registry;
use crate::warning::Warnings;

/// The controller's Lease name.
pub const LEASE: &str = "namespace-controller";
/// First retry delay of a namespace whose objects are held by finalizers.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// Longest retry delay.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Queues namespaces being deleted.
struct Enqueue(Queue);

impl Enqueue {
    fn consider(&self, ns: &Value) {
        if meta::is_deleting(ns) {
            self.0.add(meta::name(ns));
        }
    }
}

impl EventHandler for Enqueue {
    fn on_add(&self, obj: &Value) {
        self.consider(obj);
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.consider(new);
    }
    fn on_delete(&self, _obj: &Value) {}
}

/// Drops `spec.finalizers` (kube's finalize of the `kubernetes` finalizer).
struct Finalize;

#[async_trait]
impl UpdatedObjectInfo for Finalize {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let mut ns = current.cloned().unwrap_or(Value::Null);
        if let Some(spec) = ns.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("finalizers");
        }
        Ok(ns)
    }
    fn may_create(&self) -> bool {
        false
    }
}

/// The controller.
pub struct NamespaceController {
    registry: Arc<Registry>,
    namespaces: Arc<Store>,
    lister: Lister,
    queue: Queue,
    backoff: Mutex<HashMap<String, Duration>>,
}

impl NamespaceController {
    /// Starts the informer on namespaces; [`NamespaceController::run`]
    /// does the work.
    pub fn new(registry: Arc<Registry>, namespaces: Arc<Store>, stop: watch::Receiver<bool>) -> Self {
        let queue = Queue::new();
        let lister = informer::start(namespaces.clone(), Arc::new(Enqueue(queue.clone())), stop);
        NamespaceController { registry, namespaces, lister, queue, backoff: Mutex::new(HashMap::new()) }
    }

    /// Works the queue while `leading` is true, until `stop`.
    pub async fn run(self, mut leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        loop {
            let Some(key) = self.queue.next_while_leading(&mut leading, &mut stop).await else { return };
            match self.sync(&key).await {
                Ok(true) => {
                    self.backoff.lock().remove(&key);
                }
                Ok(false) => self.retry(&key),
                Err(e) => {
                    tracing::warn!("namespace {key} cleanup: {e}");
                    self.retry(&key);
                }
            }
            self.queue.done(&key);
        }
    }

    fn retry(&self, key: &str) {
        let delay = {
            let mut b = self.backoff.lock();
            let d = b.entry(key.to_string()).or_insert(FIRST_RETRY);
            let now = *d;
            *d = (*d * 2).min(MAX_RETRY);
            now
        };
        self.queue.add_after(key, delay);
    }

    /// One pass over a namespace: `Ok(true)` when it is done with (gone,
    /// not being deleted, or finalized), `Ok(false)` when objects remain.
    async fn sync(&self, name: &str) -> Result<bool, Status> {
        let Some(ns) = self.lister.get(name) else { return Ok(true) };
        if !meta::is_deleting(&ns) {
            return Ok(true);
        }
        let remaining = self.delete_content(name).await?;
        if remaining > 0 {
            tracing::debug!("namespace {name}: {remaining} objects wait for finalizers");
            return Ok(false);
        }
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: "", user: &user, user_agent: Some("namespace-controller"), warnings: &warnings, audit: None };
        let opts = WriteOptions { kind: "UpdateOptions", dry_run: false, field_manager: Some("namespace-controller".into()), field_validation: FieldValidation::Ignore, force: false };
        match self.namespaces.update_part(&ctx, name, &Finalize, &opts, Part { subresource: "finalize", status_only: false, shown_as: None }).await {
            Ok(_) => Ok(true),
            Err(s) if s.is_not_found() => Ok(true),
            Err(s) => Err(s),
        }
    }

    /// Deletes every object in `namespace`; returns how many remain, held
    /// by finalizers.
    async fn delete_content(&self, namespace: &str) -> Result<usize, Status> {
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace, user: &user, user_agent: Some("namespace-controller"), warnings: &warnings, audit: None };
        let mut remaining = 0;
        for store in self.registry.namespaced_stores() {
            let (objs, _) = store.delete_collection(&ctx, &DeleteOptions::default(), &ListOptions::default()).await?;
            remaining += objs.iter().filter(|o| store.resource().strategy.held_by_finalizers(o)).count();
        }
        Ok(remaining)
    }
}
