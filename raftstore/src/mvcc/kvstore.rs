//! The MVCC key-value store (etcd `mvcc/kvstore.go`, `kvstore_txn.go` and the
//! v3 applier): ranges at a revision, puts, deletes, txns, compaction and
//! leases, on RocksDB.
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
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use prost::Message;
use proto::etcdserverpb::{
    compare_result, compare_target, sort_order, sort_target, CompactionRequest,
    CompactionResponse, Compare, DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest,
    LeaseGrantResponse, LeaseRevokeRequest, LeaseRevokeResponse, PutRequest, PutResponse,
    RangeRequest, RangeResponse, RequestOp, RequestOpRequest, ResponseHeader, ResponseOp,
    ResponseOpResponse, TargetUnion, TxnRequest, TxnResponse,
};
use proto::mvccpb::{event_type, Event, KeyValue};
use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch, DB};

use super::key_index::{KeyAt, KeyIndex};
use super::revision::Revision;
use crate::command::{Command, CommandResponse};
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
struct State {
    index: BTreeMap<Vec<u8>, KeyIndex>,
    current: i64,
    compact: i64,
    leases: BTreeMap<i64, LeaseRecord>,
}

/// The MVCC store over a RocksDB handle.
pub struct MvccStore {
    db: Db,
    state: RwLock<State>,
    /// Mirror of `state.current` for lock-free response headers.
    current: AtomicI64,
    /// Smallest lease TTL granted, in seconds (etcd's minLeaseTTL).
    min_lease_ttl: i64,
}

/// `true` if `key` falls in the range `[start, end)` as etcd interprets it:
/// an empty `end` means the single key `start`, `end == "\0"` means every key
/// `>= start`.
pub fn in_range(key: &[u8], start: &[u8], end: &[u8]) -> bool {
    if end.is_empty() {
        return key == start;
    }
    if end == [0] {
        return key >= start;
    }
    key >= start && key < end
}

fn kv_bounds<'a>(start: &'a [u8], end: &'a [u8]) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    if end.is_empty() {
        (Bound::Included(start), Bound::Included(start))
    } else if end == [0] {
        (Bound::Included(start), Bound::Unbounded)
    } else {
        (Bound::Included(start), Bound::Excluded(end))
    }
}

fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader { revision, ..Default::default() })
}

