//! Compaction (etcd `mvcc/kvstore_compaction.go`): history below a
//! revision is dropped from the key index and from disk.

use std::collections::BTreeSet;

use proto::etcdserverpb::{CompactionRequest, CompactionResponse};
use rocksdb::IteratorMode;

use super::kvstore::header;
use super::txn::Txn;
use crate::error::{Error, Result};
use crate::storage::cf;
use crate::storage::keys;

impl Txn<'_> {
    pub(super) fn compact(&mut self, r: &CompactionRequest) -> Result<CompactionResponse> {
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
}
