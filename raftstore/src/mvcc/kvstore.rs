//! The MVCC key-value store (etcd `mvcc/kvstore.go`): its in-memory state
//! (key index, revisions, leases), opening and rebuilding it from disk, and
//! the small accessors. The operations live beside it, one file per concern:
//! [`super::range`] (ranges and watch history), [`super::txn`] (applying
//! writes and txns), [`super::compaction`] and [`super::hash`].
//!
//! Concurrency: one writer (the Raft state machine) and many readers. The
//! in-memory [`State`] (key index, revisions, leases) sits behind a `RwLock`.
//! A write holds the write lock while it updates the index and writes its
//! batch to RocksDB; a read takes the read lock only to resolve keys to
//! revisions and to take a RocksDB snapshot, then reads values unlocked. Both
//! views agree because the index and the disk change under the same lock.
//! Watch events are handed back to the caller, never emitted from here
//! (etcd's watchable store hangs off the end of the write txn the same way).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use prost::Message;
use proto::etcdserverpb::ResponseHeader;
use proto::mvccpb::{Event, KeyValue};
use rocksdb::{Direction, IteratorMode, DB};

use super::compaction_worker::{CompactionPacing, Compactor, Job};
use super::key_index::KeyIndex;
use crate::error::{Error, Result};
use crate::storage::keys::{self, MetaKey};
use crate::storage::{cf, Db};

/// etcd's largest lease TTL, in seconds (`lease.MaxLeaseTTL`).
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

/// One lease as the state machine knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Granted TTL in seconds.
    pub ttl: i64,
    /// Keys currently attached to the lease.
    pub keys: BTreeSet<Vec<u8>>,
}

/// All the changes of one main revision, in sub-revision order, each with its
/// previous key-value. What a watcher receives atomically.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionEvents {
    /// The main revision.
    pub revision: i64,
    /// The events of that revision; `prev_kv` is always filled when a previous
    /// value existed.
    pub events: Vec<Event>,
}

/// In-memory MVCC state, rebuilt from disk at start.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) index: BTreeMap<Vec<u8>, KeyIndex>,
    pub(super) current: i64,
    pub(super) compact: i64,
    pub(super) leases: BTreeMap<i64, LeaseRecord>,
    /// Raised alarms (see [`super::alarm`]).
    pub(super) alarms: super::alarm::Alarms,
}

/// The MVCC store over a RocksDB handle.
pub struct MvccStore {
    pub(super) db: Db,
    pub(super) state: RwLock<State>,
    /// Mirror of `state.current` for lock-free response headers.
    pub(super) current: AtomicI64,
    /// Smallest lease TTL granted, in seconds (etcd's minLeaseTTL).
    pub(super) min_lease_ttl: i64,
    /// Deletes compacted history from disk, off the apply path.
    pub(super) compactor: Compactor,
}

pub(super) fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader { revision, ..Default::default() })
}

pub(super) fn decode_kv(bytes: &[u8]) -> Result<KeyValue> {
    KeyValue::decode(bytes).map_err(|e| Error::internal(format!("corrupt key-value: {e}")))
}

impl MvccStore {
    /// Opens the store on `db`, rebuilding the key index and lease bindings by
    /// scanning the `kv` column family in revision order.
    ///
    /// `min_lease_ttl` is the smallest TTL a lease is granted, in seconds.
    ///
    /// # Errors
    /// [`Error::Internal`] on unreadable or corrupt data.
    pub fn open(db: Db, min_lease_ttl: i64) -> Result<Self> {
        Self::open_with(db, min_lease_ttl, CompactionPacing::default())
    }

    /// [`MvccStore::open`] with the given pace of deleting compacted
    /// history from disk.
    ///
    /// # Errors
    /// [`Error::Internal`] on unreadable or corrupt data.
    pub fn open_with(db: Db, min_lease_ttl: i64, pacing: CompactionPacing) -> Result<Self> {
        let (st, finished, job) = load_state(&db)?;
        let current = st.current;
        let compactor = Compactor::start(db.clone(), pacing, finished)?;
        if let Some(job) = job {
            compactor.schedule(job);
        }
        Ok(MvccStore { db, state: RwLock::new(st), current: AtomicI64::new(current), min_lease_ttl, compactor })
    }

