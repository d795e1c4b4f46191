//! The admission feed: an informer per resource admission plugins read
//! ([`crate::admission::sources::WATCHED`]), each plugged into the plugins'
//! [`Sources`] as soon as it starts. Every node runs it; no Lease.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use super::informer::{self, EventHandler, Lister};
use crate::admission::sources::{Snapshot, Source, Sources, WATCHED};
use crate::registry::Registry;

impl Source for Lister {
    fn snapshot(&self) -> Snapshot {
        Lister::snapshot(self)
    }

    fn synced(&self) -> bool {
        self.is_synced()
    }
}

/// Plugins read the copies when they run; nothing to do per event.
struct Quiet;

impl EventHandler for Quiet {
    fn on_add(&self, _: &Value) {}
    fn on_update(&self, _: &Value, _: &Value) {}
    fn on_delete(&self, _: &Value) {}
}

/// Starts the informers of the served resources of [`WATCHED`] until
/// `stop`, plugs them into `sources`, and then marks `sources` fed (the
/// copies of resources not served are then known to be empty).
pub fn start(registry: &Registry, sources: &Sources, stop: watch::Receiver<bool>) {
    for (group, version, resource) in WATCHED {
        match registry.store(group, version, resource) {
            Some(store) => {
                let lister = informer::start(store, Arc::new(Quiet), stop.clone());
                sources.set(group, resource, Arc::new(lister));
            }
            None => tracing::debug!("{resource}.{group} is not served: admission plugins see none"),
        }
    }
    sources.mark_fed();
}
