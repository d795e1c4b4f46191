//! The ResourceQuota controller (kube-controller-manager's
//! `resourcequota` controller): keeps each quota's `status.hard` equal to
//! `spec.hard` and recounts `status.used` from the objects of its
//! namespace, with the same measures the admission plugin charges
//! ([`crate::admission::resource_quota::usage`]).
//!
//! Admission charges every create before it is written; this loop gives
//! back what deletes free, repairs charges whose write failed, and fills
//! the status of a new quota (until it has, admission refuses what the
//! quota governs with `status unknown for quota`, as kube does). A quota is
//! recounted when it is created or its spec changes, when an object of a
//! counted core resource (pods, services, configmaps, secrets,
//! persistentvolumeclaims, replicationcontrollers) in its namespace is
//! deleted or a Pod ends (Succeeded or Failed), and every
//! [`RESYNC`] (kube's `--resource-quota-sync-period`); other `count/...`
//! resources are recounted at the resync only.
//!
//! The recount reads the quota, lists the objects, then writes the status
//! only if the quota's resourceVersion is still the one read, so a charge
//! made in between is never overwritten (the quota is counted again). A
//! charge made just before the read, for an object not yet stored, is not
//! in the list and is lost by the recount: kube's controller has the same
//! window. Status is written to the quota's storage directly (the path the
//! admission charge takes), not through the `status` subresource.
//!
//! One node works the queue, the holder of the Lease
//! `kube-system/resourcequota-controller`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use super::queue::Queue;
use crate::admission::pod_resources::{self, ResourceList};
use crate::admission::resource_quota::{counted_resource, scopes_match, usage};
use crate::errors::Status;
use crate::meta;
use crate::quantity::{self, Quantity};
use crate::registry::rest::{Context, ListOptions, Lister as _};
use crate::registry::store::Store;
use crate::registry::Registry;
use crate::storage::{Preconditions, Update};
use crate::warning::Warnings;

/// The Lease of the loop.
pub const LEASE: &str = "resourcequota-controller";

/// How often every quota is recounted.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Pause before a failed quota is tried again.
const RETRY: Duration = Duration::from_millis(500);

/// Core resources whose deletes free quota at once.
const WATCHED: &[&str] = &["pods", "services", "configmaps", "secrets", "persistentvolumeclaims", "replicationcontrollers"];

/// Queues a quota on creation and on spec changes (not on the status
/// changes admission charges make).
struct OnQuota(Queue);

impl EventHandler for OnQuota {
    fn on_add(&self, obj: &Value) {
        self.0.add(&informer::key_of(obj));
    }
    fn on_update(&self, old: &Value, new: &Value) {
        if old["spec"] != new["spec"] || new["status"]["hard"] != new["spec"]["hard"] {
            self.0.add(&informer::key_of(new));
        }
    }
    fn on_delete(&self, _obj: &Value) {}
}

/// Queues the quotas of a namespace where something was freed.
struct OnFreed {
    queue: Queue,
    quotas: Lister,
    /// Pods also free quota when they end.
    pods: bool,
}

impl OnFreed {
    fn namespace(&self, obj: &Value) {
        let ns = meta::namespace(obj);
        let from = format!("{ns}/");
        let snapshot = self.quotas.snapshot();
        for (k, _) in snapshot.range(from.clone()..).take_while(|(k, _)| k.starts_with(&from)) {
            self.queue.add(k);
        }
    }
}