fn decode_kv(bytes: &[u8]) -> Result<KeyValue> {
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
        let st = load_state(&db)?;
        let current = st.current;
        Ok(MvccStore { db, state: RwLock::new(st), current: AtomicI64::new(current), min_lease_ttl })
    }

    /// Rebuilds the in-memory state from disk, after the column families
    /// were replaced by a snapshot install.
    ///
    /// # Errors
    /// [`Error::Internal`] on unreadable or corrupt data.
    pub fn reload(&self) -> Result<()> {
        let st = load_state(&self.db)?;
        let mut guard = self.state.write();
        self.current.store(st.current, Ordering::Release);
        *guard = st;
        Ok(())
    }


    /// The current (latest applied) revision.
    pub fn current_revision(&self) -> i64 {
        self.current.load(Ordering::Acquire)
    }

    /// The compacted revision: history below it is gone.
    pub fn compact_revision(&self) -> i64 {
        self.state.read().compact
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

    /// etcd `KV.Range` at `req.revision` (0 = current).
    ///
    /// # Errors
    /// [`Error::FutureRevision`] above the current revision,
    /// [`Error::Compacted`] below the compacted one.
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse> {
        let st = self.state.read();
        let snap = self.db.snapshot();
        let current = st.current;
        let rev = if req.revision <= 0 { current } else { req.revision };
        if rev > current {
            return Err(Error::FutureRevision);
        }
        if rev < st.compact {
            return Err(Error::Compacted);
        }
        let found = collect_range(&st.index, &req.key, &req.range_end, rev);
        drop(st);
        let count = found.len() as i64;
        let mut resp = RangeResponse { header: header(current), count, ..Default::default() };
        if req.count_only {
            return Ok(resp);
        }
        let fetch = fetch_count(req, found.len());
        let kv_cf = cf(&self.db, keys::CF_KV)?;
        let mut kvs = Vec::with_capacity(fetch);
        let keys_iter = found[..fetch].iter().map(|(_, at)| (kv_cf, keys::kv_key(at.modified, false)));
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snap);
        let values = self.db.multi_get_cf_opt(keys_iter, &ro);
        for ((_, _), v) in found[..fetch].iter().zip(values) {
            let bytes = v?.ok_or_else(|| Error::internal("indexed revision missing on disk"))?;
            kvs.push(decode_kv(&bytes)?);
        }
        finish_range(req, &mut kvs, &mut resp);
        resp.kvs = kvs;
        Ok(resp)
    }

    /// Applies one command: every change is written in one RocksDB batch
    /// together with `extra` (the state machine's applied log id), and the
    /// events are returned for the watch hub.
    ///
    /// Request errors decided at apply time (unknown lease, compacted
    /// revision, ...) become [`CommandResponse::Error`] and change nothing.
    ///
    /// # Errors
    /// [`Error::Internal`] if the write to disk fails; the store must then stop.
    pub fn apply(&self, cmd: &Command, extra: impl FnOnce(&mut WriteBatch) -> Result<()>) -> Result<(CommandResponse, Option<RevisionEvents>)> {
        let mut st = self.state.write();
        let mut tx = WriteTxn::new(&mut st, &self.db, self.min_lease_ttl)?;
        let resp = match tx.apply(cmd) {
            Ok(r) => r,
            Err(e @ Error::Internal(_)) => return Err(e),
            Err(e) => {
                tx.abort();
                CommandResponse::Error(e)
            }
        };
        let (mut batch, events) = tx.finish()?;
        extra(&mut batch)?;
        self.db.write(batch)?;
        self.current.store(st.current, Ordering::Release);
        Ok((resp, events))
    }

    /// Runs a txn that has no writes (etcd serves those without Raft). It
    /// sees the current revision.
    ///
    /// # Errors
    /// As for ranges: future or compacted revisions.
    pub fn read_txn(&self, r: &TxnRequest) -> Result<TxnResponse> {
        let mut st = self.state.write();
        let mut tx = WriteTxn::new(&mut st, &self.db, self.min_lease_ttl)?;
        tx.txn(r)
    }

    /// Reads the events with main revision in `[from, to]` whose key is in
    /// `[key, range_end)`, at most `max_revisions` revisions, oldest first,
    /// each with its previous key-value. Used by watchers catching up.
    ///
    /// # Errors
    /// [`Error::Compacted`] if `from` is below the compacted revision.
    pub fn history(&self, from: i64, to: i64, max_revisions: usize) -> Result<Vec<RevisionEvents>> {
        let snap = self.db.snapshot();
        {
            let st = self.state.read();
            if from < st.compact {
                return Err(Error::Compacted);
            }
        }
        let kv_cf = cf(&self.db, keys::CF_KV)?;
        let start = keys::kv_seek(from);
        let mut out: Vec<RevisionEvents> = Vec::new();
        let iter = snap.iterator_cf(kv_cf, IteratorMode::From(&start, Direction::Forward));
        for item in iter {
            let (k, v) = item?;
            let (rev, tomb) = keys::decode_kv_key(&k)?;
            if rev.main > to {
                break;
            }
            if out.last().map(|r| r.revision) != Some(rev.main) {
                if out.len() == max_revisions {
                    break;
                }
                out.push(RevisionEvents { revision: rev.main, events: Vec::new() });
            }
            let kv = decode_kv(&v)?;
            let ev = if tomb {
                Event { r#type: event_type::DELETE, kv: Some(KeyValue { key: kv.key, mod_revision: rev.main, ..Default::default() }), prev_kv: None }
            } else {
                Event { r#type: event_type::PUT, kv: Some(kv), prev_kv: None }
            };
            if let Some(last) = out.last_mut() {
                last.events.push(ev);
            }
        }
        // Resolve previous values: the key's state just before each event.
        let st = self.state.read();
        if from < st.compact {
            return Err(Error::Compacted);
        }
        let mut prev_revs: Vec<(usize, usize, Revision)> = Vec::new();
        for (ri, r) in out.iter().enumerate() {
            for (ei, e) in r.events.iter().enumerate() {
                let Some(kv) = &e.kv else { continue };
                if let Some(ki) = st.index.get(&kv.key) {
                    if let Some(at) = ki.get(r.revision - 1) {
                        prev_revs.push((ri, ei, at.modified));
                    }
                }
            }
        }
        drop(st);
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snap);
        let values = self.db.multi_get_cf_opt(prev_revs.iter().map(|(_, _, r)| (kv_cf, keys::kv_key(*r, false))), &ro);
        for ((ri, ei, _), v) in prev_revs.iter().zip(values) {
            if let Some(bytes) = v? {
                out[*ri].events[*ei].prev_kv = Some(decode_kv(&bytes)?);
            }
        }
        Ok(out)
    }

    /// A hash of the key-value history up to `revision` (0 = current), for
    /// comparing members (etcd `Maintenance.HashKV`). Returns (hash,
    /// hash_revision, compact_revision).
    ///
    /// # Errors
    /// [`Error::FutureRevision`] / [`Error::Compacted`] as for a range.
    pub fn hash_kv(&self, revision: i64) -> Result<(u32, i64, i64)> {
        use sha2::{Digest, Sha256};
        let (rev, compact) = {
            let st = self.state.read();
            let rev = if revision <= 0 { st.current } else { revision };
            if rev > st.current {
                return Err(Error::FutureRevision);
            }
            if rev < st.compact {
                return Err(Error::Compacted);
            }
            (rev, st.compact)
        };
        let snap = self.db.snapshot();
        let kv_cf = cf(&self.db, keys::CF_KV)?;
        let mut h = Sha256::new();
        for item in snap.iterator_cf(kv_cf, IteratorMode::Start) {
            let (k, v) = item?;
            let (r, _) = keys::decode_kv_key(&k)?;
            if r.main > rev {
                break;
            }
            h.update(&k);
            h.update(&v);
        }
        let d = h.finalize();
        Ok((u32::from_be_bytes([d[0], d[1], d[2], d[3]]), rev, compact))
    }
}


