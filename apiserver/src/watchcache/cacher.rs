//! One resource's cache (kube-apiserver `storage/cacher`): the current
//! objects and a ring of recent events, fed by one store watch.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::metrics::metrics;
use super::ring::{Read, Ring};
use crate::storage::{store::encode_continue, Error, EventType, ListOptions, ListResult, Predicate, Result, RevisionMatch, Storage, WatchEvent, WatchOptions, WatchStream};

/// How long a read waits for the cache to reach a resourceVersion before
/// kube's 504 `Too large resource version` (kube's `blockTimeout`, 3 s).
pub const FRESHNESS_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a watcher with `allowWatchBookmarks` gets a BOOKMARK when
/// nothing else happens, by default (kube sends one about every minute;
/// clients need them only to resume close to the present).
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);
/// Events buffered between a watcher's ring reader and its HTTP stream.
const WATCHER_BUFFER: usize = 64;
/// Delay before rebuilding the cache after the store watch failed.
const RETRY_DELAY: Duration = Duration::from_millis(500);
/// Attempts to open the store watch again after it failed, before the
/// cache is rebuilt from a new list.
const RESUME_ATTEMPTS: u32 = 5;

/// One cached object: its JSON (with resourceVersion), encoded once.
#[derive(Clone, Debug)]
pub struct CachedObject {
    /// The object's JSON encoding.
    pub encoded: Bytes,
}

impl CachedObject {
    fn decode(&self) -> Result<Value> {
        serde_json::from_slice(&self.encoded).map_err(|e| Error::Internal(format!("cached object: {e}")))
    }
}

/// The objects at one revision. Cloning is O(1) (a persistent map), so a
/// LIST keeps its snapshot while the feeder moves on.
#[derive(Clone, Default)]
pub struct Snapshot {
    /// The revision the objects are at.
    pub revision: i64,
    /// Key → object.
    pub objects: imbl::OrdMap<Arc<str>, CachedObject>,
}

/// One change, as stored in the ring and shared by every watcher.
#[derive(Debug)]
pub struct CacheEvent {
    /// The change's revision.
    pub revision: i64,
    /// Added, Modified or Deleted, as the store saw it.
    pub kind: EventType,
    /// The key.
    pub key: Arc<str>,
    /// The object after (for deletes: its last state at the delete's revision).
    pub object: Arc<Value>,
    /// The object before, if any.
    pub prev: Option<Arc<Value>>,
    /// `object` as JSON, encoded once for every watcher.
    pub encoded: Bytes,
}

/// One generation of the cache: from an initial list to a failure of its
/// store watch. Watchers belong to one generation and end with it.
struct Generation {
    ring: Ring<CacheEvent>,
    /// Revision of the initial list: events after it are in the ring.
    start_revision: i64,
}

/// A resource's cache.
pub struct Cacher {
    prefix: String,
    inner: Arc<dyn Storage>,
    capacity: usize,
    bookmark_interval: Duration,
    generation: ArcSwap<Generation>,
    snapshot: ArcSwap<Snapshot>,
    /// The revision the cache has seen everything up to (events and
    /// progress). Updated after the ring and snapshot, so a reader that loads
    /// it first and then finds the ring empty has seen every event up to it.
    revision: AtomicI64,
    revision_tx: watch::Sender<i64>,
    ready: AtomicBool,
    /// Set once by [`Cacher::stop`]; the feeder ends and does not rebuild.
    stopped: watch::Sender<bool>,
    /// Becomes true when the server shuts down: each watcher, once caught
    /// up, sends a last BOOKMARK (if it asked for bookmarks) and ends.
    ending: watch::Receiver<bool>,
}

