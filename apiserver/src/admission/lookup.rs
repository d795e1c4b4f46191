//! How the built-in plugins find the objects they read (LimitRanges,
//! PriorityClasses, RuntimeClasses, StorageClasses): the local copy of
//! [`super::sources`] first, and the store when the copy has nothing,
//! as kube's plugins fall back to a live lookup when their informer has
//! not seen an object yet (LimitRanger, RuntimeClass). Without the
//! fallback, an object created a moment before the write it governs could
//! be missed while the copy catches up.

use std::sync::Arc;

use serde_json::Value;

use super::sources::Sources;
use super::Attributes;
use crate::errors::Status;
use crate::storage::{keys, ListOptions, Storage};

/// The objects of `group`/`resource` in `namespace` (`""` for
/// cluster-scoped resources), from the copy, or from the store when the
/// copy has none.
///
/// # Errors
/// 500 when the store cannot be read.
pub async fn list(sources: &Sources, storage: &dyn Storage, group: &str, resource: &str, namespace: &str) -> Result<Vec<Arc<Value>>, Status> {
    let snapshot = sources.snapshot(group, resource);
    let found: Vec<Arc<Value>> = if namespace.is_empty() {
        snapshot.values().cloned().collect()
    } else {
        let from = format!("{namespace}/");
        snapshot.range(from.clone()..).take_while(|(k, _)| k.starts_with(&from)).map(|(_, v)| v.clone()).collect()
    };
    if !found.is_empty() {
        return Ok(found);
    }
    let ns = (!namespace.is_empty()).then_some(namespace);
    let listed = storage.list(&keys::prefix(group, resource, ns), &ListOptions::default()).await.map_err(Status::internal)?;
    Ok(listed.items.into_iter().map(Arc::new).collect())
}

/// The cluster-scoped object `name` of `group`/`resource`, from the copy
/// or else the store.
///
/// # Errors
/// 500 when the store cannot be read.
pub async fn get(sources: &Sources, storage: &dyn Storage, group: &str, resource: &str, name: &str) -> Result<Option<Arc<Value>>, Status> {
    if let Some(o) = sources.object(group, resource, name) {
        return Ok(Some(o));
    }
    match storage.get(&keys::object(group, resource, None, name)).await {
        Ok(o) => Ok(Some(Arc::new(o))),
        Err(crate::storage::Error::NotFound) => Ok(None),
        Err(e) => Err(Status::internal(e)),
    }
}

/// The name kube's `admission.NewForbidden` puts in a message: the
/// object's name, else its `generateName`, else `Unknown`.
pub fn name_for_message<'a>(attrs: &'a Attributes<'_>) -> &'a str {
    if !attrs.name.is_empty() {
        return attrs.name;
    }
    let generate = attrs.object.as_ref().and_then(|o| o["metadata"]["generateName"].as_str()).filter(|g| !g.is_empty());
    generate.unwrap_or("Unknown")
}

/// kube's `admission.NewForbidden`: 403 `<resource> "<name>" is forbidden:
/// <why>`.
pub fn forbidden(attrs: &Attributes<'_>, why: &str) -> Status {
    Status::forbidden_because(attrs.resource.group, attrs.resource.resource, name_for_message(attrs), why)
}

/// Whether the write is to the core resource `resource` itself (no
/// subresource).
pub fn is_core(attrs: &Attributes<'_>, resource: &str) -> bool {
    attrs.resource.group.is_empty() && attrs.resource.resource == resource && attrs.subresource.is_empty()
}

/// kube's `utilerrors.NewAggregate(...).Error()`: one message alone,
/// several (each once) as `[a, b]`.
pub fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}
