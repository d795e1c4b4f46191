//! etcd's multi-version concurrency control over RocksDB.
//!
//! - [`revision`]: the `{main, sub}` revision and its encoding.
//! - [`key_index`]: per-key generations of revisions, rebuilt at start.
//! - [`kvstore`]: ranges, puts, deletes, txns, compaction and leases.
//! - [`watchable_store`]: the event hub that watchers read from; it hangs off
//!   the end of each applied write.

pub mod key_index;
pub mod kvstore;
pub mod revision;
pub mod watchable_store;

pub use kvstore::{in_range, MvccStore, RevisionEvents, SharedStore};
pub use watchable_store::WatchHub;
