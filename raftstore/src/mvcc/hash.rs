//! The history hash members compare (etcd `mvcc/hash.go`, Maintenance
//! `Hash` and `HashKV`).

use rocksdb::IteratorMode;

use super::kvstore::MvccStore;
use crate::error::{Error, Result};
use crate::storage::cf;
use crate::storage::keys;

impl MvccStore {
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
