//! Applying writes (etcd `mvcc/kvstore_txn.go` and the v3 applier): puts,
//! deletes, txns and leases in one [`Txn`] per command, and read-only
//! txns.

use std::collections::{BTreeSet, HashMap};
use std::ops::Deref;
use std::sync::atomic::Ordering;

use prost::Message;
use proto::etcdserverpb::{
    compare_result, compare_target, Compare, DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest, LeaseRevokeResponse, PutRequest, PutResponse,
    RangeRequest, RangeResponse, RequestOp, RequestOpRequest, ResponseOp, ResponseOpResponse, TargetUnion, TxnRequest, TxnResponse,
};
use proto::mvccpb::{event_type, Event, KeyValue};
use rocksdb::{WriteBatch, DB};

use super::compaction_worker::Job;
use super::kvstore::{decode_kv, header, LeaseRecord, MvccStore, RevisionEvents, State, MAX_LEASE_TTL};
use super::range::{collect_range, fetch_count, finish_range, is_point_read};
use super::revision::Revision;
use crate::command::{Command, CommandResponse};
use crate::error::{Error, Result};
use crate::storage::cf;
use crate::storage::keys::{self, MetaKey};

impl MvccStore {
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
        let mut tx = Txn::new(&mut *st, &self.db, self.min_lease_ttl)?;
        let resp = match tx.apply(cmd) {
            Ok(r) => r,
            Err(e @ Error::Internal(_)) => return Err(e),
            Err(e) => {
                tx.abort();
                CommandResponse::Error(e)
            }
        };
        let (mut batch, events, compaction) = tx.finish()?;
        extra(&mut batch)?;
        self.db.write(batch)?;
        self.current.store(st.current, Ordering::Release);
        if let Some(job) = compaction {
            self.compactor.schedule(job);
        }
        Ok((resp, events))
    }

    /// Runs a txn that has no writes (etcd serves those without Raft). It
    /// sees the current revision.
    ///
    /// It takes the read lock, as a range does, so it runs beside other
    /// reads and no apply changes the index or the disk under it. It reads
    /// values without a RocksDB snapshot: while the lock is held only
    /// compaction's deletions change the `kv` column family, and they never
    /// touch a revision visible at or above the compact revision. It may
    /// read many values (see [`txn_reads_are_point`]).
    ///
    /// # Errors
    /// As for ranges: future or compacted revisions.
    pub fn read_txn(&self, r: &TxnRequest) -> Result<TxnResponse> {
        let st = self.state.read();
        let mut tx = Txn::new(&*st, &self.db, self.min_lease_ttl)?;
        tx.txn(r)
    }
}

/// One txn in progress over the state `S`: `&mut State` when it applies a
/// command (the default), `&State` when it runs a read-only txn.
///
/// A write changes the index in place (a txn is fully validated before its
/// first change); values go to `batch` and to `pending` so that later reads
/// in the same txn see them.
pub(super) struct Txn<'a, S: Deref<Target = State> = &'a mut State> {
    pub(super) st: S,
    pub(super) db: &'a DB,
    pub(super) min_lease_ttl: i64,
    pub(super) batch: WriteBatch,
    pub(super) begin: i64,
    pub(super) sub: i64,
    pub(super) pending: HashMap<Revision, KeyValue>,
    pub(super) events: Vec<Event>,
    /// The deletion a Compact command leaves for the compaction thread.
    pub(super) compaction: Option<Job>,
}

/// The write operations of a txn branch. A read-only txn has none to run:
/// the KV service sends only txns without writes to
/// [`MvccStore::read_txn`].
pub(super) trait TxnWrites {
    fn put_op(&mut self, r: &PutRequest) -> Result<PutResponse>;
    fn delete_op(&mut self, r: &DeleteRangeRequest) -> Result<DeleteRangeResponse>;
}

impl TxnWrites for Txn<'_> {
    fn put_op(&mut self, r: &PutRequest) -> Result<PutResponse> {
        self.put(r)
    }

    fn delete_op(&mut self, r: &DeleteRangeRequest) -> Result<DeleteRangeResponse> {
        self.delete_range(r)
    }
}

impl<'a> TxnWrites for Txn<'a, &'a State> {
    fn put_op(&mut self, _: &PutRequest) -> Result<PutResponse> {
        Err(Error::internal("a put in a read-only txn"))
    }

    fn delete_op(&mut self, _: &DeleteRangeRequest) -> Result<DeleteRangeResponse> {
        Err(Error::internal("a delete in a read-only txn"))
    }
}

