//! The resources this server serves (kube-apiserver `pkg/registry`).
//!
//! Each [`Resource`] carries its group/version/kind, scope, verbs, short
//! names, categories and subresources, plus a [`Strategy`] with the type's
//! semantics. Handlers are generic: they look a resource up here and never
//! name a type.

pub mod admission;
pub mod apps;
pub mod auth;
pub mod autoscaling;
pub mod batch;
pub mod cluster;
pub mod conversion;
pub mod core;
pub mod networking;
pub mod printers;
pub mod rbac;
pub mod simple;
pub mod strategy;
pub mod validation;

use std::sync::Arc;

pub use strategy::{Column, DefaultStrategy, Strategy};

/// Verbs of an ordinary resource, in discovery order.
pub const STANDARD_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
/// Verbs of a resource without deletecollection (namespaces).
pub const NO_COLLECTION_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

/// One served resource.
pub struct Resource {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Served version.
    pub version: &'static str,
    /// Plural resource name (`configmaps`).
    pub resource: &'static str,
    /// Singular name (`configmap`).
    pub singular: &'static str,
    /// Kind (`ConfigMap`).
    pub kind: &'static str,
    /// Namespace-scoped?
    pub namespaced: bool,
    /// Verbs on the main resource.
    pub verbs: &'static [&'static str],
    /// Short names (`cm`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Subresources served (`status`, `scale`).
    pub subresources: &'static [&'static str],
    /// The type's semantics.
    pub strategy: Box<dyn Strategy>,
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `deployments.apps`.
    pub fn qualified(&self) -> String {
        crate::errors::qualified(self.group, self.resource)
    }

    /// The storage prefix of the resource, or of one namespace of it, ending
    /// with `/`: `/registry/configmaps/`, `/registry/apps/deployments/default/`.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        // A version stored as another group's (events.k8s.io events as core
        // events) lives under that group's prefix.
        let group = self.strategy.storage_version().map_or(self.group, |(g, _)| g);
        crate::storage::keys::prefix(group, self.resource, namespace.filter(|_| self.namespaced))
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        let mut k = self.prefix(if self.namespaced { Some(namespace) } else { None });
        k.push_str(name);
        k
    }
}

/// Every served resource.
pub struct Registry {
    resources: Vec<Arc<Resource>>,
}

impl Registry {
    /// The built-in resources.
    pub fn builtin() -> Self {
        let mut resources = Vec::new();
        resources.extend(core::resources());
        resources.extend(apps::resources());
        resources.extend(auth::resources());
        resources.extend(autoscaling::resources());
        resources.extend(batch::resources());
        resources.extend(cluster::resources());
        resources.extend(networking::resources());
        resources.extend(rbac::resources());
        resources.extend(admission::resources());
        Registry { resources: resources.into_iter().map(Arc::new).collect() }
    }

    /// Looks a resource up by group, version and plural name.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<Arc<Resource>> {
        self.resources.iter().find(|r| r.group == group && r.version == version && r.resource == resource).cloned()
    }

    /// All resources of one group-version, in registration order.
    pub fn of_group_version(&self, group: &str, version: &str) -> Vec<Arc<Resource>> {
        self.resources.iter().filter(|r| r.group == group && r.version == version).cloned().collect()
    }

    /// (group, version) pairs in registration order, core first.
    pub fn group_versions(&self) -> Vec<(&'static str, &'static str)> {
        let mut out: Vec<(&'static str, &'static str)> = Vec::new();
        for r in &self.resources {
            if !out.contains(&(r.group, r.version)) {
                out.push((r.group, r.version));
            }
        }
        out
    }

    /// The resource whose storage `res` uses: itself, or the storage
    /// version named by [`Strategy::storage_version`].
    pub fn storage_resource(&self, res: &Arc<Resource>) -> Arc<Resource> {
        match res.strategy.storage_version() {
            Some((g, v)) => self.get(g, v, res.resource).unwrap_or_else(|| res.clone()),
            None => res.clone(),
        }
    }

    /// The storage a handler of `res` uses: `storage` itself, or, for a
    /// version stored as another, a decorator converting through the hub.
    pub fn storage_for(&self, res: &Arc<Resource>, storage: Arc<dyn crate::storage::Storage>) -> Arc<dyn crate::storage::Storage> {
        let stored = self.storage_resource(res);
        if Arc::ptr_eq(&stored, res) {
            storage
        } else {
            Arc::new(conversion::Converting::new(storage, res.clone(), stored))
        }
    }

    /// Every namespaced resource (for namespace deletion).
    pub fn namespaced(&self) -> Vec<Arc<Resource>> {
        self.resources.iter().filter(|r| r.namespaced).cloned().collect()
    }
}
