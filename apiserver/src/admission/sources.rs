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

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

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
}

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
