//! Feeds the Node authorizer's graph (kube's node graph populator): one
//! [`informer`] each over pods, PersistentVolumeClaims and, when served,
//! VolumeAttachments, passing every change to [`Graph::apply`].

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use super::informer::{self, EventHandler};
use crate::authz::node::{Graph, Source};
use crate::registry::Registry;

struct Feed {
    graph: Arc<Graph>,
    source: Source,
}

impl EventHandler for Feed {
    fn on_add(&self, obj: &Value) {
        self.graph.apply(self.source, obj, false);
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.graph.apply(self.source, new, false);
    }
    fn on_delete(&self, obj: &Value) {
        self.graph.apply(self.source, obj, true);
    }
}

/// Starts the informers that feed `graph`; they stop with `stop`.
pub fn start(registry: &Registry, graph: Arc<Graph>, stop: watch::Receiver<bool>) {
    for (group, resource, source) in [("", "pods", Source::Pod), ("", "persistentvolumeclaims", Source::PersistentVolumeClaim), ("storage.k8s.io", "volumeattachments", Source::VolumeAttachment)] {
        match registry.store(group, "v1", resource) {
            Some(store) => {
                informer::start(store, Arc::new(Feed { graph: graph.clone(), source }), stop.clone());
            }
            None => tracing::debug!("{resource} are not served: the Node authorizer does not follow them"),
        }
    }
}
