//! Compaction (etcd `mvcc/kvstore_compaction.go`): history below a
//! revision is dropped, in two steps, as etcd does.
//!
//! 1. In apply ([`Txn::compact`]), under the store's write lock, the
//!    key index forgets the compacted revisions and the compact revision is
//!    written in the same batch as the applied log id. From then on a read
//!    below it fails with `etcdserver: mvcc: required revision has been
//!    compacted`.
//! 2. Off the apply path, on the store's compaction thread
//!    ([`super::compaction_worker`]), the revisions the index forgot are
//!    deleted from the `kv` column family in batches of at most
//!    `CompactionPacing::batch_limit` scanned keys, with a pause between two
//!    batches (etcd's `--experimental-compaction-batch-limit`, 1000, and
//!    `--experimental-compaction-sleep-interval`, 10 ms), so that a long
//!    history never stalls applies or reads. The last batch also records
//!    the revision in the `meta` key `FinishedCompactRevision`.
//!
//! Until step 2 is done, the disk holds revisions nothing can read: a read
//! at or above the compact revision resolves keys through the index, which
//! names only revisions that compaction keeps, and a read below it is
//! refused. The hash ([`super::hash`]) and the watch history
//! ([`super::range`]) skip them, so neither depends on how far deletion has
//! got. After a restart or a snapshot install the store compacts its rebuilt
//! index again and resumes deletion if the finished revision is behind
//! ([`super::kvstore`]).
//!
//! Worked example: put(a)@2, put(a)@3, put(b)@4, delete(b)@5, put(a)@6,
//! then compact at 5. The index keeps a@3 (a's newest revision at or below
//! 5) and a@6, and forgets a@2 and all of b (its generation ended at 5).
//! Step 2 scans the `kv` keys of revisions 2 to 5 and deletes 2, 4 and 5.
//!
//! A newer compaction replaces one in progress. Its scan starts again from
//! the oldest revision, since a revision the older one kept may be garbage
//! now.

use std::collections::BTreeSet;

use proto::etcdserverpb::{CompactionRequest, CompactionResponse};

use super::compaction_worker::Job;
use super::kvstore::{header, MvccStore};
use super::txn::Txn;
use crate::error::{Error, Result};

impl Txn<'_> {
    /// etcd `Compact` in apply: checks the revision, compacts the key index
    /// and records the compact revision; the deletion from disk is queued
    /// for the compaction thread (see the module doc).
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
        self.st.compact = at;
        self.compaction = Some(Job { at, keep });
        Ok(CompactionResponse { header: header(self.begin) })
    }
}

impl MvccStore {
    /// The compact revision whose history is gone from disk too (etcd's
    /// finished compact revision); at most [`MvccStore::compact_revision`].
    pub fn finished_compact_revision(&self) -> i64 {
        *self.compactor.finished().borrow()
    }

