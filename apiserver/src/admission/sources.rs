//! Local copies of the objects admission plugins read on every write:
//! webhook configurations, admission policies and their bindings,
//! namespaces, LimitRanges, ResourceQuotas, PriorityClasses and so on
//! (kube's shared informers, handed to plugins by
//! `WantsExternalKubeInformerFactory`).
//!
//! Plugins are built before the registry exists, so they get a
//! [`Sources`] that is empty at first; the controllers' admission feed
//! (`controllers::admission`) starts an informer per resource of
//! [`WATCHED`] once the registry serves it and plugs its copy in with
//! [`Sources::set`]. Reading a copy never touches the store.
//!
//! Readiness (kube's `WaitForReady`): a plugin that must not decide on an
//! incomplete copy (the webhook and policy plugins) waits in
//! [`Sources::wait_ready`] until the copies it reads have listed once. A
//! copy counts as ready when it is plugged in and listed, or when the feed
//! has plugged in everything it serves ([`Sources::mark_fed`]) without it:
//! that resource is not served, so there is nothing to wait for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::Value;

use super::Attributes;
use crate::errors::Status;

/// One resource's objects, keyed `namespace/name` (`name` when
/// cluster-scoped), in key order.
pub type Snapshot = Arc<imbl::OrdMap<String, Arc<Value>>>;

/// A local copy of one resource.
pub trait Source: Send + Sync {
    /// The objects as last seen. The same `Arc` is returned until
    /// something changes, so a plugin can keep what it compiled from a
    /// snapshot while `Arc::ptr_eq` holds.
    fn snapshot(&self) -> Snapshot;

    /// Whether the first list is in (before that, the copy may be
    /// incomplete).
    fn synced(&self) -> bool;
}

/// The resources the admission feed keeps copies of: (group, version,
/// resource).
pub const WATCHED: &[(&str, &str, &str)] = &[
    ("", "v1", "namespaces"),
    ("", "v1", "limitranges"),
    ("", "v1", "resourcequotas"),
    ("", "v1", "services"),
    ("discovery.k8s.io", "v1", "endpointslices"),
    ("scheduling.k8s.io", "v1", "priorityclasses"),
    ("node.k8s.io", "v1", "runtimeclasses"),
    ("storage.k8s.io", "v1", "storageclasses"),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings"),
];

/// The copies plugins read, by (group, resource).
#[derive(Default)]
pub struct Sources {
    by_resource: RwLock<HashMap<(String, String), Arc<dyn Source>>>,
    /// Set once the feed has plugged in every copy it serves.
    fed: AtomicBool,
}

/// How long a request waits for the copies' first list before it is
/// refused (kube's `timeToWaitForReady`).
pub const WAIT_FOR_READY: Duration = Duration::from_secs(10);

/// How often a waiting request looks again (kube's `WaitForReady` polls at
/// this rate too).
const READY_POLL: Duration = Duration::from_millis(100);

impl Sources {
    /// No copies yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Sources::default())
    }

    /// Plugs in the copy of `group`/`resource`, replacing any earlier one.
    pub fn set(&self, group: &str, resource: &str, source: Arc<dyn Source>) {
        self.by_resource.write().insert((group.to_string(), resource.to_string()), source);
    }

    /// The copy of `group`/`resource`, once the feed has plugged it in.
    pub fn get(&self, group: &str, resource: &str) -> Option<Arc<dyn Source>> {
        self.by_resource.read().get(&(group.to_string(), resource.to_string())).cloned()
    }

    /// The objects of `group`/`resource` (empty until plugged in).
    pub fn snapshot(&self, group: &str, resource: &str) -> Snapshot {
        self.get(group, resource).map(|s| s.snapshot()).unwrap_or_default()
    }

    /// The object `key` (`namespace/name` or `name`) of `group`/`resource`.
    pub fn object(&self, group: &str, resource: &str, key: &str) -> Option<Arc<Value>> {
        self.get(group, resource).and_then(|s| s.snapshot().get(key).cloned())
    }

    /// The namespace `name`, as last seen.
    pub fn namespace(&self, name: &str) -> Option<Arc<Value>> {
        self.object("", "namespaces", name)
    }

    /// Records that the feed has plugged in every copy it will serve; a
    /// copy still missing then belongs to a resource that is not served.
    pub fn mark_fed(&self) {
        self.fed.store(true, Ordering::Release);
    }

    /// Whether the copies of `resources` ((group, resource) pairs) are
    /// complete: each plugged in and listed once, or known not to be served.
    pub fn ready(&self, resources: &[(&str, &str)]) -> bool {
        let fed = self.fed.load(Ordering::Acquire);
        resources.iter().all(|(g, r)| self.get(g, r).map_or(fed, |s| s.synced()))
    }

    /// Waits until [`Sources::ready`] holds for `resources`, at most
    /// [`WAIT_FOR_READY`] (kube's `WaitForReady`).
    ///
    /// # Errors
    /// 403 `<resource> "<name>" is forbidden: not yet ready to handle
    /// request` (kube's `admission.NewForbidden`; the name is the
    /// request's, else the object's name or generateName, else `Unknown`)
    /// when the copies are still incomplete after the wait.
    pub async fn wait_ready(&self, resources: &[(&str, &str)], attrs: &Attributes<'_>) -> Result<(), Status> {
        self.wait_ready_for(resources, attrs, WAIT_FOR_READY).await
    }

    /// [`Sources::wait_ready`] with a bound of `limit`.
    ///
    /// # Errors
    /// As [`Sources::wait_ready`].
    pub async fn wait_ready_for(&self, resources: &[(&str, &str)], attrs: &Attributes<'_>, limit: Duration) -> Result<(), Status> {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.ready(resources) {
            if tokio::time::Instant::now() >= deadline {
                return Err(not_ready(attrs));
            }
            tokio::time::sleep(READY_POLL).await;
        }
        Ok(())
    }
}

/// kube's refusal of a request that came before the plugin's copies were
/// complete.
fn not_ready(attrs: &Attributes<'_>) -> Status {
    let about = attrs.object.as_ref().or(attrs.old_object);
    let name = [attrs.name, about.map(crate::meta::name).unwrap_or_default(), about.map(|o| crate::meta::meta_str(o, "generateName")).unwrap_or_default()]
        .into_iter()
        .find(|n| !n.is_empty())
        .unwrap_or("Unknown");
    Status::forbidden_because(attrs.resource.group, attrs.resource.resource, name, "not yet ready to handle request")
}

/// A fixed copy, for tests and for resources a plugin fills itself.
pub struct Fixed(pub Snapshot);

impl Source for Fixed {
    fn snapshot(&self) -> Snapshot {
        self.0.clone()
    }

    fn synced(&self) -> bool {
        true
    }
}

impl Fixed {
    /// A copy holding `objects`, keyed as informers key them.
    pub fn of(objects: impl IntoIterator<Item = Value>) -> Arc<Self> {
        let mut m = imbl::OrdMap::new();
        for o in objects {
            let ns = crate::meta::namespace(&o);
            let key = if ns.is_empty() { crate::meta::name(&o).to_string() } else { format!("{ns}/{}", crate::meta::name(&o)) };
            m.insert(key, Arc::new(o));
        }
        Arc::new(Fixed(Arc::new(m)))
    }
}