impl Cacher {
    /// Starts a cache of the keys under `prefix` of `inner` with a ring of
    /// `capacity` events. The cache fills in the background; reads wait for
    /// it. Its watchers end when `ending` becomes true (server shutdown).
    pub fn start(prefix: String, inner: Arc<dyn Storage>, capacity: usize, bookmark_interval: Duration, ending: watch::Receiver<bool>) -> Arc<Self> {
        let (revision_tx, _) = watch::channel(0);
        let c = Arc::new(Cacher {
            prefix,
            inner,
            capacity,
            bookmark_interval,
            generation: ArcSwap::from_pointee(Generation { ring: Ring::new(1), start_revision: 0 }),
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            revision: AtomicI64::new(0),
            revision_tx,
            ready: AtomicBool::new(false),
            stopped: watch::channel(false).0,
            ending,
        });
        let weak = Arc::downgrade(&c);
        tokio::spawn(async move {
            // A store without a quorum fails every attempt until it has
            // one: warn once per outage, not once per retry.
            let mut failing = false;
            loop {
                let Some(c) = weak.upgrade() else { return };
                if let Err(e) = c.run_generation().await {
                    let never_ready = !c.ready.load(Ordering::Acquire);
                    if failing && never_ready {
                        tracing::debug!("watch cache {}: {e}; rebuilding", c.prefix);
                    } else {
                        tracing::warn!("watch cache {}: {e}; rebuilding", c.prefix);
                    }
                    failing = never_ready;
                }
                c.ready.store(false, Ordering::Release);
                c.generation.load().ring.close();
                if c.is_stopped() {
                    return;
                }
                drop(c);
                tokio::time::sleep(RETRY_DELAY).await;
            }
        });
        c
    }

    /// Whether the cache has listed its resource and follows the store's
    /// watch (false while it starts or rebuilds).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Stops the cache for good (its resource is no longer served): the
    /// store watch ends and every watcher's stream ends after what it was
    /// sent. Reads that still hold the cache see its last state.
    pub fn stop(&self) {
        self.stopped.send_replace(true);
        self.generation.load().ring.close();
    }