    /// Waits until the history below `revision` is gone from disk (etcd's
    /// `physical` compaction), or the store is dropped.
    pub async fn wait_physically_compacted(&self, revision: i64) {
        let mut rx = self.compactor.finished();
        let _ = rx.wait_for(|f| *f >= revision).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;
    use std::time::{Duration, Instant};

    use proto::etcdserverpb::{DeleteRangeRequest, PutRequest, RangeRequest};

    use rocksdb::IteratorMode;

    use super::super::compaction_worker::CompactionPacing;
    use super::super::revision::Revision;
    use super::*;
    use crate::command::{Command, CommandResponse};
    use crate::storage::cf;
    use crate::storage::keys::{self, MetaKey};

    fn open(dir: &Path, batch_limit: usize, sleep_ms: u64) -> MvccStore {
        let db = crate::storage::open(dir).unwrap();
        MvccStore::open_with(db, 2, CompactionPacing { batch_limit, sleep: Duration::from_millis(sleep_ms) }).unwrap()
    }

    fn apply(s: &MvccStore, c: Command) {
        let (resp, _) = s.apply(&c, |_| Ok(())).unwrap();
        assert!(!matches!(resp, CommandResponse::Error(_)), "{resp:?}");
    }

    /// Writes a history over 40 keys: 600 puts and deletes, some keys
    /// deleted and written again, so that compaction drops whole
    /// generations, single revisions and tombstones.
    fn write_history(s: &MvccStore) {
        for i in 0..600u64 {
            let key = format!("k{:02}", (i * 7919) % 40).into_bytes();
            if i % 11 == 5 {
                apply(s, Command::DeleteRange(DeleteRangeRequest { key, range_end: vec![], prev_kv: false }));
            } else {
                apply(s, Command::Put(PutRequest { key, value: format!("v{i}").into_bytes(), ..Default::default() }));
            }
        }
    }

    /// Every `kv` entry on disk: (revision, key, is a tombstone).
    fn on_disk(s: &MvccStore) -> Vec<(Revision, Vec<u8>, bool)> {
        let kv = cf(&s.db, keys::CF_KV).unwrap();
        s.db.iterator_cf(kv, IteratorMode::Start)
            .map(|item| {
                let (k, v) = item.unwrap();
                let (rev, tomb) = keys::decode_kv_key(&k).unwrap();
                (rev, super::super::kvstore::decode_kv(&v).unwrap().key, tomb)
            })
            .collect()
    }

    /// What compacting `before` at `at` must leave: everything after `at`,
    /// and each key's newest revision at or below `at` unless that is a
    /// tombstone.
    fn expected_after(before: &[(Revision, Vec<u8>, bool)], at: i64) -> Vec<(Revision, Vec<u8>, bool)> {
        let mut newest: std::collections::BTreeMap<&[u8], &(Revision, Vec<u8>, bool)> = Default::default();
        for e in before.iter().filter(|e| e.0.main <= at) {
            newest.insert(&e.1, e);
        }
        let mut out: Vec<_> = newest.values().filter(|e| !e.2).map(|e| (*e).clone()).collect();
        out.extend(before.iter().filter(|e| e.0.main > at).cloned());
        out.sort();
        out
    }

    fn wait_finished(s: &MvccStore, at: i64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while s.finished_compact_revision() < at {
            assert!(Instant::now() < deadline, "compaction at {at} never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn all_at(s: &MvccStore, revision: i64) -> crate::error::Result<Vec<proto::mvccpb::KeyValue>> {
        s.range(&RangeRequest { key: vec![0], range_end: vec![0], revision, ..Default::default() }).map(|r| r.kvs)
    }

    /// A long history compacted in batches of 7 keys: while the thread is
    /// deleting, reads at and above the compact revision answer as before
    /// and reads below it are refused, the hash does not move, and at the
    /// end exactly the revisions compaction keeps are left on disk.
    #[test]
    fn a_long_history_is_deleted_in_batches_leaving_exactly_what_compaction_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path(), 7, 5);
        write_history(&s);
        let current = s.current_revision();
        let at = current - 150;
        let before = on_disk(&s);
        let reads: Vec<_> = (at..=current).step_by(7).map(|r| (r, all_at(&s, r).unwrap())).collect();

        apply(&s, Command::Compact(CompactionRequest { revision: at, physical: false }));
        // About 450 entries at or below `at`, 7 per 5 ms: still deleting.
        assert!(s.finished_compact_revision() < at);
        assert_eq!(s.compact_revision(), at);
        let hash_while_deleting = s.hash_kv(0).unwrap();
        for (r, kvs) in &reads {
            assert_eq!(&all_at(&s, *r).unwrap(), kvs, "read at {r} while deleting");
        }
        assert_eq!(all_at(&s, at - 1).err(), Some(Error::Compacted));
        assert_eq!(s.history(at - 1, current, 10).err(), Some(Error::Compacted));

        wait_finished(&s, at);
        assert_eq!(on_disk(&s), expected_after(&before, at));
        assert_eq!(s.hash_kv(0).unwrap(), hash_while_deleting);
        for (r, kvs) in &reads {
            assert_eq!(&all_at(&s, *r).unwrap(), kvs, "read at {r} after deleting");
        }
        let meta = cf(&s.db, keys::CF_META).unwrap();
        let finished = s.db.get_cf(meta, keys::FinishedCompactRevision::KEY).unwrap().map(|v| keys::decode_i64(&v).unwrap());
        assert_eq!(finished, Some(at));
    }

    /// A newer compaction replaces one in progress, and deletion stopped by
    /// a restart resumes when the store opens again.
    #[test]
    fn deletion_resumes_after_a_restart_and_yields_to_a_newer_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let (before, second) = {
            let s = open(dir.path(), 5, 200);
            write_history(&s);
            let before = on_disk(&s);
            let first = s.current_revision() - 300;
            apply(&s, Command::Compact(CompactionRequest { revision: first, physical: false }));
            let second = first + 100;
            apply(&s, Command::Compact(CompactionRequest { revision: second, physical: false }));
            assert!(s.finished_compact_revision() < first);
            (before, second)
            // Dropped here, a batch or two into the second compaction.
        };
        let s = open(dir.path(), 1000, 0);
        assert_eq!(s.compact_revision(), second);
        wait_finished(&s, second);
        assert_eq!(on_disk(&s), expected_after(&before, second));
        // The index was compacted again at start: the hash is that of a
        // store that never stopped.
        let dir2 = tempfile::tempdir().unwrap();
        let fresh = open(dir2.path(), 1000, 0);
        write_history(&fresh);
        apply(&fresh, Command::Compact(CompactionRequest { revision: second, physical: false }));
        assert_eq!(fresh.hash_kv(0).unwrap(), s.hash_kv(0).unwrap());
        assert_eq!(fresh.index_len(), s.index_len());
    }
}
