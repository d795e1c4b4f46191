//! The protection controllers of kube-controller-manager (`pvc-protection`
//! and `pv-protection`), which take off the finalizers the
//! `StorageObjectInUseProtection` admission plugin puts on:
//!
//! - `kubernetes.io/pvc-protection` from a PersistentVolumeClaim being
//!   deleted once no Pod of its namespace that has not ended (Succeeded or
//!   Failed) names it in `spec.volumes[].persistentVolumeClaim.claimName`
//!   (or owns it as a generic ephemeral volume, `<pod>-<volume>`);
//! - `kubernetes.io/pv-protection` from a PersistentVolume being deleted
//!   once it is not `Bound`.
//!
//! Without this loop such objects would never go (kube's own behaviour
//! when its controller manager is down). A claim is looked at again when it
//! is (re)seen being deleted and when a Pod of its namespace is deleted or
//! ends; the Pods are read with a consistent list, not from the informer,
//! so a Pod created a moment ago keeps the claim (kube asks the API server
//! too before it lets a claim go). One node works the queue, the holder of
//! the Lease `kube-system/storage-protection-controller`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use super::queue::Queue;
use crate::admission::storage_object_in_use_protection::{PVC_PROTECTION, PV_PROTECTION};
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::{Context, FieldValidation, ListOptions, Lister as _, Replace, Updater as _, WriteOptions};
use crate::registry::store::Store;
use crate::registry::Registry;
use crate::warning::Warnings;

/// The Lease of the loop.
pub const LEASE: &str = "storage-protection-controller";

/// Pause before a failed key is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Queue keys: `pvc/<namespace>/<name>` and `pv/<name>`.
fn claim_key(obj: &Value) -> String {
    format!("pvc/{}/{}", meta::namespace(obj), meta::name(obj))
}