    /// Whether [`Cacher::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        *self.stopped.borrow()
    }

    /// The key prefix this cache holds.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The revision the cache has reached.
    pub fn revision(&self) -> i64 {
        self.revision.load(Ordering::Acquire)
    }

    /// The ring's capacity in events.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    fn set_revision(&self, rev: i64) {
        self.revision.fetch_max(rev, Ordering::AcqRel);
        self.revision_tx.send_if_modified(|r| {
            if rev > *r {
                *r = rev;
                true
            } else {
                false
            }
        });
        metrics().resource_version.with_label_values(&[&self.prefix]).set(rev);
    }

    /// Lists, then follows the store watch until it fails.
    async fn run_generation(self: &Arc<Self>) -> Result<()> {
        let mut stop = self.stopped.subscribe();
        if *stop.borrow_and_update() {
            return Ok(());
        }
        metrics().initializations.with_label_values(&[&self.prefix]).inc();
        let list = self.inner.list(&self.prefix, &ListOptions::default()).await?;
        let mut objects = imbl::OrdMap::new();
        for o in list.items {
            let key: Arc<str> = self.key_of(&o).into();
            objects.insert(key, CachedObject { encoded: encode(&o)? });
        }
        let list = ListResult { revision: list.revision, ..Default::default() };
        let mut events = self.inner.watch(&self.prefix, &WatchOptions { revision: list.revision, recursive: true, initial_events: Some(false), bookmarks: true, ..Default::default() }).await?;
        let old = self.generation.swap(Arc::new(Generation { ring: Ring::new(self.capacity), start_revision: list.revision }));
        old.ring.close();
        let generation = self.generation.load_full();
        let mut snap = Snapshot { revision: list.revision, objects };
        self.snapshot.store(Arc::new(snap.clone()));
        self.set_revision(list.revision);
        self.ready.store(true, Ordering::Release);
        let received = metrics().events_received.with_label_values(&[&self.prefix]);
        let mut dirty = false;
        loop {
            // Publish the snapshot when the stream has nothing more ready
            // (kube writes one key per txn, so a revision is one event).
            let ev = match events.try_recv() {
                Ok(ev) => Some(ev),
                Err(mpsc::error::TryRecvError::Empty) => {
                    if dirty {
                        self.snapshot.store(Arc::new(snap.clone()));
                        self.set_revision(snap.revision);
                        dirty = false;
                    }
                    tokio::select! {
                        ev = events.recv() => ev,
                        _ = stop.changed() => return Ok(()),
                    }
                }
                Err(mpsc::error::TryRecvError::Disconnected) => None,
            };
            let ev = match ev {
                Some(Ok(ev)) => ev,
                Some(Err(e @ Error::Compacted { .. })) => return Err(e),
                failed => {
                    // The store watch broke (a member went away, a
                    // connection reset): watch again from what the cache
                    // holds, keeping its ring and its watchers, as kube's
                    // reflector re-watches from its last resourceVersion.
                    // Only a start that is gone, or a store that stays
                    // unreachable, rebuilds the cache.
                    let e = match failed {
                        Some(Err(e)) => e,
                        _ => Error::Unavailable("store watch ended".into()),
                    };
                    if dirty {
                        self.snapshot.store(Arc::new(snap.clone()));
                        self.set_revision(snap.revision);
                        dirty = false;
                    }
                    match self.resume(snap.revision, &mut stop, e).await? {
                        Some(resumed) => {
                            events = resumed;
                            continue;
                        }
                        None => return Ok(()),
                    }
                }
            };
            let rev = crate::meta::resource_version(&ev.object).parse::<i64>().unwrap_or(0);
            if ev.kind == EventType::Bookmark {
                if rev > snap.revision {
                    snap.revision = rev;
                    dirty = true;
                }
                continue;
            }
            received.inc();
            let key: Arc<str> = self.key_of(&ev.object).into();
            let encoded = match ev.encoded {
                Some(b) => b,
                None => encode(&ev.object)?,
            };
            if ev.kind == EventType::Deleted {
                snap.objects.remove(&key);
            } else {
                snap.objects.insert(key.clone(), CachedObject { encoded: encoded.clone() });
            }
            snap.revision = snap.revision.max(rev);
            dirty = true;
            generation.ring.push(CacheEvent { revision: rev, kind: ev.kind, key, object: ev.object, prev: ev.prev, encoded });
        }
    }

    /// Opens the store watch again after `revision`, when the one the cache
    /// followed failed with `failure`: [`RESUME_ATTEMPTS`] tries,
    /// [`RETRY_DELAY`] apart. `None` when the cache was stopped meanwhile.
    ///
    /// # Errors
    /// The last attempt's error, or `failure` if the store watch could not
    /// be opened at all; the caller rebuilds the cache.
    async fn resume(&self, revision: i64, stop: &mut watch::Receiver<bool>, failure: Error) -> Result<Option<WatchStream>> {
        tracing::info!("watch cache {}: store watch failed: {failure}; watching again from revision {revision}", self.prefix);
        let opts = WatchOptions { revision, recursive: true, initial_events: Some(false), bookmarks: true, ..Default::default() };
        let mut last = failure;
        for _ in 0..RESUME_ATTEMPTS {
            match self.inner.watch(&self.prefix, &opts).await {
                Ok(events) => return Ok(Some(events)),
                Err(e @ Error::Compacted { .. }) => return Err(e),
                Err(e) => last = e,
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY_DELAY) => {}
                _ = stop.changed() => return Ok(None),
            }
        }
        Err(last)
    }

    /// The storage key of a cached object (prefix + namespace/name).
    fn key_of(&self, obj: &Value) -> String {
        crate::storage::keys::under(&self.prefix, crate::meta::namespace(obj), crate::meta::name(obj))
    }

    /// Waits until the cache is ready and at revision `>= rev`, at most
    /// [`FRESHNESS_TIMEOUT`].
    ///
    /// # Errors
    /// [`Error::TooLargeResourceVersion`] on timeout.
    pub async fn wait_fresh(&self, rev: i64) -> Result<()> {
        let mut rx = self.revision_tx.subscribe();
        let wait = async {
            loop {
                if self.ready.load(Ordering::Acquire) && self.revision() >= rev {
                    return;
                }
                let _ = tokio::time::timeout(Duration::from_millis(50), rx.changed()).await;
            }
        };
        tokio::time::timeout(FRESHNESS_TIMEOUT, wait).await.map_err(|_| Error::TooLargeResourceVersion { requested: rev, current: self.revision() })
    }

    /// The snapshot a read with `revision`/`revision_match` is served from,
    /// or `None` when the read must go to the store (an exact older
    /// revision).
    ///
    /// # Errors
    /// [`Error::TooLargeResourceVersion`]; store errors of the consistent
    /// read's revision check.
    async fn snapshot_for(&self, revision: i64, revision_match: RevisionMatch) -> Result<Option<Arc<Snapshot>>> {
        match (revision_match, revision) {
            (RevisionMatch::Exact, 0) => {
                // A consistent read (KEP-2340): the store's current revision
                // from a linearizable read, then wait for the cache to see it
                // (the store watch's progress notifications move it along).
                let current = self.inner.current_revision().await?;
                match self.wait_fresh(current).await {
                    Ok(()) => Ok(Some(self.snapshot())),
                    // Not fresh in time: read the store, as kube falls back.
                    Err(_) => Ok(None),
                }
            }
            (RevisionMatch::Exact, rev) => {
                self.wait_fresh(0).await?;
                let s = self.snapshot();
                Ok((s.revision == rev).then_some(s))
            }
            (RevisionMatch::NotOlderThan, rev) => {
                self.wait_fresh(rev).await?;
                Ok(Some(self.snapshot()))
            }
        }
    }

    /// GET at any revision `>= min_revision`.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::TooLargeResourceVersion`].
    pub async fn get(&self, key: &str, min_revision: i64) -> Result<Value> {
        self.wait_fresh(min_revision).await?;
        self.snapshot().objects.get(key).ok_or(Error::NotFound)?.decode()
    }

    /// LIST under `prefix` (this cache's prefix or a namespace's under it).
    /// Continue tokens and exact older revisions go to the store, pinned at
    /// the token's revision.
    ///
    /// # Errors
    /// As [`Storage::list`].
    pub async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        if opts.continue_token.as_deref().is_some_and(|t| !t.is_empty()) {
            return self.inner.list(prefix, opts).await;
        }
        let Some(snap) = self.snapshot_for(opts.revision, opts.revision_match).await? else {
            return self.inner.list(prefix, opts).await;
        };
        let limit = usize::try_from(opts.limit.max(0)).unwrap_or(usize::MAX);
        let mut out = ListResult { revision: snap.revision, ..Default::default() };
        let start: Arc<str> = prefix.into();
        let mut count = 0usize;
        for (key, obj) in snap.objects.range(start..) {
            if !key.starts_with(prefix) {
                break;
            }
            if limit > 0 && count == limit {
                // The token names the next key itself: the next page starts there.
                out.continue_token = encode_continue(key.as_bytes(), prefix, snap.revision);
                break;
            }
            let value = match &opts.predicate {
                Some(p) => {
                    let v = obj.decode()?;
                    if !p(&v) {
                        continue;
                    }
                    Some(v)
                }
                None => None,
            };
            count += 1;
            if opts.allow_encoded {
                out.encoded.push(obj.encoded.clone());
            } else {
                out.items.push(match value {
                    Some(v) => v,
                    None => obj.decode()?,
                });
            }
        }
        Ok(out)
    }

    /// WATCH of `key` (with `opts.recursive`, every key under it).
    ///
    /// # Errors
    /// [`Error::TooLargeResourceVersion`] for a start the cache does not
    /// reach in time. An expired start (older than the ring) is reported in
    /// the stream, as kube does: one `Err(Compacted)`.
    pub async fn watch(self: &Arc<Self>, key: &str, opts: &WatchOptions) -> Result<WatchStream> {
        let (tx, rx) = mpsc::channel(WATCHER_BUFFER);
        let mut initial = Vec::new();
        let start_rev = if opts.wants_initial_events() {
            let snap = match self.snapshot_for(opts.revision, if opts.revision == 0 { opts.revision_match } else { RevisionMatch::NotOlderThan }).await? {
                Some(s) => s,
                None => {
                    self.wait_fresh(0).await?;
                    self.snapshot()
                }
            };
            let start: Arc<str> = key.into();
            for (k, obj) in snap.objects.range(start..) {
                if !(k.as_ref() == key || (opts.recursive && k.starts_with(key))) {
                    break;
                }
                let v = obj.decode()?;
                if opts.predicate.as_ref().is_none_or(|p| p(&v)) {
                    initial.push(WatchEvent { kind: EventType::Added, object: Arc::new(v), prev: None, encoded: Some(obj.encoded.clone()) });
                }
            }
            if opts.initial_events_end {
                initial.push(WatchEvent::bookmark(snap.revision, true));
            }
            snap.revision
        } else if opts.revision == 0 {
            self.wait_fresh(0).await?;
            self.revision()
        } else {
            self.wait_fresh(opts.revision).await?;
            opts.revision
        };
        let generation = self.generation.load_full();
        let position = match find_position(&generation, start_rev) {
            Some(p) => p,
            None => {
                let oldest = oldest_revision(&generation);
                let _ = tx.try_send(Err(Error::Compacted { compact_revision: oldest }));
                return Ok(rx);
            }
        };
        let w = Watcher { cacher: self.clone(), generation, position, key: key.to_string(), recursive: opts.recursive, predicate: opts.predicate.clone(), bookmarks: opts.bookmarks, tx };
        tokio::spawn(w.run(initial));
        Ok(rx)
    }
}

