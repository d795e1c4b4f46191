//! Snapshots of a running etcd taken through its client API
//! (`raftstore snapshot save FILE --endpoints URL`), for users who move an
//! API server from a real etcd to raftstore.
//!
//! `raftstore snapshot restore` also reads etcd's own snapshot files
//! (`etcdctl snapshot save`, [`crate::etcd_db`]), which keep the history
//! since the last compaction; this is the way in without etcdctl. It reads
//! every key of a live server at one revision (a paginated
//! `Range` over the whole key space), with each key's `create_revision`,
//! `mod_revision`, `version` and lease, plus every lease's granted TTL, and
//! writes them as a raftstore snapshot file that `raftstore snapshot restore`
//! turns into a data dir. Works against etcd and raftstore alike.
//!
//! What carries over: every live key with its revisions, so a Kubernetes
//! object keeps its `resourceVersion`; the store's revision, so new writes
//! continue after it; leases and the keys bound to them. What does not: the
//! history before that revision. The restored store is compacted at it, as
//! etcd would be after `etcdctl compact`, so a watch from an older revision
//! gets `compacted` and clients list again.

use std::path::Path;

use prost::Message;
use proto::mvccpb::KeyValue;

use crate::error::{Error, Result};
use crate::mvcc::revision::Revision;
use crate::storage::keys::{self, MetaKey};

/// Keys read per `Range` page.
const PAGE: i64 = 1000;

/// What a snapshot of a live server holds.
#[derive(Debug, Clone, Default)]
pub struct Export {
    /// The revision every key was read at; the restored store's revision.
    pub revision: i64,
    /// Every live key at `revision`, in key order.
    pub kvs: Vec<KeyValue>,
    /// Every lease: (ID, granted TTL in seconds).
    pub leases: Vec<(i64, i64)>,
}

/// Reads every key and lease of the server `client` is connected to, at one
/// revision (the server's current one when the read starts).
///
/// # Errors
/// The client's error when a request fails (the revision read at may be
/// compacted meanwhile; run it again then).
pub async fn export(client: &mut etcd_client::Client) -> anyhow::Result<Export> {
    use anyhow::Context as _;
    use etcd_client::GetOptions;
    let unavailable = |e: etcd_client::Error| anyhow::anyhow!(e);
    let mut out = Export::default();
    // The whole key space: from the empty key to the end ("\0" as the range
    // end means "every key from the start key on", as in etcd).
    let mut from: Vec<u8> = vec![0];
    loop {
        let mut opts = GetOptions::new().with_from_key().with_limit(PAGE);
        if out.revision > 0 {
            opts = opts.with_revision(out.revision);
        }
        let resp = client.get(from.clone(), Some(opts)).await.map_err(unavailable).context("range")?;
        if out.revision == 0 {
            out.revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        }
        let page = resp.kvs();
        let Some(last) = page.last() else { break };
        // The next page starts just after the last key of this one.
        from = last.key().to_vec();
        from.push(0);
        out.kvs.extend(page.iter().map(|kv| KeyValue {
            key: kv.key().to_vec(),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            version: kv.version(),
            value: kv.value().to_vec(),
            lease: kv.lease(),
        }));
        if !resp.more() {
            break;
        }
    }
    for lease in client.leases().await.map_err(unavailable).context("list leases")?.leases() {
        let ttl = client.lease_time_to_live(lease.id(), None).await.map_err(unavailable).with_context(|| format!("lease {:x}", lease.id()))?;
        // A lease that expired since it was listed is gone; its keys went
        // with it after the revision read at, which the snapshot predates.
        if ttl.ttl() > 0 || ttl.granted_ttl() > 0 {
            out.leases.push((lease.id(), ttl.granted_ttl()));
        }
    }
    Ok(out)
}

/// Writes `export` as a raftstore snapshot file at `file` (replaced if it
/// exists), through a temporary RocksDB beside it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a key whose `mod_revision` is after the
/// export's revision or not positive; I/O errors otherwise.
pub fn write_snapshot(export: &Export, file: &Path) -> Result<()> {
    let dir = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "snapshot".into());
    let work = dir.join(format!(".{name}.import-{}", std::process::id()));
    let part = dir.join(format!(".{name}.part-{}", std::process::id()));
    let result = (|| -> Result<()> {
        let _ = std::fs::remove_dir_all(&work);
        let db = crate::storage::open(&work.join("db"))?;
        fill(&db, export)?;
        db.flush_wal(true)?;
        let cp = work.join("checkpoint");
        crate::raft::state_machine::checkpoint(&db, &cp).map_err(Error::internal)?;
        drop(db);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&part).map_err(Error::internal)?);
        crate::snapshot::write_archive(&cp, &mut out)?;
        let f = out.into_inner().map_err(|e| Error::internal(e.to_string()))?;
        f.sync_all().map_err(Error::internal)?;
        std::fs::rename(&part, file).map_err(Error::internal)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_file(&part);
    result
}