fn held(obj: &Value, finalizer: &str) -> bool {
    meta::is_deleting(obj) && obj["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|x| x == finalizer))
}

struct OnClaim(Queue);

impl EventHandler for OnClaim {
    fn on_add(&self, obj: &Value) {
        if held(obj, PVC_PROTECTION) {
            self.0.add(&claim_key(obj));
        }
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.on_add(new);
    }
    fn on_delete(&self, _obj: &Value) {}
}

struct OnVolume(Queue);

impl EventHandler for OnVolume {
    fn on_add(&self, obj: &Value) {
        if held(obj, PV_PROTECTION) {
            self.0.add(&format!("pv/{}", meta::name(obj)));
        }
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.on_add(new);
    }
    fn on_delete(&self, _obj: &Value) {}
}

/// A Pod that stops using its claims queues those being deleted.
struct OnPod {
    queue: Queue,
    claims: Lister,
}

impl OnPod {
    fn freed(&self, pod: &Value) {
        let ns = meta::namespace(pod);
        for claim in claims_of(pod) {
            if self.claims.get(&format!("{ns}/{claim}")).is_some_and(|c| held(&c, PVC_PROTECTION)) {
                self.queue.add(&format!("pvc/{ns}/{claim}"));
            }
        }
    }
}

impl EventHandler for OnPod {
    fn on_add(&self, _obj: &Value) {}
    fn on_update(&self, _old: &Value, new: &Value) {
        if ended(new) {
            self.freed(new);
        }
    }
    fn on_delete(&self, obj: &Value) {
        self.freed(obj);
    }
}

fn ended(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// The claims a Pod uses: named ones and its generic ephemeral volumes'.
pub fn claims_of(pod: &Value) -> Vec<String> {
    let name = meta::name(pod);
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| match v["persistentVolumeClaim"]["claimName"].as_str() {
            Some(c) => Some(c.to_string()),
            None => v["ephemeral"].is_object().then(|| format!("{name}-{}", v["name"].as_str().unwrap_or(""))),
        })
        .collect()
}

/// The controller.
pub struct ProtectionController {
    claims: Arc<Store>,
    volumes: Option<Arc<Store>>,
    pods: Arc<Store>,
    claim_lister: Lister,
    volume_lister: Option<Lister>,
    queue: Queue,
}

impl ProtectionController {
    /// Starts the informers; `None` when claims or pods are not served.
    pub fn new(registry: &Registry, stop: watch::Receiver<bool>) -> Option<Self> {
        let claims = registry.store("", "v1", "persistentvolumeclaims")?;
        let pods = registry.store("", "v1", "pods")?;
        let volumes = registry.store("", "v1", "persistentvolumes");
        let queue = Queue::new();
        let claim_lister = informer::start(claims.clone(), Arc::new(OnClaim(queue.clone())), stop.clone());
        informer::start(pods.clone(), Arc::new(OnPod { queue: queue.clone(), claims: claim_lister.clone() }), stop.clone());
        let volume_lister = volumes.clone().map(|v| informer::start(v, Arc::new(OnVolume(queue.clone())), stop.clone()));
        Some(ProtectionController { claims, volumes, pods, claim_lister, volume_lister, queue })
    }

    /// Works the queue while `leading` is true, until `stop`.
    pub async fn run(self, leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.claim_lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let this = &self;
        self.queue.work_while_leading(leading, stop, "storage protection", RETRY, |key| async move { this.sync(&key).await }).await;
    }

    async fn sync(&self, key: &str) -> Result<(), Status> {
        let (user, warnings) = (internal_user(), Warnings::default());
        if let Some(rest) = key.strip_prefix("pvc/") {
            let Some((ns, name)) = rest.split_once('/') else { return Ok(()) };
            let Some(claim) = self.claim_lister.get(rest).filter(|c| held(c, PVC_PROTECTION)) else { return Ok(()) };
            let ctx = Context { namespace: ns, user: &user, user_agent: Some(LEASE), warnings: &warnings, audit: None };
            let pods = self.pods.list(&ctx, &ListOptions::default()).await?.items;
            if pods.iter().any(|p| !ended(p) && claims_of(p).iter().any(|c| c == name)) {
                return Ok(());
            }
            return drop_finalizer(&self.claims, &ctx, &claim, PVC_PROTECTION).await;
        }
        if let Some(name) = key.strip_prefix("pv/") {
            let (Some(store), Some(lister)) = (&self.volumes, &self.volume_lister) else { return Ok(()) };
            let Some(volume) = lister.get(name).filter(|v| held(v, PV_PROTECTION)) else { return Ok(()) };
            if volume["status"]["phase"] == "Bound" {
                return Ok(());
            }
            let ctx = Context { namespace: "", user: &user, user_agent: Some(LEASE), warnings: &warnings, audit: None };
            return drop_finalizer(store, &ctx, &volume, PV_PROTECTION).await;
        }
        Ok(())
    }
}

/// Writes `obj` without `finalizer` (its resourceVersion kept: a
/// concurrent change is a conflict, and the key is tried again).
async fn drop_finalizer(store: &Store, ctx: &Context<'_>, obj: &Value, finalizer: &str) -> Result<(), Status> {
    let mut updated = obj.clone();
    if let Some(list) = updated["metadata"]["finalizers"].as_array_mut() {
        list.retain(|f| f != finalizer);
    }
    let opts = WriteOptions { kind: "UpdateOptions", dry_run: false, field_manager: Some(LEASE.into()), field_validation: FieldValidation::Ignore, force: false };
    match store.update(ctx, meta::name(obj), &Replace(updated), &opts).await {
        Ok(_) => Ok(()),
        Err(s) if s.is_not_found() => Ok(()),
        Err(s) => Err(s),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_uses_named_and_ephemeral_claims() {
        let pod = json!({"metadata": {"name": "web"}, "spec": {"volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
            {"name": "tmp", "emptyDir": {}},
        ]}});
        assert_eq!(claims_of(&pod), vec!["data-0".to_string(), "web-scratch".to_string()]);
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": [PVC_PROTECTION]}});
        assert!(held(&deleting, PVC_PROTECTION) && !held(&deleting, PV_PROTECTION));
    }
}
