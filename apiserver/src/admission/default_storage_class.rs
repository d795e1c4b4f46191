//! `DefaultStorageClass` (kube
//! `plugin/pkg/admission/storage/storageclass/setdefault`): a new
//! PersistentVolumeClaim that names no class (no `spec.storageClassName`,
//! and no beta annotation `volume.beta.kubernetes.io/storage-class`) gets
//! the default StorageClass: the one annotated
//! `storageclass.kubernetes.io/is-default-class: "true"` (or the beta
//! `storageclass.beta.kubernetes.io/is-default-class`); when several are,
//! the newest (`creationTimestamp`, then name). No default: the claim is
//! left as it is. An explicit `storageClassName: ""` means "no class" and is
//! kept. Creates only.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::lookup;
use super::sources::Sources;
use super::{Attributes, Mutating, Operation};
use crate::errors::Status;
use crate::storage::Storage;

/// The annotation that marks the default class.
pub const IS_DEFAULT: &str = "storageclass.kubernetes.io/is-default-class";
/// Its beta form, still honoured.
pub const BETA_IS_DEFAULT: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The beta annotation a claim could name its class with.
pub const BETA_CLAIM_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// The plugin.
pub struct DefaultStorageClass {
    storage: Arc<dyn Storage>,
    sources: Arc<Sources>,
}

impl DefaultStorageClass {
    /// The plugin over the StorageClasses of `sources` (or `storage`).
    pub fn new(storage: Arc<dyn Storage>, sources: Arc<Sources>) -> Self {
        DefaultStorageClass { storage, sources }
    }
}

fn is_default(class: &Value) -> bool {
    let a = &class["metadata"]["annotations"];
    a[IS_DEFAULT] == "true" || a[BETA_IS_DEFAULT] == "true"
}

/// The default class among `classes` (kube's `GetDefaultClass`).
pub fn default_class(classes: &[Arc<Value>]) -> Option<&Value> {
    let created = |c: &Value| c["metadata"]["creationTimestamp"].as_str().and_then(crate::meta::parse_time);
    // Newest first; equal times by name.
    classes.iter().map(|c| c.as_ref()).filter(|c| is_default(c)).max_by(|a, b| created(a).cmp(&created(b)).then_with(|| crate::meta::name(b).cmp(crate::meta::name(a))))
}

fn names_a_class(claim: &Value) -> bool {
    !claim["spec"]["storageClassName"].is_null() || claim["metadata"]["annotations"][BETA_CLAIM_CLASS].is_string()
}

#[async_trait]
impl Mutating for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if !lookup::is_core(attrs, "persistentvolumeclaims") || attrs.object.as_ref().is_none_or(names_a_class) {
            return Ok(());
        }
        let classes = lookup::list(&self.sources, self.storage.as_ref(), "storage.k8s.io", "storageclasses", "").await?;
        let Some(name) = default_class(&classes).map(|c| crate::meta::name(c).to_string()) else { return Ok(()) };
        if let Some(spec) = attrs.object.as_mut().and_then(|c| c.get_mut("spec")).and_then(Value::as_object_mut) {
            spec.insert("storageClassName".into(), Value::String(name));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(name: &str, created: &str, default: bool) -> Arc<Value> {
        let annotations = if default { json!({IS_DEFAULT: "true"}) } else { json!({}) };
        Arc::new(json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}))
    }

    #[test]
    fn the_newest_default_wins() {
        let classes = vec![class("old", "2024-01-01T00:00:00Z", true), class("new", "2025-01-01T00:00:00Z", true), class("plain", "2026-01-01T00:00:00Z", false)];
        assert_eq!(default_class(&classes).map(crate::meta::name), Some("new"));
        let tie = vec![class("b", "2025-01-01T00:00:00Z", true), class("a", "2025-01-01T00:00:00Z", true)];
        assert_eq!(default_class(&tie).map(crate::meta::name), Some("a"));
        assert_eq!(default_class(&[class("x", "2025-01-01T00:00:00Z", false)]), None);
        assert!(names_a_class(&json!({"spec": {"storageClassName": ""}})));
        assert!(!names_a_class(&json!({"spec": {}})));
    }
}