/// Rebuilds the in-memory state by scanning `meta`, `lease` and `kv`.
fn load_state(db: &DB) -> Result<State> {
    let mut st = State::default();
        let meta = cf(db, keys::CF_META)?;
        if let Some(v) = db.get_cf(meta, keys::CompactRevision::KEY)? {
            st.compact = keys::decode_i64(&v)?;
        }
        if let Some(v) = db.get_cf(meta, keys::CurrentRevision::KEY)? {
            st.current = keys::decode_i64(&v)?;
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
    Ok(st)
}

/// Keys live at `rev` in the range, ascending, with where to find them.
fn collect_range(index: &BTreeMap<Vec<u8>, KeyIndex>, key: &[u8], end: &[u8], rev: i64) -> Vec<(Vec<u8>, KeyAt)> {
    let mut out = Vec::new();
    if !end.is_empty() && end != [0] && key >= end {
        return out;
    }
    for (k, ki) in index.range::<[u8], _>(kv_bounds(key, end)) {
        if let Some(at) = ki.get(rev) {
            out.push((k.clone(), at));
        }
    }
    out
}

/// How many of the `found` keys a range must read: all of them when it
/// sorts or filters (those happen after the read), else one more than the
/// limit, to know whether there are `more` (etcd's v3 applier).
fn fetch_count(req: &RangeRequest, found: usize) -> usize {
    let needs_all = req.sort_order != sort_order::NONE
        || req.min_mod_revision != 0
        || req.max_mod_revision != 0
        || req.min_create_revision != 0
        || req.max_create_revision != 0;
    if needs_all || req.limit <= 0 {
        found
    } else {
        found.min(req.limit as usize + 1)
    }
}

/// Filters, sorts, truncates and strips a range result as etcd's v3 applier
/// does after reading from MVCC.
fn finish_range(req: &RangeRequest, kvs: &mut Vec<KeyValue>, resp: &mut RangeResponse) {
    kvs.retain(|kv| {
        (req.max_mod_revision == 0 || kv.mod_revision <= req.max_mod_revision)
            && (req.min_mod_revision == 0 || kv.mod_revision >= req.min_mod_revision)
            && (req.max_create_revision == 0 || kv.create_revision <= req.max_create_revision)
            && (req.min_create_revision == 0 || kv.create_revision >= req.min_create_revision)
    });
    let mut order = req.sort_order;
    if req.sort_target != sort_target::KEY && order == sort_order::NONE {
        order = sort_order::ASCEND;
    }
    let target = req.sort_target;
    if order != sort_order::NONE {
        let cmp = |a: &KeyValue, b: &KeyValue| match target {
            sort_target::VERSION => a.version.cmp(&b.version),
            sort_target::CREATE => a.create_revision.cmp(&b.create_revision),
            sort_target::MOD => a.mod_revision.cmp(&b.mod_revision),
            sort_target::VALUE => a.value.cmp(&b.value),
            _ => a.key.cmp(&b.key),
        };
        if order == sort_order::DESCEND {
            kvs.sort_by(|a, b| cmp(b, a));
        } else if !(order == sort_order::ASCEND && target == sort_target::KEY) {
            kvs.sort_by(cmp);
        }
    }
    if req.limit > 0 && kvs.len() > req.limit as usize {
        kvs.truncate(req.limit as usize);
        resp.more = true;
    }
    if req.keys_only {
        for kv in kvs.iter_mut() {
            kv.value.clear();
        }
    }
}

/// One write in progress: changes to the index are made in place (a txn is
/// fully validated before its first change), values go to `batch` and to
/// `pending` so that later reads in the same txn see them.
struct WriteTxn<'a> {
    st: &'a mut State,
    db: &'a DB,
    min_lease_ttl: i64,
    batch: WriteBatch,
    begin: i64,
    sub: i64,
    pending: HashMap<Revision, KeyValue>,
    events: Vec<Event>,
    compact_changed: bool,
}

impl<'a> WriteTxn<'a> {
    fn new(st: &'a mut State, db: &'a DB, min_lease_ttl: i64) -> Result<Self> {
        let begin = st.current;
        Ok(WriteTxn {
            st,
            db,
            min_lease_ttl,
            batch: WriteBatch::default(),
            begin,
            sub: 0,
            pending: HashMap::new(),
            events: Vec::new(),
            compact_changed: false,
        })
    }

