//! The history hash members compare (etcd `mvcc/hash.go`, Maintenance
//! `Hash` and `HashKV`).

use std::collections::{BTreeMap, BTreeSet};

use rocksdb::{IteratorMode, ReadOptions};

use super::key_index::KeyIndex;
use super::kvstore::MvccStore;
use super::revision::Revision;
use crate::error::{Error, Result};
use crate::storage::cf;
use crate::storage::keys;

impl MvccStore {
    /// A hash of the key-value history up to `revision` (0 = current), for
    /// comparing members (etcd `Maintenance.HashKV`). Returns (hash,
    /// hash_revision, compact_revision).
    ///
    /// It reads the `kv` column family from the oldest revision up to
    /// `revision` only, and skips revisions that a compaction has dropped
    /// but not yet deleted from disk (see [`super::compaction`]), as etcd
    /// does, so the hash does not depend on how far deletion has got. It can
    /// read the whole history: call it on a blocking thread.
    ///
    /// # Errors
    /// [`Error::FutureRevision`] / [`Error::Compacted`] as for a range.
    pub fn hash_kv(&self, revision: i64) -> Result<(u32, i64, i64)> {
        use sha2::{Digest, Sha256};
        let (rev, compact, keep, snap) = {
            let st = self.state.read();
            let rev = if revision <= 0 { st.current } else { revision };
            if rev > st.current {
                return Err(Error::FutureRevision);
            }
            if rev < st.compact {
                return Err(Error::Compacted);
            }
            (rev, st.compact, kept_revisions(&st.index, st.compact), self.db.snapshot())
        };
        let kv_cf = cf(&self.db, keys::CF_KV)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::kv_seek(rev + 1).to_vec());
        let mut h = Sha256::new();
        for item in snap.iterator_cf_opt(kv_cf, ro, IteratorMode::Start) {
            let (k, v) = item?;
            let (r, _) = keys::decode_kv_key(&k)?;
            if r.main <= compact && !keep.contains(&r) {
                continue;
            }
            h.update(&k);
            h.update(&v);
        }
        let d = h.finalize();
        Ok((u32::from_be_bytes([d[0], d[1], d[2], d[3]]), rev, compact))
    }
}

/// The revisions at or below `compact` that the key index still names: what
/// compaction kept on disk (etcd's `index.Keep`).
fn kept_revisions(index: &BTreeMap<Vec<u8>, KeyIndex>, compact: i64) -> BTreeSet<Revision> {
    let mut keep = BTreeSet::new();
    if compact <= 0 {
        return keep;
    }
    for ki in index.values() {
        let revs = ki.generations.iter().flat_map(|g| g.revs.iter());
        keep.extend(revs.take_while(|r| r.main <= compact));
    }
    keep
}
