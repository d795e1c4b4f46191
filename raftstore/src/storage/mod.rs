//! The on-disk engine: one RocksDB instance with a column family per concern.
//!
//! Column families and key encodings live in [`keys`]. Raft log writes are
//! synced (fsync of the shared WAL); state-machine writes are not, because the
//! synced log can replay them after a crash.

pub mod keys;

use std::path::Path;
use std::sync::Arc;

use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, Options, DB};

use crate::error::{Error, Result};

/// The shared RocksDB handle.
pub type Db = Arc<DB>;

/// Writes `batch` and makes it durable before returning: with manual WAL
/// flushing, a synced write must also flush the WAL buffer.
///
/// # Errors
/// [`Error::Internal`] if the write or the sync fails.
pub fn write_durable(db: &DB, batch: rocksdb::WriteBatch) -> Result<()> {
    db.write(batch)?;
    sync_wal(db)?;
    Ok(())
}

/// Writes the WAL buffer out and fsyncs it, timed in
/// `etcd_disk_wal_fsync_duration_seconds` (every WAL sync is counted).
///
/// # Errors
/// The RocksDB error if the write or the sync fails.
pub fn sync_wal(db: &DB) -> std::result::Result<(), rocksdb::Error> {
    let timer = crate::metrics::metrics().wal_fsync.start_timer();
    let res = db.flush_wal(true);
    timer.observe_duration();
    res
}

/// Opens (creating if needed) the database at `path` with every column family.
///
/// # Errors
/// [`Error::Internal`] if RocksDB cannot open the directory.
pub fn open(path: &Path) -> Result<Db> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_max_background_jobs(2);
    opts.set_bytes_per_sync(1 << 20);
    // The WAL is written to the file only on an explicit flush: the Raft
    // log's group commit (`flush_wal(true)`) writes and syncs everything
    // queued since, state-machine batches included, in one system call pair.
    opts.set_manual_wal_flush(true);
    // Column families flush together, so a crash never leaves the kv data
    // and the applied log id from different moments.
    opts.set_atomic_flush(true);
    let cfs = keys::ALL_CFS.iter().map(|name| {
        let mut cf_opts = Options::default();
        if *name == keys::CF_KV {
            cf_opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        }
        ColumnFamilyDescriptor::new(*name, cf_opts)
    });
    let db = DB::open_cf_descriptors(&opts, path, cfs)?;
    Ok(Arc::new(db))
}

/// Looks up a column family handle.
///
/// # Errors
/// [`Error::Internal`] if the column family is missing (not opened by [`open`]).
pub fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a ColumnFamily> {
    db.cf_handle(name).ok_or_else(|| Error::internal(format!("missing column family {name}")))
}

/// Total size of the database's live files, in bytes (etcd `db_size`).
pub fn db_size(db: &DB) -> i64 {
    let mut total: u64 = 0;
    for name in keys::ALL_CFS {
        if let Some(h) = db.cf_handle(name) {
            if let Ok(Some(v)) = db.property_int_value_cf(h, "rocksdb.total-sst-files-size") {
                total += v;
            }
            if let Ok(Some(v)) = db.property_int_value_cf(h, "rocksdb.cur-size-all-mem-tables") {
                total += v;
            }
        }
    }
    i64::try_from(total).unwrap_or(i64::MAX)
}
