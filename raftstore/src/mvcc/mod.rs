//! etcd's multi-version concurrency control over RocksDB.
//!
//! - [`revision`]: the `{main, sub}` revision and its encoding.
//! - [`key_index`]: per-key generations of revisions, rebuilt at start.
//! - [`kvstore`]: the store's state, opening it, and its accessors.
//! - [`range`]: ranges at a revision and the history watchers catch up from.
//! - [`txn`]: applying puts, deletes, txns and leases; read-only txns.
//! - [`compaction`]: dropping history below a revision, from the index in
//!   apply; [`compaction_worker`]: then from disk, in batches, on a thread
//!   of its own.
//! - [`hash`]: the history hash members compare.
//! - [`alarm`]: raised alarms; [`capped`]: applying them, and the writes a
//!   NOSPACE alarm refuses.
//! - [`watchable_store`]: the event hub that watchers read from; it hangs off
//!   the end of each applied write.

pub mod alarm;
pub mod capped;
pub mod compaction;
pub mod compaction_worker;
pub mod hash;
pub mod key_index;
pub mod kvstore;
pub mod range;
pub mod revision;
pub mod txn;
pub mod watchable_store;

pub use compaction_worker::CompactionPacing;
pub use kvstore::{MvccStore, RevisionEvents, SharedStore};
pub use range::{in_range, is_point_read, prefix_end};
pub use txn::{txn_is_read_only, txn_reads_are_point};
pub use watchable_store::WatchHub;