/// An object's JSON, in an allocation of exactly its size (the encoder's
/// buffer grows by doubling; the cache keeps the bytes for the object's
/// lifetime).
fn encode(obj: &Value) -> Result<Bytes> {
    let mut v = serde_json::to_vec(obj).map_err(|e| Error::Internal(e.to_string()))?;
    v.shrink_to_fit();
    Ok(Bytes::from(v))
}

/// The oldest revision a watch can start after: the initial list's while
/// the ring has not wrapped; after that, one before the oldest event held,
/// since every change after that revision is still in the ring (kube's
/// `watchCache` allows `oldest - 1` likewise and names it in its "too old
/// resource version" error).
fn oldest_revision(g: &Generation) -> i64 {
    let oldest = g.ring.oldest();
    if oldest == 0 {
        return g.start_revision;
    }
    match g.ring.read(oldest) {
        Read::Ready(e) => e.value.revision - 1,
        _ => i64::MAX,
    }
}

/// The ring position of the first event after `rev`, or `None` if events
/// after `rev` have left the ring.
fn find_position(g: &Generation, rev: i64) -> Option<u64> {
    for _ in 0..3 {
        if rev < oldest_revision(g) {
            return None;
        }
        // Binary search over [oldest, head): revisions never decrease.
        let (mut lo, mut hi) = (g.ring.oldest(), g.ring.head());
        let mut lagged = false;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match g.ring.read(mid) {
                Read::Ready(e) if e.value.revision <= rev => lo = mid + 1,
                Read::Ready(_) => hi = mid,
                Read::Empty => hi = mid,
                Read::Lagged => {
                    lagged = true;
                    break;
                }
            }
        }
        if !lagged {
            return Some(lo);
        }
    }
    None
}

