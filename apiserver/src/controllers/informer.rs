//! An informer (client-go `cache.SharedInformer`, in process): keeps a local
//! copy of one resource's objects, fed by a list and then a watch through
//! the resource's store (both served by the watch cache), and tells an
//! [`EventHandler`] about every change. The copy is read through a
//! [`Lister`] without touching the store.
//!
//! When the watch ends (a restart of the cache, a `410 Expired`), the
//! informer lists again and reports the differences, so handlers see every
//! object that exists at least once after each (re)list: a controller that
//! starts late, or restarts, still finds the work left for it.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::Value;
use tokio::sync::watch;

use crate::authn::UserInfo;
use crate::meta;
use crate::registry::rest::{Context, EventType, ListOptions, Lister as _, WatchOptions, Watcher as _};
use crate::registry::store::Store;
use crate::storage::RevisionMatch;
use crate::warning::Warnings;

/// Pause before listing again after the watch failed.
const RELIST_DELAY: Duration = Duration::from_millis(500);

/// What an informer tells about changes. Calls are quick (enqueue work);
/// they run on the informer's task, in event order.
pub trait EventHandler: Send + Sync {
    /// An object appeared (or was there at the first list).
    fn on_add(&self, obj: &Value);
    /// An object changed.
    fn on_update(&self, old: &Value, new: &Value);
    /// An object is gone; its last known state.
    fn on_delete(&self, obj: &Value);
}

/// The key of an object in the informer's copy: `namespace/name`, or
/// `name` for cluster-scoped objects (client-go's
/// `MetaNamespaceKeyFunc`).
pub fn key_of(obj: &Value) -> String {
    let ns = meta::namespace(obj);
    if ns.is_empty() {
        meta::name(obj).to_string()
    } else {
        format!("{ns}/{}", meta::name(obj))
    }
}

/// Reads the informer's copy.
#[derive(Clone)]
pub struct Lister {
    objects: Arc<ArcSwap<imbl::OrdMap<String, Arc<Value>>>>,
    synced: watch::Receiver<bool>,
}

impl Lister {
    /// The object with `key` ([`key_of`]), as last seen.
    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.objects.load().get(key).cloned()
    }

    /// Every object, in key order.
    pub fn list(&self) -> Vec<Arc<Value>> {
        self.objects.load().values().cloned().collect()
    }

    /// Every object as one snapshot, keyed by [`key_of`]: the same `Arc`
    /// until something changes.
    pub fn snapshot(&self) -> Arc<imbl::OrdMap<String, Arc<Value>>> {
        self.objects.load_full()
    }

    /// Whether the first list is in.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list is in.
    pub async fn wait_synced(&mut self) {
        let _ = self.synced.wait_for(|s| *s).await;
    }
}

/// The user the server's own loops act as (kube's loopback client is
/// `system:apiserver` in `system:masters`).
pub fn internal_user() -> UserInfo {
    UserInfo { name: "system:apiserver".into(), groups: vec!["system:masters".into(), crate::authn::ALL_AUTHENTICATED.into()], ..Default::default() }
}

/// Starts an informer on `store` that reports to `handler` until `stop`
/// turns true; returns its lister.
pub fn start(store: Arc<Store>, handler: Arc<dyn EventHandler>, mut stop: watch::Receiver<bool>) -> Lister {
    let objects = Arc::new(ArcSwap::from_pointee(imbl::OrdMap::new()));
    let (synced_tx, synced) = watch::channel(false);
    let lister = Lister { objects: objects.clone(), synced };
    tokio::spawn(async move {
        let user = internal_user();
        let warnings = Warnings::default();
        let ctx = Context { namespace: "", user: &user, user_agent: Some("informer"), warnings: &warnings, audit: None };
        loop {
            let run = run_once(&store, &ctx, &objects, handler.as_ref(), &synced_tx);
            tokio::select! {
                r = run => {
                    if let Err(e) = r {
                        tracing::debug!("informer of {}: {e}; listing again", store.resource().qualified());
                    }
                }
                _ = stop.wait_for(|s| *s) => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(RELIST_DELAY) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    });
    lister
}

/// One list and the watch after it, until the watch ends.
async fn run_once(
    store: &Store,
    ctx: &Context<'_>,
    objects: &ArcSwap<imbl::OrdMap<String, Arc<Value>>>,
    handler: &dyn EventHandler,
    synced: &watch::Sender<bool>,
) -> Result<(), crate::errors::Status> {
    let listed = store.list(ctx, &ListOptions::default()).await?;
    let mut fresh = imbl::OrdMap::new();
    for o in listed.items {
        fresh.insert(key_of(&o), Arc::new(o));
    }
    let old = objects.load_full();
    for (k, o) in fresh.iter() {
        match old.get(k) {
            None => handler.on_add(o),
            Some(prev) if prev != o => handler.on_update(prev, o),
            Some(_) => {}
        }
    }
    for (k, o) in old.iter() {
        if !fresh.contains_key(k) {
            handler.on_delete(o);
        }
    }
    let mut current = fresh;
    objects.store(Arc::new(current.clone()));
    synced.send_replace(true);
    let read = crate::storage::WatchOptions { revision: listed.revision, revision_match: RevisionMatch::NotOlderThan, initial_events: Some(false), ..Default::default() };
    let mut events = store.watch(ctx, "", &WatchOptions { read, ..Default::default() }).await?;
    while let Some(ev) = events.recv().await {
        let ev = ev.map_err(|e| store.interpret(e, "watch", "", None))?;
        let key = key_of(&ev.object);
        match ev.kind {
            EventType::Bookmark => continue,
            EventType::Added | EventType::Modified => {
                let prev = current.insert(key, ev.object.clone());
                match prev {
                    Some(p) => handler.on_update(&p, &ev.object),
                    None => handler.on_add(&ev.object),
                }
            }
            EventType::Deleted => {
                current.remove(&key);
                handler.on_delete(&ev.object);
            }
        }
        objects.store(Arc::new(current.clone()));
    }
    Ok(())
}
