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
    open_with_wal(path, None)
}

/// [`open`], with RocksDB's write-ahead log (which holds every Raft log
/// append until it is flushed to the column families) in `wal_dir` instead
/// of `path`: etcd's `--wal-dir`, which puts the log's synced writes on a
/// device of their own. RocksDB replays only the WAL files in the
/// directory it is given, so a store must be opened with the directory its
/// WAL was written to (`node` records it).
///
/// # Errors
/// [`Error::Internal`] if RocksDB cannot open the directories.
pub fn open_with_wal(path: &Path, wal_dir: Option<&Path>) -> Result<Db> {
    let mut opts = Options::default();
    if let Some(dir) = wal_dir {
        opts.set_wal_dir(dir);
    }
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

/// Flushes every column family's memtable to SST files, after which no
/// write needs the WAL any more (RocksDB then deletes the WAL files).
///
/// # Errors
/// [`Error::Internal`] if the flush fails.
pub fn flush_all(db: &DB) -> Result<()> {
    let cfs: Vec<&ColumnFamily> = keys::ALL_CFS.iter().filter_map(|name| db.cf_handle(name)).collect();
    db.flush_cfs_opt(&cfs, &rocksdb::FlushOptions::default())?;
    Ok(())
}

/// Size that [`presize_wal`] gives the WAL file RocksDB is writing, in
/// bytes. RocksDB switches to a new WAL file when the memtables flush (at
/// most 64 MiB each by default), so the live file rarely outgrows it; a
/// file that does simply grows again with each write.
pub const WAL_PRESIZE_BYTES: u64 = 64 << 20;

/// How often [`presize_wal`] looks for a new WAL file.
const WAL_PRESIZE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Starts a thread that sets the size of each new RocksDB WAL file (in
/// `wal_dir`, or in the database's directory) to [`WAL_PRESIZE_BYTES`] soon
/// after RocksDB creates it, until `db` is dropped.
///
/// Why: every Raft log append ends in an `fdatasync` of the WAL. When the
/// write grew the file, the sync must also write the inode's new size, a
/// second device write; a write inside the file's size needs only the data
/// (measured on this project's ext4 disk: 140 µs against 197 µs per
/// 600-byte write and sync). etcd gets the same effect by preallocating
/// its WAL segments to their full 64 MB size.
///
/// Why it is safe: RocksDB writes its WAL at its own file offset (not in
/// append mode) and already reserves the space past the end
/// (`FALLOC_FL_KEEP_SIZE`), so only the reported size changes. It trims a
/// WAL to what it wrote when it switches to the next one. The process does
/// not close RocksDB when it stops, so after a stop or a crash the last WAL
/// keeps its 64 MiB size: recovery reads the zero-filled tail as padding,
/// not as records (its log reader skips zero headers, which exist for
/// preallocated files), in ~160 ms here, then flushes and deletes the file.
/// Checkpoints copy the open WAL only up to what RocksDB wrote. A WAL that
/// RocksDB closed just before this thread saw it stays at 64 MiB of holes
/// (no blocks) until RocksDB deletes it.
pub fn presize_wal(db: &Db, wal_dir: Option<&Path>) {
    let weak = Arc::downgrade(db);
    let dir = wal_dir.unwrap_or(db.path()).to_path_buf();
    let spawned = std::thread::Builder::new().name("wal-presize".into()).spawn(move || {
        let mut done = 0u64;
        while weak.strong_count() > 0 {
            if let Some((number, path)) = newest_wal(&dir) {
                if number > done {
                    if let Err(e) = extend_to(&path, WAL_PRESIZE_BYTES) {
                        tracing::debug!("cannot presize {}: {e}", path.display());
                    }
                    done = number;
                }
            }
            std::thread::sleep(WAL_PRESIZE_POLL);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the WAL presize thread: {e}");
    }
}

/// The highest-numbered `NNNNNN.log` file in `dir` (RocksDB's WAL files).
fn newest_wal(dir: &Path) -> Option<(u64, std::path::PathBuf)> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let number = name.to_str()?.strip_suffix(".log")?.parse::<u64>().ok()?;
            Some((number, e.path()))
        })
        .max_by_key(|(n, _)| *n)
}

/// Raises the size of the file at `path` to `size` bytes (never lowers it).
fn extend_to(path: &Path, size: u64) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    if f.metadata()?.len() < size {
        f.set_len(size)?;
    }
    Ok(())
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
    cfs_size(db, &keys::ALL_CFS)
}

/// The part of [`db_size`] that holds the key-value store (the `kv`, `meta`
/// and `lease` column families, not the Raft log): what etcd's quota
/// compares, since etcd's backend database holds no WAL either.
pub fn state_machine_size(db: &DB) -> i64 {
    cfs_size(db, &keys::STATE_MACHINE_CFS)
}

fn cfs_size(db: &DB, names: &[&str]) -> i64 {
    let mut total: u64 = 0;
    for name in names.iter().copied() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_len(dir: &Path) -> u64 {
        newest_wal(dir).and_then(|(_, p)| std::fs::metadata(p).ok()).map(|m| m.len()).unwrap_or(0)
    }

    /// The live WAL is presized, and a copy of the files taken while the
    /// database is open (what a crash leaves on disk: synced records, then
    /// the zero-filled rest of the presized file) recovers every synced
    /// write, and takes new ones.
    #[test]
    fn presized_wal_recovers_synced_writes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let live = dir.path().join("live");
        let db = open(&live).unwrap_or_else(|e| panic!("open: {e}"));
        let write = |db: &DB, from: u64, to: u64| {
            let log_cf = super::cf(db, keys::CF_RAFT_LOG).unwrap_or_else(|e| panic!("{e}"));
            for i in from..to {
                let mut b = rocksdb::WriteBatch::default();
                b.put_cf(log_cf, i.to_be_bytes(), vec![i as u8; 300]);
                write_durable(db, b).unwrap_or_else(|e| panic!("write {i}: {e}"));
            }
        };
        write(&db, 0, 10);
        presize_wal(&db, None);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while wal_len(&live) < WAL_PRESIZE_BYTES {
            assert!(std::time::Instant::now() < deadline, "WAL not presized: {} bytes", wal_len(&live));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        write(&db, 10, 200);
        assert_eq!(wal_len(&live), WAL_PRESIZE_BYTES, "writes stay inside the presized file");

        let crashed = dir.path().join("crashed");
        std::fs::create_dir(&crashed).unwrap_or_else(|e| panic!("{e}"));
        for entry in std::fs::read_dir(&live).unwrap_or_else(|e| panic!("{e}")).flatten() {
            std::fs::copy(entry.path(), crashed.join(entry.file_name())).unwrap_or_else(|e| panic!("copy: {e}"));
        }
        drop(db);

        let db = open(&crashed).unwrap_or_else(|e| panic!("reopen: {e}"));
        let log_cf = super::cf(&db, keys::CF_RAFT_LOG).unwrap_or_else(|e| panic!("{e}"));
        let count = db.iterator_cf(log_cf, rocksdb::IteratorMode::Start).count();
        assert_eq!(count, 200, "every synced write survives");
        let got = db.get_cf(log_cf, 199u64.to_be_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, Some(vec![199u8; 300]));
        write(&db, 200, 210);
        drop(db);
        let db = open(&crashed).unwrap_or_else(|e| panic!("reopen again: {e}"));
        let log_cf = super::cf(&db, keys::CF_RAFT_LOG).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(db.iterator_cf(log_cf, rocksdb::IteratorMode::Start).count(), 210);
    }
}
