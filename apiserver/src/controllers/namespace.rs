//! Namespace deletion (kube's namespace controller, reduced): once a
//! namespace is Terminating, delete its contents, then drop its `kubernetes`
//! finalizer and the namespace itself.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::endpoints::ApiState;
use crate::errors::Status;
use crate::storage::{Preconditions, Update};

/// Starts emptying and removing a terminating namespace in the background.
pub fn spawn_cleanup(state: Arc<ApiState>, namespace: String) {
    tokio::spawn(async move {
        let mut delay = Duration::from_millis(100);
        loop {
            match crate::endpoints::handlers::delete::delete_namespace_content(&state, &namespace).await {
                Ok(0) => break,
                Ok(n) => tracing::debug!("namespace {namespace}: {n} objects wait for finalizers"),
                Err(e) => tracing::warn!("namespace {namespace} cleanup: {e}"),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
        let key = crate::storage::keys::namespace(&namespace);
        let mut f = |cur: Option<Value>| -> Result<Update, Status> {
            let Some(mut ns) = cur else { return Ok(Update::Unchanged) };
            if let Some(spec) = ns.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("finalizers");
            }
            if crate::meta::has_finalizers(&ns) {
                return Ok(Update::Put(ns));
            }
            Ok(Update::Delete)
        };
        match state.storage.guaranteed_update(&key, &Preconditions::default(), &mut f).await {
            Ok(_) | Err(crate::storage::Error::NotFound) => {}
            Err(e) => tracing::warn!("namespace {namespace} removal: {e}"),
        }
    });
}
