//! The client snapshot format (`Maintenance.Snapshot`, `etcdctl snapshot
//! save`) and restoring a data dir from it.
//!
//! etcd's snapshot is a bbolt file; ours is an archive of a RocksDB
//! checkpoint, restorable only by `raftstore snapshot restore`:
//!
//! ```text
//! magic "RAFTSTORE-SNAPSHOT-1\n"
//! repeated: u32 BE name length, name bytes, u64 BE size, file bytes
//! u32 BE 0                      (end of files)
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
    let mut put = |out: &mut dyn Write, b: &[u8]| -> Result<()> {
        h.update(b);
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
    let mut read_exact = |r: &mut dyn Read, n: usize| -> Result<Vec<u8>> {
        let mut b = vec![0u8; n];
        r.read_exact(&mut b).map_err(|_| Error::InvalidArgument("snapshot file is truncated".into()))?;
        h.update(&b);
        Ok(b)
    };
    if read_exact(&mut r, MAGIC.len())? != MAGIC {
        return Err(Error::InvalidArgument("not a raftstore snapshot".into()));
    }
    std::fs::create_dir_all(dir).map_err(Error::internal)?;
    loop {
        let n = u32::from_be_bytes(read_exact(&mut r, 4)?.try_into().map_err(|_| Error::internal("len"))?) as usize;
        if n == 0 {
            break;
        }
        if n > 4096 {
            return Err(Error::InvalidArgument("corrupt snapshot: file name too long".into()));
        }
        let name = String::from_utf8(read_exact(&mut r, n)?).map_err(|_| Error::InvalidArgument("corrupt snapshot: bad file name".into()))?;
        if name.contains('/') || name.contains("..") || name.is_empty() {
            return Err(Error::InvalidArgument("corrupt snapshot: bad file name".into()));
        }
        let size = u64::from_be_bytes(read_exact(&mut r, 8)?.try_into().map_err(|_| Error::internal("len"))?);
        let mut out = std::fs::File::create(dir.join(&name)).map_err(Error::internal)?;
        let mut left = size;
        while left > 0 {
            let n = left.min(1 << 20) as usize;
            let b = read_exact(&mut r, n)?;
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

/// Restores a new data dir from a client snapshot (`raftstore snapshot
/// restore`, like `etcdutl snapshot restore`). The key-value history,
/// revisions and leases come from the snapshot; Raft state starts fresh, so
/// the member forms a new cluster from its flags when started.
///
/// # Errors
/// [`Error::InvalidArgument`] if `data_dir` already exists or the file is
/// not a valid snapshot; I/O errors otherwise.
pub fn restore(file: &Path, data_dir: &Path) -> Result<()> {
    use crate::storage::keys::{self, MetaKey};
    if data_dir.exists() && std::fs::read_dir(data_dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(Error::InvalidArgument(format!("data-dir {:?} exists", data_dir)));
    }
    std::fs::create_dir_all(data_dir).map_err(Error::internal)?;
    let tmp = data_dir.join("restore-tmp");
    let result = (|| -> Result<()> {
        unpack_archive(file, &tmp)?;
        let db = crate::storage::open(&data_dir.join("db"))?;
        crate::raft::state_machine::load_checkpoint(&db, &tmp).map_err(Error::internal)?;
        let meta = crate::storage::cf(&db, keys::CF_META)?;
        db.delete_cf(meta, keys::AppliedLogId::KEY)?;
        db.delete_cf(meta, keys::LastMembership::KEY)?;
        db.flush_wal(true)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(data_dir);
    }
    result
}
