//! Reads at a revision (etcd `mvcc/kvstore_txn.go`'s range and the v3
//! applier's post-processing): [`MvccStore::range`], and
//! [`MvccStore::history`], which watchers catching up read from.

use std::collections::BTreeMap;
use std::ops::Bound;

use proto::etcdserverpb::{sort_order, sort_target, RangeRequest, RangeResponse};
use proto::mvccpb::{event_type, Event, KeyValue};
use rocksdb::{Direction, IteratorMode, ReadOptions};

use super::key_index::{KeyAt, KeyIndex};
use super::kvstore::{decode_kv, header, MvccStore, RevisionEvents};
use super::revision::Revision;
use crate::error::{Error, Result};
use crate::storage::cf;
use crate::storage::keys;

/// The end of the range of every key that starts with `prefix` (etcd's
/// `GetPrefixRangeEnd`): `prefix` with its last byte below 0xff raised by
/// one and what follows dropped; `\0` (every key) if all bytes are 0xff.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
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

impl MvccStore {
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

    /// Reads the events with main revision in `[from, to]` whose key is in
    /// `[key, range_end)`, at most `max_revisions` revisions, oldest first,
    /// each with its previous key-value. Used by watchers catching up.
    ///
    /// # Errors
    /// [`Error::Compacted`] if `from` is below the compacted revision.
    pub fn history(&self, from: i64, to: i64, max_revisions: usize) -> Result<Vec<RevisionEvents>> {
        let snap = self.db.snapshot();
        let compact = {
            let st = self.state.read();
            if from < st.compact {
                return Err(Error::Compacted);
            }
            st.compact
        };
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
            // A tombstone at the compact revision is compacted history that
            // the compaction thread may not have deleted yet.
            if tomb && rev.main <= compact {
                continue;
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
}

/// Whether `req` reads at most one value: a single-key get, or a count
/// (which reads none). Such a range is cheap enough to serve on an async
/// thread; any other may read many values from RocksDB.
pub fn is_point_read(req: &RangeRequest) -> bool {
    req.range_end.is_empty() || req.count_only
}

/// Keys live at `rev` in the range, ascending, with where to find them.
pub(super) fn collect_range(index: &BTreeMap<Vec<u8>, KeyIndex>, key: &[u8], end: &[u8], rev: i64) -> Vec<(Vec<u8>, KeyAt)> {
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
pub(super) fn fetch_count(req: &RangeRequest, found: usize) -> usize {
    let needs_all = req.sort_order != sort_order::NONE || req.min_mod_revision != 0 || req.max_mod_revision != 0 || req.min_create_revision != 0 || req.max_create_revision != 0;
    if needs_all || req.limit <= 0 {
        found
    } else {
        found.min(req.limit as usize + 1)
    }
}

/// Filters, sorts, truncates and strips a range result as etcd's v3 applier
/// does after reading from MVCC.
pub(super) fn finish_range(req: &RangeRequest, kvs: &mut Vec<KeyValue>, resp: &mut RangeResponse) {
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

#[cfg(test)]
mod tests {
    use super::super::kvstore::tests::{put, store};
    use super::*;

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
