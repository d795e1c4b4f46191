//! The key-value primitive under [`super::KvStorage`]: the few etcd v3
//! operations kube-apiserver's etcd3 store uses (`staging/.../storage/etcd3/store.go`),
//! in types that name no engine.
//!
//! Two implementations: [`super::embedded::EmbeddedKv`] (the in-process
//! raftstore member) and [`super::remote::RemoteKv`] (etcd endpoints through
//! the `etcd-client` crate).

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::Result;

/// One stored key at one revision (etcd `mvccpb.KeyValue`, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyValue {
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value bytes (empty for a delete event's key).
    pub value: Vec<u8>,
    /// Revision of the key's creation.
    pub create_revision: i64,
    /// Revision of the last change (for a delete event: the delete's revision).
    pub mod_revision: i64,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A put: a create if `create_revision == mod_revision`.
    Put,
    /// A delete.
    Delete,
}

/// One watch event with the key's previous value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEvent {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the event; for deletes, only key and mod_revision.
    pub kv: KeyValue,
    /// The key before the event, if it existed.
    pub prev: Option<KeyValue>,
}

/// The result of a range read.
#[derive(Debug, Clone, Default)]
pub struct RangeResult {
    /// Keys in ascending order.
    pub kvs: Vec<KeyValue>,
    /// More keys exist past the limit.
    pub more: bool,
    /// The store revision the read was served at.
    pub revision: i64,
}

/// The write of a compare-and-write.
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// Put this value.
    Put(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// The result of a compare-and-write.
#[derive(Debug, Clone, Default)]
pub struct CasResult {
    /// The compare held and the write was applied.
    pub succeeded: bool,
    /// The revision of the txn (the write's revision when it succeeded).
    pub revision: i64,
    /// When the compare failed: the key's current value, if any.
    pub current: Option<KeyValue>,
}

/// What one watch message carries: the events of one or more revisions, or
/// none at all (a progress notification, etcd `WatchResponse` with an empty
/// event list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvBatch {
    /// The watch has seen every change up to and including this revision
    /// (for a progress notification: the store revision it reports).
    pub revision: i64,
    /// The events, in revision order; empty for progress.
    pub events: Vec<KvEvent>,
}

/// A batch of events or progress, or a terminal error.
pub type EventBatch = Result<KvBatch>;

/// The etcd operations the apiserver needs.
///
/// Revisions are etcd main revisions. A revision of 0 means "the current
/// one, read linearizably".
#[async_trait]
pub trait Kv: Send + Sync + 'static {
    /// Reads `[key, end)` (`end` empty: just `key`) at `revision`, at most
    /// `limit` keys (0: no limit).
    ///
    /// # Errors
    /// [`super::Error::Compacted`] or [`super::Error::FutureRevision`] for
    /// revisions the store cannot serve; [`super::Error::Unavailable`].
    async fn range(&self, key: &[u8], end: &[u8], revision: i64, limit: i64) -> Result<RangeResult>;

    /// One txn: if `mod_revision(key) == expected_mod_revision` (0: the key
    /// does not exist) then `op`, else read the key.
    ///
    /// # Errors
    /// [`super::Error::Unavailable`] and internal errors.
    async fn compare_and_write(&self, key: &[u8], expected_mod_revision: i64, op: WriteOp) -> Result<CasResult>;

    /// Watches `[key, end)` from `start_revision` (inclusive), with previous
    /// values. Events arrive in revision order; a revision's events arrive
    /// together. A compacted start gives one `Err(Compacted)` and the end.
    ///
    /// Progress: when the store moves past revisions without events for
    /// this range, the stream sends batches without events whose `revision`
    /// says how far it has seen (etcd progress notifications, which KEP-2340
    /// uses to tell a cache it is fresh). They may be coalesced, but a
    /// watcher idle for a quarter second learns the current revision.
    ///
    /// # Errors
    /// [`super::Error::Unavailable`] if the watch cannot be set up.
    async fn watch(&self, key: &[u8], end: &[u8], start_revision: i64) -> Result<mpsc::Receiver<EventBatch>>;
}

/// The end of etcd's prefix range for `prefix` (`clientv3.GetPrefixRangeEnd`).
pub use raftstore::mvcc::prefix_end;

/// Maps an etcd gRPC error to a storage error by its code and etcd's exact
/// message, which both backends share (the embedded member answers with
/// etcd's wording too).
pub fn from_grpc(s: &tonic::Status) -> super::Error {
    let msg = s.message();
    if msg.contains("required revision has been compacted") {
        super::Error::Compacted { compact_revision: 0 }
    } else if msg.contains("required revision is a future revision") {
        super::Error::FutureRevision
    } else if msg == "etcdserver: request is too large" || msg.starts_with("grpc: received message larger than max") {
        // kube-apiserver matches etcd's exact string and answers 413.
        super::Error::TooLarge(msg.to_string())
    } else {
        match s.code() {
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => super::Error::Unavailable(msg.to_string()),
            _ => super::Error::Internal(format!("etcd: {msg}")),
        }
    }
}