    /// Rebuilds the in-memory state from disk, after the column families
    /// were replaced by a snapshot install.
    ///
    /// # Errors
    /// [`Error::Internal`] on unreadable or corrupt data.
    pub fn reload(&self) -> Result<()> {
        let (st, finished, job) = load_state(&self.db)?;
        let mut guard = self.state.write();
        self.current.store(st.current, Ordering::Release);
        *guard = st;
        self.compactor.restart(finished, job);
        Ok(())
    }

    /// The current (latest applied) revision.
    pub fn current_revision(&self) -> i64 {
        self.current.load(Ordering::Acquire)
    }

    /// The compacted revision: history below it is gone. -1 until the first
    /// compaction (etcd's compactMainRev), 0 after a `Compact(0)`.
    pub fn compact_revision(&self) -> i64 {
        self.state.read().compact
    }

    /// The raised alarms, as (member ID, etcd `AlarmType`).
    pub fn alarms(&self) -> super::alarm::Alarms {
        self.state.read().alarms.clone()
    }

    /// The underlying database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Leases known to the state machine: (ID, granted TTL in seconds).
    pub fn leases(&self) -> Vec<(i64, i64)> {
        self.state.read().leases.iter().map(|(id, l)| (*id, l.ttl)).collect()
    }

    /// Keys in the key index, live or deleted but not yet compacted away
    /// (etcd's `etcd_debugging_mvcc_keys_total`).
    pub fn index_len(&self) -> usize {
        self.state.read().index.len()
    }

    /// Name and client URLs each member last published, by member ID.
    pub fn member_attrs(&self) -> BTreeMap<u64, proto::etcdserverpb::Member> {
        let mut out = BTreeMap::new();
        let Ok(meta) = cf(&self.db, keys::CF_META) else { return out };
        let iter = self.db.iterator_cf(meta, IteratorMode::From(keys::MEMBER_ATTR_PREFIX, Direction::Forward));
        for item in iter {
            let Ok((k, v)) = item else { break };
            if !k.starts_with(keys::MEMBER_ATTR_PREFIX) {
                break;
            }
            if let Ok(m) = proto::etcdserverpb::Member::decode(v.as_ref()) {
                out.insert(m.id, m);
            }
        }
        out
    }

    /// One lease: granted TTL in seconds and the attached keys, or `None`.
    pub fn lease(&self, id: i64) -> Option<LeaseRecord> {
        self.state.read().leases.get(&id).cloned()
    }
}

