//! `NamespaceLifecycle` (kube `plugin/pkg/admission/namespace/lifecycle`):
//!
//! - the namespaces `default`, `kube-system` and `kube-public` cannot be
//!   deleted (403);
//! - nothing is created in a namespace that does not exist (404
//!   `namespaces "x" not found`) or is being deleted (403 with cause
//!   `NamespaceTerminating`).
//!
//! The namespace is read from the store with a consistent read, so a
//! namespace deleted a moment ago is seen as terminating on every node.
//! (kube reads an informer first and the store only for recently deleted
//! namespaces; the cheaper read can come with a shared informer.) Updates
//! and deletes of objects inside a namespace are not checked.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Attributes, Mutating, Operation};
use crate::errors::Status;
use crate::meta;
use crate::storage::{keys, Storage};

/// Namespaces that can never be deleted.
pub const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

/// The plugin.
pub struct NamespaceLifecycle {
    storage: Arc<dyn Storage>,
}

impl NamespaceLifecycle {
    /// The plugin over the store holding namespaces.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        NamespaceLifecycle { storage }
    }
}

fn is_namespace(attrs: &Attributes<'_>) -> bool {
    attrs.kind.group.is_empty() && attrs.kind.kind == "Namespace"
}

#[async_trait]
impl Mutating for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Delete)
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if is_namespace(attrs) {
            if attrs.operation == Operation::Delete && IMMORTAL.contains(&attrs.name) {
                return Err(Status::forbidden_because("", "namespaces", attrs.name, "this namespace may not be deleted"));
            }
            return Ok(());
        }
        if attrs.operation != Operation::Create || attrs.namespace.is_empty() {
            return Ok(());
        }
        let namespace = attrs.namespace;
        match self.storage.get(&keys::namespace(namespace)).await {
            Ok(ns) if meta::is_deleting(&ns) || ns["status"]["phase"] == "Terminating" => Err(Status::namespace_terminating(attrs.resource.group, attrs.resource.resource, namespace)),
            Ok(_) => Ok(()),
            Err(crate::storage::Error::NotFound) => Err(Status::not_found("", "namespaces", namespace)),
            Err(e) => Err(Status::internal(e)),
        }
    }
}