    /// The revision reads in this txn see (etcd `storeTxnWrite.Range`).
    fn read_rev(&self) -> i64 {
        if self.sub > 0 {
            self.begin + 1
        } else {
            self.begin
        }
    }

    fn write_rev(&self) -> i64 {
        self.begin + 1
    }

    fn abort(&mut self) {
        self.batch = WriteBatch::default();
        self.events.clear();
        self.sub = 0;
    }

    fn finish(self) -> Result<(WriteBatch, Option<RevisionEvents>)> {
        let mut batch = self.batch;
        let meta = cf(self.db, keys::CF_META)?;
        let events = if self.sub > 0 {
            self.st.current = self.begin + 1;
            batch.put_cf(meta, keys::CurrentRevision::KEY, keys::i64_bytes(self.st.current));
            Some(RevisionEvents { revision: self.st.current, events: self.events })
        } else {
            None
        };
        if self.compact_changed {
            batch.put_cf(meta, keys::CompactRevision::KEY, keys::i64_bytes(self.st.compact));
        }
        Ok((batch, events))
    }

    fn get_kv(&self, rev: Revision) -> Result<KeyValue> {
        if let Some(kv) = self.pending.get(&rev) {
            return Ok(kv.clone());
        }
        let kv_cf = cf(self.db, keys::CF_KV)?;
        let bytes = self.db.get_cf(kv_cf, keys::kv_key(rev, false))?.ok_or_else(|| Error::internal("indexed revision missing on disk"))?;
        decode_kv(&bytes)
    }

    /// The live key-value of `key` at the txn's read revision.
    fn live(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let rev = self.read_rev();
        match self.st.index.get(key).and_then(|ki| ki.get(rev)) {
            Some(at) => Ok(Some(self.get_kv(at.modified)?)),
            None => Ok(None),
        }
    }

    fn apply(&mut self, cmd: &Command) -> Result<CommandResponse> {
        Ok(match cmd {
            Command::Put(r) => {
                self.check_put(r)?;
                CommandResponse::Put(self.put(r)?)
            }
            Command::DeleteRange(r) => CommandResponse::DeleteRange(self.delete_range(r)?),
            Command::Txn(r) => CommandResponse::Txn(self.txn(r)?),
            Command::Compact(r) => CommandResponse::Compact(self.compact(r)?),
            Command::LeaseGrant(r) => CommandResponse::LeaseGrant(self.lease_grant(r)?),
            Command::LeaseRevoke(r) => CommandResponse::LeaseRevoke(self.lease_revoke(r)?),
            Command::PublishMember(m) => {
                let meta = cf(self.db, keys::CF_META)?;
                self.batch.put_cf(meta, keys::member_attr_key(m.id), m.encode_to_vec());
                CommandResponse::Empty
            }
        })
    }

    /// Apply-time checks of a put (etcd `checkRequestPut`).
    fn check_put(&self, r: &PutRequest) -> Result<()> {
        if r.lease != 0 && !self.st.leases.contains_key(&r.lease) {
            return Err(Error::LeaseNotFound);
        }
        if (r.ignore_value || r.ignore_lease) && self.live(&r.key)?.is_none() {
            return Err(Error::KeyNotFound);
        }
        Ok(())
    }

    fn next_rev(&mut self) -> Revision {
        let r = Revision::new(self.write_rev(), self.sub);
        self.sub += 1;
        r
    }

