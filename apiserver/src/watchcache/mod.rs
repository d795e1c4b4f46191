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
//! Caches start on first use of a resource (or all at boot). When their
//! store watch fails they watch again from the revision they hold, keeping
//! ring and watchers; only when that start is compacted, or the store stays
//! unreachable, do they rebuild (relist, new ring, current watchers
//! closed). Resources added at run time get a cache at once, and a
//! removed resource's cache stops ([`CacheProvider`]).

pub mod cacher;
pub mod metrics;
pub mod ring;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;

use crate::storage::{ListOptions, ListResult, Preconditions, Result, Storage, StorageProvider, TryUpdate, WatchOptions, WatchStream};
use cacher::Cacher;

/// Smallest and largest ring capacity (kube's watch cache bounds).
pub const CAPACITY_BOUNDS: (usize, usize) = (100, 102_400);
/// Default ring capacity: kube sizes its window for the last ~75 s of
/// events; at the ~100 events/s a busy resource sees, that is 7500 events,
/// rounded up to a power of two.
pub const DEFAULT_CAPACITY: usize = 8192;

/// A [`Storage`] serving reads from per-resource caches (see module docs).
///
/// The set of cached prefixes can change while serving: a resource added
/// at run time gets a cache ([`CachedStorage::add_prefix`]), one removed
/// loses it ([`CachedStorage::remove_prefix`]). Readers find their cache
/// through an atomically swapped list, without a lock.
pub struct CachedStorage {
    inner: Arc<dyn Storage>,
    capacity: usize,
    bookmark_interval: std::time::Duration,
    /// The cached prefixes (`/registry/<group>/<resource>/`), longest first.
    slots: ArcSwap<Vec<Arc<Slot>>>,
    /// How many users opened each prefix; taken by writers of `slots` only.
    refs: Mutex<HashMap<String, usize>>,
    /// Set by [`CachedStorage::end_watches`].
    ending: tokio::sync::watch::Sender<bool>,
}

/// One cached prefix and its cache, started on first use.
struct Slot {
    prefix: String,
    cacher: OnceLock<Arc<Cacher>>,
}

fn sorted(mut slots: Vec<Arc<Slot>>) -> Vec<Arc<Slot>> {
    slots.sort_by_key(|s| std::cmp::Reverse(s.prefix.len()));
    slots
}

impl CachedStorage {
    /// Caches the resources under `prefixes` of `inner`, each with a ring of
    /// `capacity` events (clamped to [`CAPACITY_BOUNDS`]).
    pub fn new(inner: Arc<dyn Storage>, prefixes: impl IntoIterator<Item = String>, capacity: usize) -> Self {
        let mut refs = HashMap::new();
        for p in prefixes {
            refs.insert(p, 1);
        }
        let slots = sorted(refs.keys().map(|p| Arc::new(Slot { prefix: p.clone(), cacher: OnceLock::new() })).collect());
        CachedStorage {
            inner,
            capacity: capacity.clamp(CAPACITY_BOUNDS.0, CAPACITY_BOUNDS.1),
            bookmark_interval: cacher::BOOKMARK_INTERVAL,
            slots: ArcSwap::from_pointee(slots),
            refs: Mutex::new(refs),
            ending: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Sets how often idle watchers that allow bookmarks get one (default
    /// [`cacher::BOOKMARK_INTERVAL`]); for tests.
    pub fn with_bookmark_interval(mut self, interval: std::time::Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Ends every open watch of every cache, for a server that shuts down:
    /// each watcher first sends what it has yet to send, then a last
    /// BOOKMARK with the revision it is complete up to (to clients that
    /// asked for bookmarks), so clients resume from there on another
    /// server without a gap. Watches opened afterwards end the same way
    /// once caught up.
    pub fn end_watches(&self) {
        self.ending.send_replace(true);
    }

    /// Starts the cache of every resource now rather than on first use, as
    /// kube-apiserver fills its caches at boot: a cache's watch window
    /// begins when it starts, so a lazily started one would answer a watch
    /// from a resourceVersion the client got before (from a write or a
    /// GET) with 410 Expired. Needs a Tokio runtime.
    pub fn start_all(&self) {
        for slot in self.slots.load().iter() {
            self.started(slot);
        }
    }

    /// The store behind the caches.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    fn started(&self, slot: &Slot) -> Arc<Cacher> {
        slot.cacher
            .get_or_init(|| {
                // The resource's own store (an --etcd-servers-overrides
                // resource has its own revisions).
                let inner = self.inner.backend_for(&slot.prefix).unwrap_or_else(|| self.inner.clone());
                Cacher::start(slot.prefix.clone(), inner, self.capacity, self.bookmark_interval, self.ending.subscribe())
            })
            .clone()
    }

    /// The cache holding `key` (a key or a list prefix), started on first
    /// use; `None` for keys of no cached resource.
    pub fn cacher(&self, key: &str) -> Option<Arc<Cacher>> {
        let slots = self.slots.load();
        let slot = slots.iter().find(|s| key.starts_with(s.prefix.as_str()))?;
        Some(self.started(slot))
    }

    /// The cached prefixes whose cache has not listed its resource yet or
    /// is rebuilding (empty once every cache follows the store).
    pub fn unsynced(&self) -> Vec<String> {
        self.slots.load().iter().filter(|s| !s.cacher.get().is_some_and(|c| c.is_ready())).map(|s| s.prefix.clone()).collect()
    }

    /// Whether keys under `prefix` are cached.
    pub fn is_cached(&self, prefix: &str) -> bool {
        self.slots.load().iter().any(|s| s.prefix == prefix)
    }

    /// Caches `prefix` from now on and starts its cache (a resource added
    /// at run time). Adding a prefix that is cached already counts one more
    /// user of it (two served versions stored once). Needs a Tokio runtime.
    pub fn add_prefix(&self, prefix: &str) {
        let mut refs = self.refs.lock();
        let n = refs.entry(prefix.to_string()).or_insert(0);
        *n += 1;
        if *n > 1 {
            return;
        }
        let slot = Arc::new(Slot { prefix: prefix.to_string(), cacher: OnceLock::new() });
        let mut slots: Vec<Arc<Slot>> = self.slots.load().iter().cloned().collect();
        slots.push(slot.clone());
        self.slots.store(Arc::new(sorted(slots)));
        self.started(&slot);
    }

    /// Drops one user of `prefix`; when none is left, its keys are no
    /// longer cached and its cache stops (its watchers' streams end).
    /// Unknown prefixes are ignored.
    pub fn remove_prefix(&self, prefix: &str) {
        let mut refs = self.refs.lock();
        let Some(n) = refs.get_mut(prefix) else { return };
        *n -= 1;
        if *n > 0 {
            return;
        }
        refs.remove(prefix);
        let current = self.slots.load_full();
        let (gone, kept): (Vec<Arc<Slot>>, Vec<Arc<Slot>>) = current.iter().cloned().partition(|s| s.prefix == prefix);
        self.slots.store(Arc::new(kept));
        for slot in gone {
            if let Some(c) = slot.cacher.get() {
                c.stop();
            }
        }
    }
}

/// Serves every resource that the registry opens from the watch cache, and
/// stops its cache when the resource is closed (kube's
/// `StorageWithCacher` decorator).
pub struct CacheProvider(pub Arc<CachedStorage>);

impl StorageProvider for CacheProvider {
    fn open(&self, prefix: &str) -> Arc<dyn Storage> {
        self.0.add_prefix(prefix);
        self.0.clone()
    }

    fn close(&self, prefix: &str) {
        self.0.remove_prefix(prefix);
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