fn ended(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

impl EventHandler for OnFreed {
    fn on_add(&self, _obj: &Value) {}
    fn on_update(&self, old: &Value, new: &Value) {
        if self.pods && ended(new) && !ended(old) {
            self.namespace(new);
        }
    }
    fn on_delete(&self, obj: &Value) {
        self.namespace(obj);
    }
}

/// The controller.
pub struct QuotaController {
    registry: Arc<Registry>,
    quotas: Arc<Store>,
    lister: Lister,
    queue: Queue,
}

/// The store of the namespaced resource `group`/`resource`, in whatever
/// version it is served.
fn store_of(registry: &Registry, group: &str, resource: &str) -> Option<Arc<Store>> {
    registry.namespaced_stores().into_iter().find(|s| s.resource().group == group && s.resource().resource == resource)
}

/// What `quota` should say: `status.hard` from `spec.hard` and
/// `status.used` counted over `objects` (by (group, resource)) for every
/// hard resource some evaluator measures.
pub fn status_for(quota: &Value, objects: &[((String, String), Vec<Value>)]) -> Value {
    let hard = quota["spec"]["hard"].clone();
    let names: BTreeSet<String> = hard.as_object().into_iter().flatten().map(|(k, _)| k).filter(|k| counted_resource(k).is_some()).cloned().collect();
    let mut used: ResourceList = names.iter().map(|n| (n.clone(), Quantity::ZERO)).collect();
    for ((group, resource), items) in objects {
        for o in items.iter().filter(|o| scopes_match(quota, group, resource, o)) {
            let u: ResourceList = usage(group, resource, o).into_iter().filter(|(k, _)| names.contains(k)).collect();
            pod_resources::add_into(&mut used, &u);
        }
    }
    let used: serde_json::Map<String, Value> = used.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
    json!({"hard": if hard.is_object() { hard } else { json!({}) }, "used": used})
}

impl QuotaController {
    /// Starts the informers (quotas, and the core resources whose deletes
    /// free quota); [`QuotaController::run`] does the work. `None` when
    /// resourcequotas are not served.
    pub fn new(registry: Arc<Registry>, stop: watch::Receiver<bool>) -> Option<Self> {
        let quotas = registry.store("", "v1", "resourcequotas")?;
        let queue = Queue::new();
        let lister = informer::start(quotas.clone(), Arc::new(OnQuota(queue.clone())), stop.clone());
        for r in WATCHED {
            if let Some(store) = store_of(&registry, "", r) {
                informer::start(store, Arc::new(OnFreed { queue: queue.clone(), quotas: lister.clone(), pods: *r == "pods" }), stop.clone());
            }
        }
        Some(QuotaController { registry, quotas, lister, queue })
    }

    /// Works the queue while `leading` is true, until `stop`; queues every
    /// quota each [`RESYNC`].
    pub async fn run(self, mut leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let (queue, all, mut stop_resync) = (self.queue.clone(), self.lister.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(RESYNC) => {}
                    _ = stop_resync.wait_for(|s| *s) => return,
                }
                for k in all.snapshot().keys() {
                    queue.add(k);
                }
            }
        });
        loop {
            let Some(key) = self.queue.next_while_leading(&mut leading, &mut stop).await else { return };
            if let Err(e) = self.sync(&key).await {
                tracing::debug!("resource quota {key}: {}", e.message);
                self.queue.add_after(&key, RETRY);
            }
            self.queue.done(&key);
        }
    }

    /// Recounts the quota `namespace/name`.
    async fn sync(&self, key: &str) -> Result<(), Status> {
        let Some((ns, name)) = key.split_once('/') else { return Ok(()) };
        let storage = self.quotas.storage().clone();
        let quota_key = self.quotas.resource().key(ns, name);
        let quota = match storage.get(&quota_key).await {
            Ok(q) => q,
            Err(crate::storage::Error::NotFound) => return Ok(()),
            Err(e) => return Err(Status::internal(e)),
        };
        let wanted: BTreeSet<(String, String)> = quota["spec"]["hard"].as_object().into_iter().flatten().filter_map(|(k, _)| counted_resource(k)).collect();
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: ns, user: &user, user_agent: Some(LEASE), warnings: &warnings, audit: None };
        let mut objects = Vec::new();
        for (group, resource) in wanted {
            let items = match store_of(&self.registry, &group, &resource) {
                Some(store) => store.list(&ctx, &ListOptions::default()).await?.items,
                None => Vec::new(),
            };
            objects.push(((group, resource), items));
        }
        let status = status_for(&quota, &objects);
        let same = |have: &Value, want: &Value| {
            let (a, b) = (have.as_object().map(|m| m.len()), want.as_object().map(|m| m.len()));
            a == b && quantity::list(have) == quantity::list(want)
        };
        if same(&quota["status"]["hard"], &status["hard"]) && same(&quota["status"]["used"], &status["used"]) {
            return Ok(());
        }
        let rv = meta::resource_version(&quota).to_string();
        let mut step = |current: Option<Value>| -> Result<Update, Status> {
            let Some(mut q) = current else { return Ok(Update::Unchanged) };
            q["status"] = status.clone();
            Ok(Update::Put(q))
        };
        match storage.guaranteed_update(&quota_key, &Preconditions { uid: None, resource_version: Some(rv) }, &mut step).await {
            Ok(_) | Err(crate::storage::Error::NotFound) => Ok(()),
            Err(e @ crate::storage::Error::PreconditionFailed(_)) => Err(Status::conflict("", "resourcequotas", name, &e.to_string())),
            Err(e) => Err(Status::internal(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_counts_what_the_quota_limits() {
        let quota = json!({"spec": {"hard": {"pods": "5", "requests.cpu": "2", "count/configmaps": "3", "bogus": "1"}}});
        let pod = |cpu: &str, phase: &str| json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": phase}});
        let objects = vec![
            (("".to_string(), "pods".to_string()), vec![pod("500m", "Running"), pod("700m", "Pending"), pod("1", "Succeeded")]),
            (("".to_string(), "configmaps".to_string()), vec![json!({}), json!({})]),
        ];
        let s = status_for(&quota, &objects);
        assert_eq!(s["hard"], quota["spec"]["hard"]);
        assert_eq!(s["used"], json!({"count/configmaps": "2", "pods": "2", "requests.cpu": "1200m"}));
        let empty = status_for(&json!({"spec": {"hard": {"secrets": "1"}}}), &[]);
        assert_eq!(empty["used"], json!({"secrets": "0"}));
    }
}