impl<'a, S: Deref<Target = State>> Txn<'a, S> {
    fn new(st: S, db: &'a DB, min_lease_ttl: i64) -> Result<Self> {
        let begin = st.current;
        Ok(Txn { st, db, min_lease_ttl, batch: WriteBatch::default(), begin, sub: 0, pending: HashMap::new(), events: Vec::new(), compaction: None })
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
}

impl<'a, S: Deref<Target = State>> Txn<'a, S>
where
    Self: TxnWrites,
{
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
                Some(RequestOpRequest::RequestPut(p)) => ResponseOpResponse::ResponsePut(self.put_op(p)?),
                Some(RequestOpRequest::RequestDeleteRange(d)) => ResponseOpResponse::ResponseDeleteRange(self.delete_op(d)?),
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
}

impl Txn<'_> {
    fn abort(&mut self) {
        self.batch = WriteBatch::default();
        self.events.clear();
        self.sub = 0;
    }

    fn finish(self) -> Result<(WriteBatch, Option<RevisionEvents>, Option<Job>)> {
        let mut batch = self.batch;
        let meta = cf(self.db, keys::CF_META)?;
        let events = if self.sub > 0 {
            self.st.current = self.begin + 1;
            batch.put_cf(meta, keys::CurrentRevision::KEY, keys::i64_bytes(self.st.current));
            Some(RevisionEvents { revision: self.st.current, events: self.events })
        } else {
            None
        };
        if self.compaction.is_some() {
            batch.put_cf(meta, keys::CompactRevision::KEY, keys::i64_bytes(self.st.compact));
        }
        Ok((batch, events, self.compaction))
    }

