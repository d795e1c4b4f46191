//! Restoring a data dir from a snapshot file (`raftstore snapshot restore`),
//! and raftstore's own snapshot format.
//!
//! Two formats restore:
//! - etcd's (a bbolt db followed by its SHA-256, [`crate::etcd_db`]), which
//!   `etcdctl snapshot save` writes against etcd and raftstore alike;
//! - raftstore's own, an archive of a RocksDB checkpoint, which
//!   `raftstore snapshot save` writes and which `etcdctl snapshot save`
//!   against raftstore wrote before it served etcd's format:
//!
//! ```text
//! magic "RAFTSTORE-SNAPSHOT-1\n"
//! repeated: u32 BE name length, name bytes, u64 BE size, file bytes
//! u32 BE 0                      (end of files)
//! zero padding to a multiple of 512 bytes (etcdctl checks the size)
//! 32 bytes: SHA-256 of everything before it
//! ```

use std::io::{Read, Seek, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

const MAGIC: &[u8] = b"RAFTSTORE-SNAPSHOT-1\n";

/// Writes the archive of the checkpoint directory `dir` to `out`.
///
/// # Errors
/// I/O errors reading the checkpoint or writing `out`.
pub fn write_archive(dir: &Path, out: &mut impl Write) -> Result<()> {
    let mut h = Sha256::new();
    let written = std::cell::Cell::new(0u64);
    let mut put = |out: &mut dyn Write, b: &[u8]| -> Result<()> {
        h.update(b);
        written.set(written.get() + b.len() as u64);
        out.write_all(b).map_err(Error::internal)
    };
    put(out, MAGIC)?;
    let mut entries: Vec<_> = std::fs::read_dir(dir).map_err(Error::internal)?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if !e.file_type().map_err(Error::internal)?.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        let size = e.metadata().map_err(Error::internal)?.len();
        put(out, &(name.len() as u32).to_be_bytes())?;
        put(out, name.as_bytes())?;
        put(out, &size.to_be_bytes())?;
        let mut f = std::fs::File::open(e.path()).map_err(Error::internal)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = f.read(&mut buf).map_err(Error::internal)?;
            if n == 0 {
                return Err(Error::internal("checkpoint file shrank while archiving"));
            }
            let n = n.min(left as usize);
            put(out, &buf[..n])?;
            left -= n as u64;
        }
    }
    put(out, &0u32.to_be_bytes())?;
    // etcdctl checks that a snapshot's size is 32 (its SHA-256) more than a
    // multiple of 512, as a bbolt file with its checksum is.
    let pad = (512 - (written.get() % 512)) % 512;
    put(out, &vec![0u8; pad as usize])?;
    let digest = h.finalize();
    out.write_all(&digest).map_err(Error::internal)?;
    Ok(())
}

/// Unpacks an archive into `dir` (created), verifying its checksum.
///
/// # Errors
/// [`Error::InvalidArgument`] for a file that is not a raftstore snapshot,
/// is truncated, or fails its checksum; I/O errors otherwise.
pub fn unpack_archive(file: &Path, dir: &Path) -> Result<()> {
    let bytes_total = std::fs::metadata(file).map_err(Error::internal)?.len();
    if bytes_total < (MAGIC.len() + 4 + 32) as u64 {
        return Err(Error::InvalidArgument("snapshot file is too short".into()));
    }
    let body_len = bytes_total - 32;
    let f = std::fs::File::open(file).map_err(Error::internal)?;
    let mut r = std::io::BufReader::new(f).take(body_len);
    let mut h = Sha256::new();
    fn take(r: &mut dyn Read, h: &mut Sha256, n: usize) -> Result<Vec<u8>> {
        let mut b = vec![0u8; n];
        r.read_exact(&mut b).map_err(|_| Error::InvalidArgument("snapshot file is truncated".into()))?;
        h.update(&b);
        Ok(b)
    }
    fn be_u32(b: Vec<u8>) -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[..4]);
        u32::from_be_bytes(a)
    }
    fn be_u64(b: Vec<u8>) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        u64::from_be_bytes(a)
    }
    if take(&mut r, &mut h, MAGIC.len())? != MAGIC {
        return Err(Error::InvalidArgument("not a raftstore snapshot".into()));
    }
    std::fs::create_dir_all(dir).map_err(Error::internal)?;
    loop {
        let n = be_u32(take(&mut r, &mut h, 4)?) as usize;
        if n == 0 {
            // Padding up to the checksum.
            let mut pad = Vec::new();
            r.read_to_end(&mut pad).map_err(Error::internal)?;
            h.update(&pad);
            break;
        }
        if n > 4096 {
            return Err(Error::InvalidArgument("corrupt snapshot: file name too long".into()));
        }
        let name = String::from_utf8(take(&mut r, &mut h, n)?).map_err(|_| Error::InvalidArgument("corrupt snapshot: bad file name".into()))?;
        if name.contains('/') || name.contains("..") || name.is_empty() {
            return Err(Error::InvalidArgument("corrupt snapshot: bad file name".into()));
        }
        let size = be_u64(take(&mut r, &mut h, 8)?);
        let mut out = std::fs::File::create(dir.join(&name)).map_err(Error::internal)?;
        let mut left = size;
        while left > 0 {
            let n = left.min(1 << 20) as usize;
            let b = take(&mut r, &mut h, n)?;
            out.write_all(&b).map_err(Error::internal)?;
            left -= n as u64;
        }
        out.sync_all().map_err(Error::internal)?;
    }
    let digest = h.finalize();
    let mut f = std::fs::File::open(file).map_err(Error::internal)?;
    f.seek(std::io::SeekFrom::Start(body_len)).map_err(Error::internal)?;
    let mut stored = [0u8; 32];
    f.read_exact(&mut stored).map_err(Error::internal)?;
    if stored != digest.as_slice() {
        return Err(Error::InvalidArgument("snapshot checksum mismatch".into()));
    }
    Ok(())
}

