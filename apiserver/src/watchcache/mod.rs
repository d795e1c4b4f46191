//! The watch cache (kube-apiserver `staging/.../apiserver/pkg/storage/cacher`).
//!
//! [`CachedStorage`] is a [`Storage`] in front of the store. Writes and
//! consistent GETs go to the store. LIST, GET with a resourceVersion and
//! WATCH are served from one [`cacher::Cacher`] per resource (GVR) key
//! prefix, each fed by one store watch and holding:
//! - the current objects at the cache's revision, as a persistent map
//!   swapped atomically, so readers take no lock and a LIST works on a
//!   snapshot while the cache moves on;
//! - a fixed-capacity [`ring::Ring`] of the latest events, each encoded
//!   once and shared by every watcher (the JSON bytes are reference-counted,
//!   never copied per watcher). Publishing never waits; a watcher that falls
//!   behind the ring is closed and counted in
//!   `apiserver_terminated_watchers_total`.
//!
//! Semantics follow Kubernetes api-concepts ("Resource versions", "Efficient
//! detection of changes", "Streaming lists"):
//! - resourceVersion unset: a consistent read. The cache asks the store for
//!   its current revision (a linearizable read) and waits until it has seen
//!   that revision, helped by the store watch's progress notifications
//!   (KEP-2340). If it does not get there in 3 s the read goes to the store.
//! - `"0"`: whatever the cache has. `N` (NotOlderThan): waits up to 3 s for
//!   revision N, then `Too large resource version`.
//! - Exact `N` and continue tokens: from the cache when its snapshot is at
//!   exactly that revision, otherwise from the store at that revision.
//! - Watch from `N` inside the ring's window; older: one 410 Expired error.
//!
//! Caches start on first use of a resource and rebuild themselves (relist,
//! new ring, current watchers closed) when their store watch fails.

pub mod cacher;
pub mod metrics;
pub mod ring;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;

use crate::storage::{ListOptions, ListResult, Preconditions, Result, Storage, TryUpdate, WatchOptions, WatchStream};
use cacher::Cacher;

/// Smallest and largest ring capacity (kube's watch cache bounds).
pub const CAPACITY_BOUNDS: (usize, usize) = (100, 102_400);
/// Default ring capacity: kube sizes its window for the last ~75 s of
/// events; at the ~100 events/s a busy resource sees, that is 7500 events,
/// rounded up to a power of two.
pub const DEFAULT_CAPACITY: usize = 8192;

/// A [`Storage`] serving reads from per-resource caches (see module docs).
pub struct CachedStorage {
    inner: Arc<dyn Storage>,
    /// Resource prefixes (`/registry/<group>/<resource>/`), longest first.
    prefixes: Vec<String>,
    capacity: usize,
    bookmark_interval: std::time::Duration,
    caches: Mutex<HashMap<String, Arc<Cacher>>>,
}

impl CachedStorage {
    /// Caches the resources under `prefixes` of `inner`, each with a ring of
    /// `capacity` events (clamped to [`CAPACITY_BOUNDS`]).
    pub fn new(inner: Arc<dyn Storage>, prefixes: impl IntoIterator<Item = String>, capacity: usize) -> Self {
        let mut prefixes: Vec<String> = prefixes.into_iter().collect();
        prefixes.sort_by_key(|p| std::cmp::Reverse(p.len()));
        prefixes.dedup();
        CachedStorage { inner, prefixes, capacity: capacity.clamp(CAPACITY_BOUNDS.0, CAPACITY_BOUNDS.1), bookmark_interval: cacher::BOOKMARK_INTERVAL, caches: Mutex::new(HashMap::new()) }
    }

    /// Sets how often idle watchers that allow bookmarks get one (default
    /// [`cacher::BOOKMARK_INTERVAL`]); for tests.
    pub fn with_bookmark_interval(mut self, interval: std::time::Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Starts the cache of every resource now rather than on first use, as
    /// kube-apiserver fills its caches at boot: a cache's watch window
    /// begins when it starts, so a lazily started one would answer a watch
    /// from a resourceVersion the client got before (from a write or a
    /// GET) with 410 Expired. Needs a Tokio runtime.
    pub fn start_all(&self) {
        for p in &self.prefixes {
            self.cacher(p);
        }
    }

    /// The store behind the caches.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    /// The cache holding `key` (a key or a list prefix), started on first
    /// use; `None` for keys of no cached resource.
    pub fn cacher(&self, key: &str) -> Option<Arc<Cacher>> {
        let prefix = self.prefixes.iter().find(|p| key.starts_with(p.as_str()))?;
        let mut caches = self.caches.lock();
        Some(caches.entry(prefix.clone()).or_insert_with(|| Cacher::start(prefix.clone(), self.inner.clone(), self.capacity, self.bookmark_interval)).clone())
    }
}

#[async_trait]
impl Storage for CachedStorage {
    async fn get(&self, key: &str) -> Result<Value> {
        // A GET without resourceVersion is a consistent read of one key:
        // cheapest at the store, as kube does.
        self.inner.get(key).await
    }

    async fn get_not_older_than(&self, key: &str, min_revision: i64) -> Result<Value> {
        match self.cacher(key) {
            Some(c) => c.get(key, min_revision).await,
            None => self.inner.get_not_older_than(key, min_revision).await,
        }
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        match self.cacher(prefix) {
            Some(c) => c.list(prefix, opts).await,
            None => self.inner.list(prefix, opts).await,
        }
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Value> {
        self.inner.create(key, obj).await
    }

    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value> {
        self.inner.guaranteed_update(key, preconditions, try_update).await
    }

    async fn delete(&self, key: &str, preconditions: &Preconditions) -> Result<Value> {
        self.inner.delete(key, preconditions).await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream> {
        match self.cacher(key) {
            Some(c) => c.watch(key, opts).await,
            None => self.inner.watch(key, opts).await,
        }
    }

    async fn current_revision(&self) -> Result<i64> {
        self.inner.current_revision().await
    }
}