/// One watcher's reader of the ring.
struct Watcher {
    cacher: Arc<Cacher>,
    generation: Arc<Generation>,
    position: u64,
    key: String,
    recursive: bool,
    predicate: Option<Predicate>,
    bookmarks: bool,
    tx: mpsc::Sender<Result<WatchEvent>>,
}

impl Watcher {
    /// Hands `ev` to the HTTP stream; false when the watcher must end: its
    /// client is gone, or it stopped reading for so long that the ring
    /// overwrote the events it has yet to read. In the second case it is
    /// closed and counted as terminated now, while it is stalled, rather
    /// than when its client reads again (kube's cacher likewise closes a
    /// watcher whose buffer stays full, "Forcing watcher close due to
    /// unresponsiveness"). The close never waits for the client: the stream
    /// ends after what was already buffered, without a gap.
    async fn send(&self, ev: WatchEvent) -> bool {
        let permit = match self.tx.try_reserve() {
            Ok(p) => p,
            Err(mpsc::error::TrySendError::Closed(())) => return false,
            Err(mpsc::error::TrySendError::Full(())) => {
                // Next unread position overwritten: head > position + capacity.
                let overrun = self.position + self.generation.ring.capacity() as u64;
                tokio::select! {
                    biased;
                    p = self.tx.reserve() => match p {
                        Ok(p) => p,
                        Err(_) => return false,
                    },
                    () = self.generation.ring.wait(overrun) => {
                        if !self.generation.ring.is_closed() {
                            metrics().terminated_watchers.with_label_values(&[&self.cacher.prefix]).inc();
                            tracing::debug!("watch cache {}: closing a watcher that stopped reading", self.cacher.prefix);
                        }
                        return false;
                    }
                }
            }
        };
        permit.send(Ok(ev));
        true
    }