/// Writes the state-machine column families of `export` into `db`: each key
/// at its `mod_revision` (keys sharing one get consecutive sub-revisions, in
/// key order), the leases, and the revision and compaction marks.
fn fill(db: &rocksdb::DB, export: &Export) -> Result<()> {
    let (kv, meta, lease) = (crate::storage::cf(db, keys::CF_KV)?, crate::storage::cf(db, keys::CF_META)?, crate::storage::cf(db, keys::CF_LEASE)?);
    let mut kvs: Vec<&KeyValue> = export.kvs.iter().collect();
    kvs.sort_by(|a, b| (a.mod_revision, &a.key).cmp(&(b.mod_revision, &b.key)));
    let mut batch = rocksdb::WriteBatch::default();
    let mut prev_main = 0;
    let mut sub = 0;
    for k in kvs {
        if k.mod_revision <= 0 || k.mod_revision > export.revision {
            return Err(Error::InvalidArgument(format!("key {:?} has mod_revision {}, outside 1..={}", String::from_utf8_lossy(&k.key), k.mod_revision, export.revision)));
        }
        sub = if k.mod_revision == prev_main { sub + 1 } else { 0 };
        prev_main = k.mod_revision;
        batch.put_cf(kv, keys::kv_key(Revision::new(k.mod_revision, sub), false), k.encode_to_vec());
        if batch.len() >= 10_000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    for (id, ttl) in &export.leases {
        batch.put_cf(lease, keys::i64_bytes(*id), keys::i64_bytes(*ttl));
    }
    let rev = keys::i64_bytes(export.revision);
    batch.put_cf(meta, keys::CurrentRevision::KEY, rev);
    // The history before the revision is not carried over: the store is
    // compacted at it, so older revisions are refused, not served empty.
    batch.put_cf(meta, keys::CompactRevision::KEY, rev);
    batch.put_cf(meta, keys::FinishedCompactRevision::KEY, rev);
    db.write(batch)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, create: i64, modified: i64, version: i64, lease: i64) -> KeyValue {
        KeyValue { key: key.as_bytes().to_vec(), create_revision: create, mod_revision: modified, version, value: format!("v-{key}").into_bytes(), lease }
    }

    /// A written snapshot restores into a store with the same keys,
    /// revisions, versions and leases, at the export's revision, compacted
    /// there.
    #[test]
    fn a_written_export_restores_with_its_revisions() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let export = Export { revision: 40, kvs: vec![kv("/a", 3, 9, 2, 0), kv("/b", 12, 12, 1, 7), kv("/c", 12, 12, 1, 0), kv("/d", 5, 33, 4, 0)], leases: vec![(7, 60)] };
        let file = tmp.path().join("export.snap");
        write_snapshot(&export, &file).unwrap_or_else(|e| panic!("write: {e}"));
        let data = tmp.path().join("restored");
        crate::snapshot::restore(&file, &data).unwrap_or_else(|e| panic!("restore: {e}"));
        let db = crate::storage::open(&data.join("db")).unwrap_or_else(|e| panic!("open: {e}"));
        let store = crate::mvcc::MvccStore::open(db, 1).unwrap_or_else(|e| panic!("store: {e}"));
        assert_eq!(store.current_revision(), 40);
        assert_eq!(store.compact_revision(), 40);
        let all = store.range(&proto::etcdserverpb::RangeRequest { key: vec![0], range_end: vec![0], ..Default::default() }).unwrap_or_else(|e| panic!("range: {e}"));
        assert_eq!(all.kvs, export.kvs);
        assert_eq!(store.leases(), vec![(7, 60)]);
        assert_eq!(store.lease(7).map(|l| l.keys.into_iter().collect::<Vec<_>>()), Some(vec![b"/b".to_vec()]));
        // An older revision is compacted, not served.
        let old = store.range(&proto::etcdserverpb::RangeRequest { key: b"/a".to_vec(), revision: 10, ..Default::default() });
        assert!(matches!(old, Err(Error::Compacted)), "{old:?}");
    }

    #[test]
    fn a_key_after_the_revision_is_refused() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let export = Export { revision: 5, kvs: vec![kv("/a", 3, 9, 2, 0)], leases: vec![] };
        let file = tmp.path().join("bad.snap");
        assert!(matches!(write_snapshot(&export, &file), Err(Error::InvalidArgument(_))));
        assert!(!file.exists());
    }
}
