//! `StorageObjectInUseProtection` (kube
//! `plugin/pkg/admission/storageobjectinuseprotection`): a new
//! PersistentVolumeClaim gets the finalizer `kubernetes.io/pvc-protection`
//! and a new PersistentVolume `kubernetes.io/pv-protection`, so neither
//! goes away while a Pod or a claim still uses it; the protection
//! controller (`controllers::storage_protection`) removes the finalizers
//! once nothing does. Creates only.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::lookup;
use super::{Attributes, Mutating, Operation};
use crate::errors::Status;
use crate::meta;

/// The finalizer of PersistentVolumeClaims.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer of PersistentVolumes.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The plugin.
pub struct StorageObjectInUseProtection;

/// Appends `finalizer` to `obj` unless it is there.
fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(m) = meta::meta_mut(obj) else { return };
    let list = m.entry("finalizers").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(l) = list.as_array_mut() {
        if !l.iter().any(|f| f == finalizer) {
            l.push(Value::String(finalizer.to_string()));
        }
    }
}

#[async_trait]
impl Mutating for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        let finalizer = if lookup::is_core(attrs, "persistentvolumeclaims") {
            PVC_PROTECTION
        } else if lookup::is_core(attrs, "persistentvolumes") {
            PV_PROTECTION
        } else {
            return Ok(());
        };
        if let Some(obj) = attrs.object.as_mut() {
            add_finalizer(obj, finalizer);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_finalizer_once() {
        let mut pvc = json!({"metadata": {"name": "c", "finalizers": ["x"]}});
        add_finalizer(&mut pvc, PVC_PROTECTION);
        add_finalizer(&mut pvc, PVC_PROTECTION);
        assert_eq!(pvc["metadata"]["finalizers"], json!(["x", PVC_PROTECTION]));
        let mut pv = json!({"metadata": {"name": "v"}});
        add_finalizer(&mut pv, PV_PROTECTION);
        assert_eq!(pv["metadata"]["finalizers"], json!([PV_PROTECTION]));
    }
}