/// Rebuilds the in-memory state by scanning `meta`, `lease` and `kv`.
/// Returns it with the finished compact revision and, if that is behind the
/// compact revision (a compaction was still deleting when the store stopped,
/// or when the leader took the snapshot just installed), the deletion to
/// resume.
fn load_state(db: &DB) -> Result<(State, i64, Option<Job>)> {
    // Never compacted is -1, as etcd's compactMainRev starts: `Compact(0)`
    // then succeeds once, and HashKV reports -1 until the first compaction.
    let mut st = State { compact: -1, ..State::default() };
    let meta = cf(db, keys::CF_META)?;
    if let Some(v) = db.get_cf(meta, keys::CompactRevision::KEY)? {
        st.compact = keys::decode_i64(&v)?;
    }
    if let Some(v) = db.get_cf(meta, keys::CurrentRevision::KEY)? {
        st.current = keys::decode_i64(&v)?;
    }
    if let Some(v) = db.get_cf(meta, keys::Alarms::KEY)? {
        st.alarms = super::alarm::decode_alarms(&v)?;
    }
    let lease_cf = cf(db, keys::CF_LEASE)?;
    for item in db.iterator_cf(lease_cf, IteratorMode::Start) {
        let (k, v) = item?;
        let id = keys::decode_i64(&k)?;
        st.leases.insert(id, LeaseRecord { ttl: keys::decode_i64(&v)?, keys: BTreeSet::new() });
    }
    // Latest lease binding per key, resolved after the scan.
    let mut bound: HashMap<Vec<u8>, i64> = HashMap::new();
    let kv = cf(db, keys::CF_KV)?;
    for item in db.iterator_cf(kv, IteratorMode::Start) {
        let (k, v) = item?;
        let (rev, tomb) = keys::decode_kv_key(&k)?;
        let kvp = decode_kv(&v)?;
        let ki = st.index.entry(kvp.key.clone()).or_default();
        if tomb {
            ki.tombstone(rev);
            bound.remove(&kvp.key);
        } else {
            ki.put(rev);
            if kvp.lease != 0 {
                bound.insert(kvp.key, kvp.lease);
            } else {
                bound.remove(&kvp.key);
            }
        }
        st.current = st.current.max(rev.main);
    }
    for (key, lease) in bound {
        if let Some(l) = st.leases.get_mut(&lease) {
            l.keys.insert(key);
        }
    }
    // A fresh etcd store is at revision 1; its first write takes 2.
    st.current = st.current.max(1);
    // Revisions a compaction dropped but had not yet deleted from disk came
    // back into the index with the scan: drop them again.
    let mut keep = BTreeSet::new();
    if st.compact > 0 {
        st.index.retain(|_, ki| !ki.compact(st.compact, &mut keep));
    }
    let finished = match db.get_cf(meta, keys::FinishedCompactRevision::KEY)? {
        Some(v) => keys::decode_i64(&v)?,
        None => {
            // Written by a version that deleted compacted history in the
            // apply batch: nothing is left to delete. Say so on disk, so
            // that a compaction this version starts is never taken for done.
            db.put_cf(meta, keys::FinishedCompactRevision::KEY, keys::i64_bytes(st.compact))?;
            st.compact
        }
    };
    let job = (finished < st.compact).then_some(Job { at: st.compact, keep });
    Ok((st, finished, job))
}

/// Shared handle to the store.
pub type SharedStore = Arc<MvccStore>;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::command::{Command, CommandResponse};
    use proto::etcdserverpb::{DeleteRangeRequest, LeaseGrantRequest, PutRequest, PutResponse, RangeRequest, RangeResponse};

    pub(in crate::mvcc) fn store() -> (tempfile::TempDir, MvccStore) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let db = crate::storage::open(dir.path()).unwrap_or_else(|e| panic!("open: {e}"));
        let s = MvccStore::open(db, 2).unwrap_or_else(|e| panic!("store: {e}"));
        (dir, s)
    }

    pub(in crate::mvcc) fn apply(s: &MvccStore, c: Command) -> CommandResponse {
        s.apply(&c, |_| Ok(())).unwrap_or_else(|e| panic!("apply: {e}")).0
    }

    pub(in crate::mvcc) fn put(s: &MvccStore, k: &str, v: &str) -> PutResponse {
        match apply(s, Command::Put(PutRequest { key: k.into(), value: v.into(), prev_kv: true, ..Default::default() })) {
            CommandResponse::Put(r) => r,
            other => panic!("{other:?}"),
        }
    }

    pub(in crate::mvcc) fn get(s: &MvccStore, k: &str, rev: i64) -> Result<RangeResponse> {
        s.range(&RangeRequest { key: k.into(), revision: rev, ..Default::default() })
    }

    #[test]
    fn state_is_rebuilt_on_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        {
            let db = crate::storage::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
            let s = MvccStore::open(db, 2).unwrap_or_else(|e| panic!("{e}"));
            apply(&s, Command::LeaseGrant(LeaseGrantRequest { ttl: 10, id: 1 }));
            put(&s, "a", "1");
            apply(&s, Command::Put(PutRequest { key: b"b".to_vec(), value: b"2".to_vec(), lease: 1, ..Default::default() }));
            apply(&s, Command::DeleteRange(DeleteRangeRequest { key: b"a".to_vec(), range_end: vec![], prev_kv: false }));
        }
        let db = crate::storage::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let s = MvccStore::open(db, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.current_revision(), 4);
        assert_eq!(get(&s, "a", 0).map(|r| r.count).ok(), Some(0));
        assert_eq!(get(&s, "a", 2).map(|r| r.count).ok(), Some(1));
        assert_eq!(s.lease(1).map(|l| l.keys.into_iter().collect::<Vec<_>>()), Some(vec![b"b".to_vec()]));
    }
}