    async fn run(mut self, initial: Vec<WatchEvent>) {
        for e in initial {
            if !self.send(e).await {
                return;
            }
        }
        let dispatched = metrics().events_dispatched.with_label_values(&[&self.cacher.prefix]);
        let mut sent = 0u64;
        let mut last_bookmark = tokio::time::Instant::now();
        let mut bookmarked_rev = 0i64;
        let mut ending = self.cacher.ending.clone();
        // The sender goes with its storage; then there is no shutdown to
        // wait for.
        let mut ending_gone = false;
        loop {
            // Load the revision before looking at the ring: if the ring then
            // has nothing new, every event up to `rev` has been read.
            let rev = self.cacher.revision();
            match self.generation.ring.read(self.position) {
                Read::Ready(e) => {
                    self.position += 1;
                    let ev = &e.value;
                    if !(ev.key.as_ref() == self.key || (self.recursive && ev.key.starts_with(&self.key))) {
                        continue;
                    }
                    let out = WatchEvent { kind: ev.kind, object: ev.object.clone(), prev: ev.prev.clone(), encoded: Some(ev.encoded.clone()) };
                    let Some(out) = out.filtered(self.predicate.as_ref()) else { continue };
                    if !self.send(out).await {
                        break;
                    }
                    sent += 1;
                }
                Read::Lagged => {
                    // Too slow: the ring moved past this watcher. Closing it
                    // lets the client resume from its last resourceVersion.
                    metrics().terminated_watchers.with_label_values(&[&self.cacher.prefix]).inc();
                    tracing::debug!("watch cache {}: closing a watcher that fell behind", self.cacher.prefix);
                    break;
                }
                Read::Empty => {
                    if sent > 0 {
                        dispatched.inc_by(sent);
                        sent = 0;
                    }
                    if self.generation.ring.is_closed() {
                        break;
                    }
                    if *ending.borrow_and_update() {
                        // Caught up to `rev`: a last bookmark tells the
                        // client where to resume on another server.
                        if self.bookmarks && rev > 0 {
                            self.send(WatchEvent::bookmark(rev, false)).await;
                        }
                        break;
                    }
                    let interval = self.cacher.bookmark_interval;
                    if self.bookmarks && rev > bookmarked_rev && last_bookmark.elapsed() >= interval {
                        if !self.send(WatchEvent::bookmark(rev, false)).await {
                            break;
                        }
                        bookmarked_rev = rev;
                        last_bookmark = tokio::time::Instant::now();
                        continue;
                    }
                    let next_bookmark = interval.saturating_sub(last_bookmark.elapsed()).max(Duration::from_millis(100));
                    tokio::select! {
                        _ = self.generation.ring.wait(self.position) => {}
                        _ = tokio::time::sleep(next_bookmark), if self.bookmarks => {}
                        r = ending.changed(), if !ending_gone => ending_gone = r.is_err(),
                        _ = self.tx.closed() => break,
                    }
                }
            }
        }
        if sent > 0 {
            dispatched.inc_by(sent);
        }
    }
}