/// Options of [`restore_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RestoreOptions {
    /// Take an etcd db without its SHA-256 (a `member/snap/db` copied out
    /// of a data dir), as `etcdctl snapshot restore --skip-hash-check`.
    pub skip_hash_check: bool,
}

/// Which format a snapshot file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// etcd's: a bbolt db, with its digest unless copied from a data dir.
    Etcd,
    /// raftstore's own archive.
    Raftstore,
}

/// The format of the snapshot at `file`, by its first bytes.
///
/// # Errors
/// [`Error::InvalidArgument`] for a file in neither format; I/O errors
/// otherwise.
pub fn format_of(file: &Path) -> Result<Format> {
    let mut head = vec![0u8; MAGIC.len()];
    let n = std::fs::File::open(file).and_then(|mut f| f.read(&mut head)).map_err(|e| Error::InvalidArgument(format!("cannot read snapshot {}: {e}", file.display())))?;
    if n == MAGIC.len() && head == MAGIC {
        Ok(Format::Raftstore)
    } else if crate::etcd_db::is_bolt_file(file) {
        Ok(Format::Etcd)
    } else {
        Err(Error::InvalidArgument(format!("{} is neither an etcd snapshot (bbolt) nor a raftstore one", file.display())))
    }
}

/// Restores a new data dir from a snapshot file with default options; see
/// [`restore_with`].
///
/// # Errors
/// As [`restore_with`].
pub fn restore(file: &Path, data_dir: &Path) -> Result<Format> {
    restore_with(file, data_dir, RestoreOptions::default())
}

/// Restores a new data dir from a snapshot file in either [`Format`]
/// (`raftstore snapshot restore`, like `etcdutl snapshot restore`). The
/// key-value history, revisions, compaction and leases come from the
/// snapshot; Raft state starts fresh, so the member forms a new cluster
/// from its flags when started. Returns the file's format.
///
/// # Errors
/// [`Error::InvalidArgument`] if `data_dir` exists and is not empty, or the
/// file is not a valid snapshot (a digest mismatch included); I/O errors
/// otherwise. Nothing is left behind on error.
pub fn restore_with(file: &Path, data_dir: &Path, opts: RestoreOptions) -> Result<Format> {
    use crate::storage::keys::{self, MetaKey};
    if data_dir.exists() && std::fs::read_dir(data_dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(Error::InvalidArgument(format!("data-dir {:?} exists", data_dir)));
    }
    let format = format_of(file)?;
    std::fs::create_dir_all(data_dir).map_err(Error::internal)?;
    let tmp = data_dir.join("restore-tmp");
    let result = (|| -> Result<()> {
        match format {
            Format::Raftstore => {
                unpack_archive(file, &tmp)?;
                let db = crate::storage::open(&data_dir.join("db"))?;
                crate::raft::state_machine::load_checkpoint(&db, &tmp).map_err(Error::internal)?;
                let meta = crate::storage::cf(&db, keys::CF_META)?;
                db.delete_cf(meta, keys::AppliedLogId::KEY)?;
                db.delete_cf(meta, keys::LastMembership::KEY)?;
                db.flush_wal(true)?;
            }
            Format::Etcd => {
                std::fs::create_dir_all(&tmp).map_err(Error::internal)?;
                let copy = tmp.join("db");
                crate::etcd_db::extract_db(file, &copy, opts.skip_hash_check)?;
                let db = crate::storage::open(&data_dir.join("db"))?;
                crate::etcd_db::load_db(&copy, &db)?;
                db.flush_wal(true)?;
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(data_dir);
    }
    result.map(|()| format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_round_trips_has_etcdctl_size_and_rejects_corruption() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let src = tmp.path().join("src");
        std::fs::create_dir_all(&src).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(src.join("a"), b"hello").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(src.join("b"), vec![7u8; 3000]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        write_archive(&src, &mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.len() % 512, 32, "etcdctl's hasChecksum rule");
        let file = tmp.path().join("snap");
        std::fs::write(&file, &out).unwrap_or_else(|e| panic!("{e}"));
        let dst = tmp.path().join("dst");
        unpack_archive(&file, &dst).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(dst.join("b")).ok(), Some(vec![7u8; 3000]));
        let mut bad = out.clone();
        bad[40] ^= 1;
        std::fs::write(&file, &bad).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(unpack_archive(&file, &tmp.path().join("x")), Err(Error::InvalidArgument(_))));
        std::fs::write(&file, &out[..100]).unwrap_or_else(|e| panic!("{e}"));
        assert!(unpack_archive(&file, &tmp.path().join("y")).is_err());
    }
}