    fn apply(&mut self, cmd: &Command) -> Result<CommandResponse> {
        Ok(match cmd {
            Command::Put(r) => {
                self.check_space()?;
                self.check_put(r)?;
                CommandResponse::Put(self.put(r)?)
            }
            Command::DeleteRange(r) => CommandResponse::DeleteRange(self.delete_range(r)?),
            Command::Txn(r) => {
                // etcd's capped applier refuses a txn that would add data.
                if super::alarm::cost(cmd) > 0 {
                    self.check_space()?;
                }
                CommandResponse::Txn(self.txn(r)?)
            }
            Command::Compact(r) => CommandResponse::Compact(self.compact(r)?),
            Command::Alarm(r) => CommandResponse::Alarm(self.alarm(r)?),
            Command::LeaseGrant(r) => {
                self.check_space()?;
                CommandResponse::LeaseGrant(self.lease_grant(r)?)
            }
            Command::LeaseRevoke(r) => CommandResponse::LeaseRevoke(self.lease_revoke(r)?),
            Command::PublishMember(m) => {
                let meta = cf(self.db, keys::CF_META)?;
                self.batch.put_cf(meta, keys::member_attr_key(m.id), m.encode_to_vec());
                CommandResponse::Empty
            }
            // The state machine checks the identity and unwraps it first.
            Command::Authed(_, inner) => self.apply(inner)?,
            Command::Auth(_) => return Err(Error::internal("an auth command reached the MVCC store")),
        })
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
        self.events.push(Event { r#type: event_type::DELETE, kv: Some(KeyValue { key: key.to_vec(), mod_revision: rev.main, ..Default::default() }), prev_kv: Some(prev) });
        Ok(())
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

/// Whether every compare and range of a txn, nested txns included, touches
/// one key (see [`is_point_read`]), so that it reads few values.
pub fn txn_reads_are_point(r: &TxnRequest) -> bool {
    r.compare.iter().all(|c| c.range_end.is_empty())
        && r.success.iter().chain(&r.failure).all(|op| match &op.request {
            Some(RequestOpRequest::RequestRange(rr)) => is_point_read(rr),
            Some(RequestOpRequest::RequestTxn(t)) => txn_reads_are_point(t),
            _ => true,
        })
}

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
    use super::super::kvstore::tests::{apply, get, put, store};
    use super::*;
    use proto::etcdserverpb::CompactionRequest;

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

    /// A read-only txn takes the read lock, as a range does: it runs while
    /// another reader holds the lock (with the write lock it would wait).
    #[test]
    fn a_read_only_txn_runs_beside_another_reader() {
        let (_d, s) = store();
        put(&s, "k", "v");
        let s = std::sync::Arc::new(s);
        let reader = s.state.read();
        let (tx, rx) = std::sync::mpsc::channel();
        let s2 = s.clone();
        std::thread::spawn(move || {
            let get = RequestOp { request: Some(RequestOpRequest::RequestRange(RangeRequest { key: b"k".to_vec(), ..Default::default() })) };
            let _ = tx.send(s2.read_txn(&TxnRequest { compare: vec![], success: vec![get], failure: vec![] }));
        });
        let r = rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap_or_else(|_| panic!("the read-only txn waited for the other reader"));
        drop(reader);
        let Ok(r) = r else { panic!("{r:?}") };
        let Some(ResponseOpResponse::ResponseRange(rr)) = &r.responses[0].response else { panic!("no range") };
        assert_eq!(rr.kvs[0].value, b"v".to_vec());
        assert_eq!(r.header.map(|h| h.revision), Some(2));
    }

    #[test]
    fn point_reads_are_told_apart_from_ranges() {
        let range = |end: &str, count_only| RangeRequest { key: b"a".to_vec(), range_end: end.into(), count_only, ..Default::default() };
        assert!(is_point_read(&range("", false)));
        assert!(is_point_read(&range("z", true)));
        assert!(!is_point_read(&range("z", false)));
        let op = |r: RangeRequest| RequestOp { request: Some(RequestOpRequest::RequestRange(r)) };
        let cmp = |end: &str| Compare { key: b"a".to_vec(), range_end: end.into(), ..Default::default() };
        let txn = |c: Vec<Compare>, ops: Vec<RequestOp>| TxnRequest { compare: c, success: ops, failure: vec![] };
        assert!(txn_reads_are_point(&txn(vec![cmp("")], vec![op(range("", false))])));
        assert!(!txn_reads_are_point(&txn(vec![cmp("z")], vec![op(range("", false))])));
        let nested = RequestOp { request: Some(RequestOpRequest::RequestTxn(txn(vec![], vec![op(range("z", false))]))) };
        assert!(!txn_reads_are_point(&txn(vec![], vec![nested])));
    }

    /// The log and the state machine recurse once per txn level (decode,
    /// compares, checks, apply, encoding the response, formatting, clone,
    /// drop): a txn as deep as `MAX_TXN_DEPTH` must fit, with room to
    /// spare, on the 2 MiB stack of the Raft thread and of tokio's threads.
    #[test]
    fn a_txn_as_deep_as_allowed_fits_a_quarter_of_a_threads_stack() {
        use crate::command::tests::{nest, nest_response};
        use crate::command::MAX_TXN_DEPTH;
        let (_d, s) = store();
        let s = &s;
        let run = move || -> Result<()> {
            let write = Command::Txn(nest(MAX_TXN_DEPTH, RequestOpRequest::RequestPut(PutRequest { key: b"k".to_vec(), value: b"v".to_vec(), ..Default::default() })));
            let (resp, _) = s.apply(&Command::decode(&write.encode())?, |_| Ok(()))?;
            let CommandResponse::Txn(mut resp) = CommandResponse::decode(&resp.encode())? else { return Err(Error::internal(format!("{resp:?}"))) };
            resp.header = None;
            let put = PutResponse { header: header(2), prev_kv: None };
            let mut want = nest_response(MAX_TXN_DEPTH, ResponseOpResponse::ResponsePut(put));
            // etcd gives a nested txn's response a header at revision 0.
            let mut level = &mut want;
            while let Some(ResponseOpResponse::ResponseTxn(inner)) = level.responses.get_mut(0).and_then(|op| op.response.as_mut()) {
                inner.header = header(0);
                level = inner;
            }
            assert_eq!(resp, want);
            let read = nest(MAX_TXN_DEPTH, RequestOpRequest::RequestRange(RangeRequest { key: b"k".to_vec(), ..Default::default() }));
            assert!(txn_is_read_only(&read) && txn_reads_are_point(&read));
            let resp = s.read_txn(&read)?;
            assert_eq!(resp.encode_to_vec().len(), resp.encoded_len());
            assert!(format!("{write:?}").len() > MAX_TXN_DEPTH);
            drop(write.clone());
            Ok(())
        };
        let done = std::thread::scope(|scope| std::thread::Builder::new().stack_size(512 * 1024).spawn_scoped(scope, run).map(|t| t.join()));
        assert!(matches!(done, Ok(Ok(Ok(())))), "{done:?}");
        assert_eq!(get(s, "k", 0).map(|r| r.kvs[0].value.clone()).ok(), Some(b"v".to_vec()));
    }
}
