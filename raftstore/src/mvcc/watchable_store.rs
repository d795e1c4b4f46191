//! The watch event hub (etcd `mvcc/watchable_store.go`, reduced to its core).
//!
//! The state machine publishes each applied revision's events here, after the
//! write is on disk and in revision order. Watch streams subscribe to a
//! bounded broadcast channel. A stream that falls behind is never waited for:
//! it loses its place in the channel and re-reads the missed revisions from
//! disk ([`super::MvccStore::history`]), so delivery stays ordered, unique and
//! reliable (etcd api_guarantees) without slowing the writer.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::broadcast;

use super::RevisionEvents;

/// Revisions buffered per subscriber before it must catch up from disk.
pub const HUB_CAPACITY: usize = 4096;

/// Fan-out point for applied revisions.
pub struct WatchHub {
    inner: Mutex<Inner>,
}

struct Inner {
    tx: broadcast::Sender<Arc<RevisionEvents>>,
    published: i64,
}

impl WatchHub {
    /// A hub whose last published revision is `current`.
    pub fn new(current: i64) -> Self {
        let (tx, _) = broadcast::channel(HUB_CAPACITY);
        WatchHub { inner: Mutex::new(Inner { tx, published: current }) }
    }

    /// Publishes one revision's events. Never blocks.
    pub fn publish(&self, events: RevisionEvents) {
        let mut inner = self.inner.lock();
        inner.published = events.revision;
        // No receivers is fine: nobody is watching.
        let _ = inner.tx.send(Arc::new(events));
    }

    /// Records that the store moved to `revision` without events for watchers
    /// (e.g. after a snapshot install).
    pub fn advance(&self, revision: i64) {
        let mut inner = self.inner.lock();
        inner.published = inner.published.max(revision);
    }

    /// Subscribes, returning the receiver and the last revision published
    /// before it: the receiver yields exactly the revisions after that one.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<RevisionEvents>>, i64) {
        let inner = self.inner.lock();
        (inner.tx.subscribe(), inner.published)
    }

    /// The last published revision.
    pub fn published(&self) -> i64 {
        self.inner.lock().published
    }
}