    fn put(&mut self, r: &PutRequest) -> Result<PutResponse> {
        let prev = self.live(&r.key)?;
        let mut value = r.value.clone();
        let mut lease = r.lease;
        if let Some(p) = &prev {
            if r.ignore_value {
                value = p.value.clone();
            }
            if r.ignore_lease {
                lease = p.lease;
            }
        }
        let rev = self.next_rev();
        let (create, version) = match &prev {
            Some(p) => (p.create_revision, p.version + 1),
            None => (rev.main, 1),
        };
        let kv = KeyValue { key: r.key.clone(), create_revision: create, mod_revision: rev.main, version, value, lease };
        let kv_cf = cf(self.db, keys::CF_KV)?;
        self.batch.put_cf(kv_cf, keys::kv_key(rev, false), kv.encode_to_vec());
        self.st.index.entry(r.key.clone()).or_default().put(rev);
        let old_lease = prev.as_ref().map(|p| p.lease).unwrap_or(0);
        if old_lease != lease {
            if let Some(l) = self.st.leases.get_mut(&old_lease) {
                l.keys.remove(&r.key);
            }
        }
        if lease != 0 {
            if let Some(l) = self.st.leases.get_mut(&lease) {
                l.keys.insert(r.key.clone());
            }
        }
        self.pending.insert(rev, kv.clone());
        self.events.push(Event { r#type: event_type::PUT, kv: Some(kv), prev_kv: prev.clone() });
        Ok(PutResponse { header: header(rev.main), prev_kv: if r.prev_kv { prev } else { None } })
    }

    fn delete_range(&mut self, r: &DeleteRangeRequest) -> Result<DeleteRangeResponse> {
        let read = self.read_rev();
        let found = collect_range(&self.st.index, &r.key, &r.range_end, read);
        let mut prev_kvs = Vec::new();
        for (key, at) in &found {
            let prev = self.get_kv(at.modified)?;
            self.delete_key(key, prev.clone())?;
            if r.prev_kv {
                prev_kvs.push(prev);
            }
        }
        let rev = if found.is_empty() && self.sub == 0 { self.begin } else { self.write_rev() };
        Ok(DeleteRangeResponse { header: header(rev), deleted: found.len() as i64, prev_kvs })
    }

    fn delete_key(&mut self, key: &[u8], prev: KeyValue) -> Result<()> {
        let rev = self.next_rev();
        let kv_cf = cf(self.db, keys::CF_KV)?;
        let tomb = KeyValue { key: key.to_vec(), ..Default::default() };
        self.batch.put_cf(kv_cf, keys::kv_key(rev, true), tomb.encode_to_vec());
        if let Some(ki) = self.st.index.get_mut(key) {
            ki.tombstone(rev);
        }
        if prev.lease != 0 {
            if let Some(l) = self.st.leases.get_mut(&prev.lease) {
                l.keys.remove(key);
            }
        }
        self.events.push(Event {
            r#type: event_type::DELETE,
            kv: Some(KeyValue { key: key.to_vec(), mod_revision: rev.main, ..Default::default() }),
            prev_kv: Some(prev),
        });
        Ok(())
    }

    fn range(&self, r: &RangeRequest) -> Result<RangeResponse> {
        let cur = self.read_rev();
        let rev = if r.revision <= 0 { cur } else { r.revision };
        let found = collect_range(&self.st.index, &r.key, &r.range_end, rev);
        let mut resp = RangeResponse { header: header(cur), count: found.len() as i64, ..Default::default() };
        if r.count_only {
            return Ok(resp);
        }
        let fetch = fetch_count(r, found.len());
        let mut kvs = Vec::with_capacity(fetch);
        for (_, at) in &found[..fetch] {
            kvs.push(self.get_kv(at.modified)?);
        }
        finish_range(r, &mut kvs, &mut resp);
        resp.kvs = kvs;
        Ok(resp)
    }

    fn compare(&self, c: &Compare) -> Result<bool> {
        let rev = self.begin;
        let found = collect_range(&self.st.index, &c.key, &c.range_end, rev);
        if found.is_empty() {
            if c.target == compare_target::VALUE {
                return Ok(false);
            }
            return Ok(compare_kv(c, &KeyValue::default()));
        }
        for (_, at) in &found {
            let kv = self.get_kv(at.modified)?;
            if !compare_kv(c, &kv) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Evaluates every compare of the txn tree against the pre-txn state,
    /// as etcd's `compareToPath` does; returns the branch taken at each level
    /// in depth-first order.
    fn txn_path(&self, r: &TxnRequest, path: &mut Vec<bool>) -> Result<()> {
        let mut ok = true;
        for c in &r.compare {
            if !self.compare(c)? {
                ok = false;
                break;
            }
        }
        path.push(ok);
        let ops = if ok { &r.success } else { &r.failure };
        for op in ops {
            if let Some(RequestOpRequest::RequestTxn(t)) = &op.request {
                self.txn_path(t, path)?;
            }
        }
        Ok(())
    }

    /// Apply-time checks of the branches that will run (etcd `checkRequests`).
    fn check_ops(&self, r: &TxnRequest, path: &[bool], pos: &mut usize) -> Result<()> {
        let ok = path.get(*pos).copied().unwrap_or(false);
        *pos += 1;
        let ops = if ok { &r.success } else { &r.failure };
        for op in ops {
            match &op.request {
                Some(RequestOpRequest::RequestPut(p)) => self.check_put(p)?,
                Some(RequestOpRequest::RequestRange(rr)) => {
                    if rr.revision > 0 && rr.revision > self.begin {
                        return Err(Error::FutureRevision);
                    }
                    if rr.revision > 0 && rr.revision < self.st.compact {
                        return Err(Error::Compacted);
                    }
                }
                Some(RequestOpRequest::RequestTxn(t)) => self.check_ops(t, path, pos)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn txn(&mut self, r: &TxnRequest) -> Result<TxnResponse> {
        let mut path = Vec::new();
        self.txn_path(r, &mut path)?;
        self.check_ops(r, &path, &mut 0)?;
        let mut pos = 0;
        let mut resp = self.run_txn(r, &path, &mut pos)?;
        resp.header = header(if self.sub > 0 { self.write_rev() } else { self.begin });
        Ok(resp)
    }

    fn run_txn(&mut self, r: &TxnRequest, path: &[bool], pos: &mut usize) -> Result<TxnResponse> {
        let ok = path.get(*pos).copied().unwrap_or(false);
        *pos += 1;
        let ops = if ok { &r.success } else { &r.failure };
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            let resp = match &op.request {
                Some(RequestOpRequest::RequestRange(rr)) => ResponseOpResponse::ResponseRange(self.range(rr)?),
                Some(RequestOpRequest::RequestPut(p)) => ResponseOpResponse::ResponsePut(self.put(p)?),
                Some(RequestOpRequest::RequestDeleteRange(d)) => ResponseOpResponse::ResponseDeleteRange(self.delete_range(d)?),
                Some(RequestOpRequest::RequestTxn(t)) => {
                    // etcd leaves a nested txn's header revision at 0.
                    let mut inner = self.run_txn(t, path, pos)?;
                    inner.header = header(0);
                    ResponseOpResponse::ResponseTxn(inner)
                }
                None => continue,
            };
            responses.push(ResponseOp { response: Some(resp) });
        }
        Ok(TxnResponse { header: None, succeeded: ok, responses })
    }

    fn compact(&mut self, r: &CompactionRequest) -> Result<CompactionResponse> {
        let at = r.revision;
        if at <= self.st.compact {
            return Err(Error::Compacted);
        }
        if at > self.st.current {
            return Err(Error::FutureRevision);
        }
        let mut keep = BTreeSet::new();
        self.st.index.retain(|_, ki| !ki.compact(at, &mut keep));
        let kv_cf = cf(self.db, keys::CF_KV)?;
        let end = keys::kv_seek(at + 1);
        for item in self.db.iterator_cf(kv_cf, IteratorMode::Start) {
            let (k, _) = item?;
            if k.as_ref() >= end.as_slice() {
                break;
            }
            let (rev, _) = keys::decode_kv_key(&k)?;
            if !keep.contains(&rev) {
                self.batch.delete_cf(kv_cf, &k);
            }
        }
        self.st.compact = at;
        self.compact_changed = true;
        Ok(CompactionResponse { header: header(self.begin) })
    }

    fn lease_grant(&mut self, r: &LeaseGrantRequest) -> Result<LeaseGrantResponse> {
        if r.ttl > MAX_LEASE_TTL {
            return Err(Error::LeaseTtlTooLarge);
        }
        if self.st.leases.contains_key(&r.id) {
            return Err(Error::LeaseExist);
        }
        let ttl = r.ttl.max(self.min_lease_ttl);
        let lease_cf = cf(self.db, keys::CF_LEASE)?;
        self.batch.put_cf(lease_cf, keys::i64_bytes(r.id), keys::i64_bytes(ttl));
        self.st.leases.insert(r.id, LeaseRecord { ttl, keys: BTreeSet::new() });
        Ok(LeaseGrantResponse { header: header(self.begin), id: r.id, ttl, error: String::new() })
    }

    fn lease_revoke(&mut self, r: &LeaseRevokeRequest) -> Result<LeaseRevokeResponse> {
        let Some(lease) = self.st.leases.get(&r.id).cloned() else {
            return Err(Error::LeaseNotFound);
        };
        for key in &lease.keys {
            if let Some(prev) = self.live(key)? {
                self.delete_key(key, prev)?;
            }
        }
        let lease_cf = cf(self.db, keys::CF_LEASE)?;
        self.batch.delete_cf(lease_cf, keys::i64_bytes(r.id));
        self.st.leases.remove(&r.id);
        let rev = if self.sub > 0 { self.write_rev() } else { self.begin };
        Ok(LeaseRevokeResponse { header: header(rev) })
    }
}

/// etcd's `compareKV`: compares one key-value against a Compare.
fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    use std::cmp::Ordering as O;
    let ord = match (&c.target_union, c.target) {
        (Some(TargetUnion::Value(v)), compare_target::VALUE) => kv.value.as_slice().cmp(v.as_slice()),
        (Some(TargetUnion::Version(v)), compare_target::VERSION) => kv.version.cmp(v),
        (Some(TargetUnion::CreateRevision(v)), compare_target::CREATE) => kv.create_revision.cmp(v),
        (Some(TargetUnion::ModRevision(v)), compare_target::MOD) => kv.mod_revision.cmp(v),
        (Some(TargetUnion::Lease(v)), compare_target::LEASE) => kv.lease.cmp(v),
        // A target without a matching union value compares against zero, as
        // a missing proto field would in etcd.
        (_, compare_target::VALUE) => kv.value.as_slice().cmp(&[][..]),
        (_, compare_target::VERSION) => kv.version.cmp(&0),
        (_, compare_target::CREATE) => kv.create_revision.cmp(&0),
        (_, compare_target::MOD) => kv.mod_revision.cmp(&0),
        (_, compare_target::LEASE) => kv.lease.cmp(&0),
        _ => return false,
    };
    match c.result {
        compare_result::EQUAL => ord == O::Equal,
        compare_result::GREATER => ord == O::Greater,
        compare_result::LESS => ord == O::Less,
        compare_result::NOT_EQUAL => ord != O::Equal,
        _ => false,
    }
}

/// Shared handle to the store.
pub type SharedStore = Arc<MvccStore>;

/// Whether a request op list contains any write, recursively.
pub fn txn_is_read_only(r: &TxnRequest) -> bool {
    fn ops_ro(ops: &[RequestOp]) -> bool {
        ops.iter().all(|op| match &op.request {
            Some(RequestOpRequest::RequestRange(_)) | None => true,
            Some(RequestOpRequest::RequestTxn(t)) => txn_is_read_only(t),
            _ => false,
        })
    }
    ops_ro(&r.success) && ops_ro(&r.failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::etcdserverpb::{RequestOp, RequestOpRequest};

    fn store() -> (tempfile::TempDir, MvccStore) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let db = crate::storage::open(dir.path()).unwrap_or_else(|e| panic!("open: {e}"));
        let s = MvccStore::open(db, 2).unwrap_or_else(|e| panic!("store: {e}"));
        (dir, s)
    }

    fn apply(s: &MvccStore, c: Command) -> CommandResponse {
        s.apply(&c, |_| Ok(())).unwrap_or_else(|e| panic!("apply: {e}")).0
    }

    fn put(s: &MvccStore, k: &str, v: &str) -> PutResponse {
        match apply(s, Command::Put(PutRequest { key: k.into(), value: v.into(), prev_kv: true, ..Default::default() })) {
            CommandResponse::Put(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn get(s: &MvccStore, k: &str, rev: i64) -> Result<RangeResponse> {
        s.range(&RangeRequest { key: k.into(), revision: rev, ..Default::default() })
    }

    #[test]
    fn put_delete_versions_and_history() {
        let (_d, s) = store();
        assert_eq!(get(&s, "a", 0).map(|r| r.header.map(|h| h.revision)).ok().flatten(), Some(1), "a fresh store is at revision 1, as etcd");
        assert_eq!(put(&s, "a", "1").header.map(|h| h.revision), Some(2));
        let r = put(&s, "a", "2");
        assert_eq!(r.prev_kv.map(|kv| kv.value), Some(b"1".to_vec()));
        let kv = get(&s, "a", 0).map(|r| r.kvs[0].clone()).unwrap_or_default();
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
        assert_eq!(get(&s, "a", 2).map(|r| r.kvs[0].value.clone()).ok(), Some(b"1".to_vec()));
        let d = apply(&s, Command::DeleteRange(DeleteRangeRequest { key: b"a".to_vec(), range_end: vec![], prev_kv: true }));
        assert!(matches!(d, CommandResponse::DeleteRange(ref r) if r.deleted == 1 && r.header.as_ref().map(|h| h.revision) == Some(4)));
        assert_eq!(get(&s, "a", 0).map(|r| r.count).ok(), Some(0));
        // Deleting nothing takes no revision.
        let d = apply(&s, Command::DeleteRange(DeleteRangeRequest { key: b"zz".to_vec(), range_end: vec![], prev_kv: false }));
        assert!(matches!(d, CommandResponse::DeleteRange(ref r) if r.deleted == 0 && r.header.as_ref().map(|h| h.revision) == Some(4)));
        assert_eq!(put(&s, "a", "3").header.map(|h| h.revision), Some(5));
        let kv = get(&s, "a", 0).map(|r| r.kvs[0].clone()).unwrap_or_default();
        assert_eq!((kv.create_revision, kv.version), (5, 1));
        assert_eq!(get(&s, "a", 6).err(), Some(Error::FutureRevision));

        let h = s.history(1, 5, 100).unwrap_or_default();
        let types: Vec<(i64, i32)> = h.iter().flat_map(|r| r.events.iter().map(move |e| (r.revision, e.r#type))).collect();
        assert_eq!(types, vec![(2, event_type::PUT), (3, event_type::PUT), (4, event_type::DELETE), (5, event_type::PUT)]);
        assert_eq!(h[2].events[0].prev_kv.as_ref().map(|kv| kv.value.clone()), Some(b"2".to_vec()));
        assert_eq!(h[3].events[0].prev_kv, None);

        // Compaction: old revisions are gone, the latest stays readable.
        assert!(matches!(apply(&s, Command::Compact(CompactionRequest { revision: 4, physical: true })), CommandResponse::Compact(_)));
        assert_eq!(get(&s, "a", 3).err(), Some(Error::Compacted));
        assert_eq!(get(&s, "a", 4).map(|r| r.count).ok(), Some(0));
        assert_eq!(s.history(3, 5, 100).err(), Some(Error::Compacted));
        assert!(matches!(apply(&s, Command::Compact(CompactionRequest { revision: 4, physical: false })), CommandResponse::Error(Error::Compacted)));
    }

    #[test]
    fn txn_is_one_revision_and_reads_its_writes() {
        let (_d, s) = store();
        put(&s, "k", "v");
        let op_put = |k: &str| RequestOp { request: Some(RequestOpRequest::RequestPut(PutRequest { key: k.into(), value: b"x".to_vec(), ..Default::default() })) };
        let op_get = |k: &str| RequestOp { request: Some(RequestOpRequest::RequestRange(RangeRequest { key: k.into(), ..Default::default() })) };
        let cmp = Compare { result: compare_result::EQUAL, target: compare_target::MOD, key: b"k".to_vec(), target_union: Some(TargetUnion::ModRevision(2)), range_end: vec![] };
        let t = TxnRequest { compare: vec![cmp.clone()], success: vec![op_put("a"), op_put("b"), op_get("a")], failure: vec![op_get("k")] };
        let CommandResponse::Txn(r) = apply(&s, Command::Txn(t.clone())) else { panic!("not a txn") };
        assert!(r.succeeded);
        assert_eq!(r.header.map(|h| h.revision), Some(3));
        let Some(ResponseOpResponse::ResponseRange(rr)) = &r.responses[2].response else { panic!("no range") };
        assert_eq!(rr.kvs.len(), 1);
        assert_eq!(rr.kvs[0].mod_revision, 3);
        assert_eq!(s.current_revision(), 3);
        // Same txn again: k's mod revision is still 1, a/b are rewritten.
        let CommandResponse::Txn(r) = apply(&s, Command::Txn(t)) else { panic!("not a txn") };
        assert!(r.succeeded);
        assert_eq!(s.current_revision(), 4);
        // A failing compare with a read-only failure branch takes no revision.
        let t = TxnRequest { compare: vec![Compare { target_union: Some(TargetUnion::ModRevision(99)), ..cmp }], success: vec![op_put("a")], failure: vec![op_get("k")] };
        let CommandResponse::Txn(r) = apply(&s, Command::Txn(t)) else { panic!("not a txn") };
        assert!(!r.succeeded);
        assert_eq!(s.current_revision(), 4);
    }

    #[test]
    fn leases_attach_and_revoke_deletes_keys_in_one_revision() {
        let (_d, s) = store();
        assert!(matches!(apply(&s, Command::LeaseGrant(LeaseGrantRequest { ttl: 1, id: 7 })), CommandResponse::LeaseGrant(ref r) if r.ttl == 2));
        let p = |k: &str, lease| Command::Put(PutRequest { key: k.into(), value: b"v".to_vec(), lease, ..Default::default() });
        assert!(matches!(apply(&s, p("x", 8)), CommandResponse::Error(Error::LeaseNotFound)));
        apply(&s, p("x", 7));
        apply(&s, p("y", 7));
        assert_eq!(s.lease(7).map(|l| l.keys.len()), Some(2));
        let CommandResponse::LeaseRevoke(r) = apply(&s, Command::LeaseRevoke(LeaseRevokeRequest { id: 7 })) else { panic!() };
        assert_eq!(r.header.map(|h| h.revision), Some(4));
        assert_eq!(s.range(&RangeRequest { key: vec![0], range_end: vec![0], ..Default::default() }).map(|r| r.count).ok(), Some(0));
        assert!(matches!(apply(&s, Command::LeaseRevoke(LeaseRevokeRequest { id: 7 })), CommandResponse::Error(Error::LeaseNotFound)));
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

    #[test]
    fn range_limit_sort_and_count() {
        let (_d, s) = store();
        for (k, v) in [("a", "3"), ("b", "1"), ("c", "2")] {
            put(&s, k, v);
        }
        let all = RangeRequest { key: b"a".to_vec(), range_end: b"d".to_vec(), ..Default::default() };
        let r = s.range(&RangeRequest { limit: 2, ..all.clone() }).unwrap_or_default();
        assert_eq!((r.kvs.len(), r.count, r.more), (2, 3, true));
        let r = s.range(&RangeRequest { sort_order: sort_order::DESCEND, sort_target: sort_target::VALUE, limit: 1, ..all.clone() }).unwrap_or_default();
        assert_eq!(r.kvs[0].key, b"a".to_vec());
        let r = s.range(&RangeRequest { count_only: true, ..all.clone() }).unwrap_or_default();
        assert_eq!((r.kvs.len(), r.count), (0, 3));
        let r = s.range(&RangeRequest { min_mod_revision: 3, keys_only: true, ..all.clone() }).unwrap_or_default();
        assert_eq!(r.kvs.iter().map(|kv| kv.key.clone()).collect::<Vec<_>>(), vec![b"b".to_vec(), b"c".to_vec()]);
        assert!(r.kvs.iter().all(|kv| kv.value.is_empty()));
        let r = s.range(&RangeRequest { key: b"b".to_vec(), range_end: vec![0], ..Default::default() }).unwrap_or_default();
        assert_eq!(r.count, 2);
    }
}
