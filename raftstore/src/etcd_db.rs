//! etcd's database file, which is also its snapshot format: writing one from
//! raftstore's state machine (`Maintenance.Snapshot`, so `etcdctl snapshot
//! save` gets a file that etcd's `snapshot status` and `snapshot restore`
//! accept) and reading one into it (`raftstore snapshot restore` of a file
//! saved from a real etcd).
//!
//! # The format
//!
//! An etcd db is a bbolt file (read and written with the `bbolt-rs` crate)
//! with these top-level buckets; the facts come from etcd's `mvcc`
//! (`kvstore.go`, `revision.go`), `lease` (`lessor.go`, `leasepb`) and
//! `etcdserver/api/membership` packages (3.4, the same in 3.5):
//!
//! | bucket | key | value |
//! |---|---|---|
//! | `key` | revision: 8 B big-endian main, `_`, 8 B big-endian sub (17 B); a tombstone has a trailing `t` (18 B) | `mvccpb.KeyValue`, protobuf (a tombstone carries only the key) |
//! | `meta` | `consistent_index`, `term` | 8 B big-endian u64 |
//! | `meta` | `finishedCompactRev`, `scheduledCompactRev` | a 17 B revision (main, `_`, sub 0); absent before the first compaction |
//! | `lease` | lease ID, 8 B big-endian | `leasepb.Lease` {1: ID, 2: TTL seconds, 3: remaining TTL} |
//! | `auth` | `authEnabled` | 1 B: 1 enabled, 0 disabled |
//! | `auth` | `authRevision` | 8 B big-endian u64 |
//! | `authUsers`, `authRoles` | user or role name | `authpb.User`, `authpb.Role` (protobuf; passwords as bcrypt hashes) |
//! | `alarm` | `etcdserverpb.AlarmMember` {1: member ID, 2: alarm type} (protobuf) | empty |
//! | `members`, `members_removed`, `cluster` | membership | left empty here |
//!
//! raftstore's `kv` column family has the same revision order and the same
//! protobuf values (only the tombstone mark differs: raftstore marks puts
//! too), its `lease` family holds ID → TTL, and its `meta` family keeps
//! users and roles as the same protobufs (and bcrypt hashes) and the auth
//! revision in the same encoding, so the mapping is one to one.
//! etcd recomputes the store's current revision from the newest key (or the
//! finished compaction, if that is later), and so does raftstore.
//!
//! # Snapshot files
//!
//! A snapshot stream or file is the db followed by the SHA-256 of the db.
//! etcd's tools recognise the digest by the file's size: 32 bytes more than
//! a multiple of 512, which a db (whole pages) plus the digest always is.
//! `etcdctl snapshot restore` checks it and refuses a file without one
//! unless told `--skip-hash-check`; [`extract_db`] does the same.
//!
//! # What raftstore does not carry
//!
//! Membership is not written: `snapshot restore` takes the new cluster's
//! members from its flags in etcd and raftstore alike. Users, roles, the
//! auth switch and revision, and raised alarms go both ways, as etcd's
//! `snapshot restore` keeps them.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use bbolt_rs::{BoltOptions, BucketApi, BucketRwApi, DbApi, DbRwAPI, TxApi, TxRwApi, TxRwRefApi};
use prost::Message;
use proto::mvccpb::KeyValue;
use rocksdb::{IteratorMode, DB};
use sha2::{Digest, Sha256};

use proto::etcdserverpb::AlarmMember;

use crate::error::{Error, Result};
use crate::mvcc::alarm;
use crate::mvcc::revision::Revision;
use crate::storage::cf;
use crate::storage::keys::{self, MetaKey};

/// The MVCC history bucket.
pub const BUCKET_KEY: &[u8] = b"key";
/// The store's metadata bucket.
pub const BUCKET_META: &[u8] = b"meta";
/// The lease bucket.
pub const BUCKET_LEASE: &[u8] = b"lease";
/// The auth switch and revision.
pub const BUCKET_AUTH: &[u8] = b"auth";
/// Users by name.
pub const BUCKET_AUTH_USERS: &[u8] = b"authUsers";
/// Roles by name.
pub const BUCKET_AUTH_ROLES: &[u8] = b"authRoles";
/// Raised alarms.
pub const BUCKET_ALARM: &[u8] = b"alarm";
/// `auth` key: whether auth is on.
pub const AUTH_ENABLED: &[u8] = b"authEnabled";
/// `auth` key: the auth revision.
pub const AUTH_REVISION: &[u8] = b"authRevision";
/// Every top-level bucket an etcd 3.4/3.5 db has; all are created, so the
/// file looks like one etcd wrote.
pub const BUCKETS: [&[u8]; 10] = [BUCKET_ALARM, BUCKET_AUTH, BUCKET_AUTH_ROLES, BUCKET_AUTH_USERS, b"cluster", BUCKET_KEY, BUCKET_LEASE, b"members", b"members_removed", BUCKET_META];

/// `meta` key of the Raft index of the last applied entry (u64 big-endian).
pub const META_CONSISTENT_INDEX: &[u8] = b"consistent_index";
/// `meta` key of the term of that entry (u64 big-endian; etcd 3.5 on).
pub const META_TERM: &[u8] = b"term";
/// `meta` key of the compaction whose deletions are done (a revision).
pub const META_FINISHED_COMPACT: &[u8] = b"finishedCompactRev";
/// `meta` key of the latest compaction requested (a revision).
pub const META_SCHEDULED_COMPACT: &[u8] = b"scheduledCompactRev";

/// Page size of the files written, in bytes: the x86-64 and arm64 Linux
/// page size, which is what etcd's own files use there.
pub const PAGE_SIZE: usize = 4096;

/// Key-value bytes put into the `key` bucket per bbolt write transaction:
/// bounds the memory a write takes (bbolt keeps a transaction's dirty
/// pages in memory until it commits).
const TX_BYTES: usize = 16 << 20;

/// Length of the SHA-256 digest that follows the db in a snapshot.
pub const DIGEST_LEN: u64 = 32;

/// bbolt's file magic, in each meta page.
const BOLT_MAGIC: u32 = 0xED0C_DAED;
/// bbolt's page flag of a freelist page.
const FREELIST_PAGE_FLAG: u16 = 0x10;
/// The meta's freelist page id when the freelist is not stored in the file
/// (bbolt's `NoFreelistSync`, which etcd 3.4 on Linux turns on).
const NO_FREELIST: u64 = u64::MAX;

/// `leasepb.Lease`, the value of the `lease` bucket.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeasePb {
    /// Lease ID.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// Granted TTL, in seconds.
    #[prost(int64, tag = "2")]
    pub ttl: i64,
    /// Remaining TTL in seconds as last checkpointed (0: none); raftstore
    /// writes 0, and renews every lease in full on restore, as etcd does.
    #[prost(int64, tag = "3")]
    pub remaining_ttl: i64,
}

/// What [`write_db`] and [`load_db`] found, for messages and checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// The store's current revision as etcd will compute it.
    pub revision: i64,
    /// The compacted revision: -1 if never compacted (etcd's
    /// `compactMainRev`), 0 after a `Compact(0)`.
    pub compact_revision: i64,
    /// Entries of the `key` bucket (revisions of keys, tombstones included).
    pub revisions: u64,
    /// Leases.
    pub leases: u64,
    /// Size of the db in bytes (whole pages).
    pub size: u64,
}

/// Encodes a revision as etcd's `key` bucket does: 17 bytes, or 18 with the
/// tombstone mark.
pub fn revision_key(rev: Revision, tombstone: bool) -> Vec<u8> {
    let mut k = Vec::with_capacity(18);
    k.extend_from_slice(&rev.main.to_be_bytes());
    k.push(b'_');
    k.extend_from_slice(&rev.sub.to_be_bytes());
    if tombstone {
        k.push(b't');
    }
    k
}

/// Decodes a `key` bucket key into (revision, is a tombstone).
///
/// # Errors
/// [`Error::InvalidArgument`] for anything but a 17-byte revision, or an
/// 18-byte one marked `t`.
pub fn parse_revision_key(k: &[u8]) -> Result<(Revision, bool)> {
    let tombstone = match (k.len(), k.get(17)) {
        (17, _) => false,
        (18, Some(b't')) => true,
        _ => return Err(Error::InvalidArgument(format!("corrupt etcd db: revision key {k:?}"))),
    };
    if k[8] != b'_' {
        return Err(Error::InvalidArgument(format!("corrupt etcd db: revision key {k:?}")));
    }
    let (main, sub) = (be_i64(&k[..8])?, be_i64(&k[9..17])?);
    Ok((Revision::new(main, sub), tombstone))
}

fn be_i64(b: &[u8]) -> Result<i64> {
    let a: [u8; 8] = b.try_into().map_err(|_| Error::InvalidArgument(format!("corrupt etcd db: {} bytes where 8 were expected", b.len())))?;
    Ok(i64::from_be_bytes(a))
}

fn bolt_err(e: bbolt_rs::Error) -> Error {
    Error::internal(format!("bbolt: {e}"))
}

fn meta_i64(snap: &rocksdb::Snapshot<'_>, meta: &rocksdb::ColumnFamily, key: &[u8]) -> Result<Option<i64>> {
    snap.get_cf(meta, key)?.map(|v| keys::decode_i64(&v)).transpose()
}

/// Writes raftstore's state machine in `db`, as of one RocksDB snapshot
/// taken on entry, as an etcd db file at `path` (replaced if it exists).
/// The file ends at bbolt's high-water mark: no preallocated space.
///
/// # Errors
/// [`Error::Internal`] on RocksDB, bbolt or I/O errors, or corrupt data.
pub fn write_db(db: &DB, path: &Path) -> Result<Summary> {
    write_db_in_steps(db, path, TX_BYTES)
}

/// [`write_db`], committing after every `tx_bytes` of history.
fn write_db_in_steps(db: &DB, path: &Path, tx_bytes: usize) -> Result<Summary> {
    let snap = db.snapshot();
    let (kv_cf, meta_cf, lease_cf) = (cf(db, keys::CF_KV)?, cf(db, keys::CF_META)?, cf(db, keys::CF_LEASE)?);
    // -1 stands for "never" in both (raftstore stores it; etcd leaves the
    // marks out).
    let compact = meta_i64(&snap, meta_cf, keys::CompactRevision::KEY)?.unwrap_or(-1);
    let finished = meta_i64(&snap, meta_cf, keys::FinishedCompactRevision::KEY)?.unwrap_or(compact).min(compact);
    let current = meta_i64(&snap, meta_cf, keys::CurrentRevision::KEY)?.unwrap_or(1);
    let applied: Option<crate::raft::LogId> = match snap.get_cf(meta_cf, keys::AppliedLogId::KEY)? {
        Some(b) => postcard::from_bytes(&b).map_err(Error::internal)?,
        None => None,
    };

    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::internal(e)),
        _ => {}
    }
    let mut bolt = BoltOptions::builder().page_size(PAGE_SIZE).no_sync().build().open(path).map_err(bolt_err)?;
    let mut summary = Summary { compact_revision: compact, ..Summary::default() };
    let mut last_main = 0;
    {
        let mut tx = bolt.begin_rw().map_err(bolt_err)?;
        for name in BUCKETS {
            tx.create_bucket_if_not_exists(name).map_err(bolt_err)?;
        }
        tx.commit().map_err(bolt_err)?;
    }
    // The history, in revision order, a transaction per TX_BYTES.
    let mut entries = snap.iterator_cf(kv_cf, IteratorMode::Start);
    loop {
        let mut tx = bolt.begin_rw().map_err(bolt_err)?;
        let mut done = true;
        {
            let mut bucket = tx.bucket_mut(BUCKET_KEY).ok_or_else(|| Error::internal("bbolt: key bucket missing"))?;
            // Keys arrive in order, so full pages lose nothing to later
            // inserts (bbolt's default leaves half of each page free).
            bucket.set_fill_percent(1.0);
            let mut bytes = 0;
            for item in entries.by_ref() {
                let (k, v) = item?;
                let (rev, tombstone) = keys::decode_kv_key(&k)?;
                bucket.put(revision_key(rev, tombstone), &v).map_err(bolt_err)?;
                summary.revisions += 1;
                last_main = rev.main;
                bytes += k.len() + v.len();
                if bytes >= tx_bytes {
                    done = false;
                    break;
                }
            }
        }
        tx.commit().map_err(bolt_err)?;
        if done {
            break;
        }
    }
    {
        let mut tx = bolt.begin_rw().map_err(bolt_err)?;
        {
            let mut bucket = tx.bucket_mut(BUCKET_LEASE).ok_or_else(|| Error::internal("bbolt: lease bucket missing"))?;
            for item in snap.iterator_cf(lease_cf, IteratorMode::Start) {
                let (k, v) = item?;
                let id = keys::decode_i64(&k)?;
                let ttl = keys::decode_i64(&v)?;
                bucket.put(id.to_be_bytes(), LeasePb { id, ttl, remaining_ttl: 0 }.encode_to_vec()).map_err(bolt_err)?;
                summary.leases += 1;
            }
        }
        write_auth_and_alarms(&snap, meta_cf, &mut tx)?;
        {
            let mut bucket = tx.bucket_mut(BUCKET_META).ok_or_else(|| Error::internal("bbolt: meta bucket missing"))?;
            let (index, term) = applied.map(|l| (l.index(), l.committed_leader_id().term)).unwrap_or((0, 0));
            bucket.put(META_CONSISTENT_INDEX, index.to_be_bytes()).map_err(bolt_err)?;
            bucket.put(META_TERM, term.to_be_bytes()).map_err(bolt_err)?;
            if compact >= 0 {
                // A compaction still deleting is scheduled but not finished;
                // etcd resumes it when it opens the db, as raftstore does.
                bucket.put(META_SCHEDULED_COMPACT, revision_key(Revision::new(compact, 0), false)).map_err(bolt_err)?;
                if finished >= 0 {
                    bucket.put(META_FINISHED_COMPACT, revision_key(Revision::new(finished, 0), false)).map_err(bolt_err)?;
                }
            }
        }
        tx.commit().map_err(bolt_err)?;
    }
    let tx = bolt.begin().map_err(bolt_err)?;
    summary.size = tx.size();
    drop(tx);
    bolt.close();
    // bbolt grows its file ahead of the data (to its mmap size, or by 16 MiB
    // steps); everything past the high-water mark is unused.
    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(Error::internal)?;
    f.set_len(summary.size).map_err(Error::internal)?;
    summary.revision = last_main.max(finished).max(1);
    if current > summary.revision {
        // Only possible if raftstore counted a revision that wrote nothing
        // to its history; etcd cannot be told about it.
        tracing::warn!(current, db_revision = summary.revision, "etcd db: the store's revision is past its newest key; etcd will resume from the newest key's revision");
    }
    Ok(summary)
}

/// Writes users, roles, the auth switch and revision, and the raised
/// alarms from raftstore's `meta` family into etcd's buckets.
fn write_auth_and_alarms<'tx>(snap: &rocksdb::Snapshot<'_>, meta_cf: &rocksdb::ColumnFamily, tx: &mut impl TxRwRefApi<'tx>) -> Result<()> {
    let missing = |name: &[u8]| Error::internal(format!("bbolt: {} bucket missing", String::from_utf8_lossy(name)));
    {
        let mut bucket = tx.bucket_mut(BUCKET_AUTH).ok_or_else(|| missing(BUCKET_AUTH))?;
        if let Some(v) = snap.get_cf(meta_cf, keys::AuthEnabled::KEY)? {
            bucket.put(AUTH_ENABLED, v).map_err(bolt_err)?;
        }
        // A new etcd store starts at auth revision 1, as raftstore's does.
        let revision = snap.get_cf(meta_cf, keys::AuthRevision::KEY)?.unwrap_or_else(|| 1u64.to_be_bytes().to_vec());
        bucket.put(AUTH_REVISION, revision).map_err(bolt_err)?;
    }
    for (name, prefix) in [(BUCKET_AUTH_USERS, keys::AUTH_USER_PREFIX), (BUCKET_AUTH_ROLES, keys::AUTH_ROLE_PREFIX)] {
        let mut bucket = tx.bucket_mut(name).ok_or_else(|| missing(name))?;
        for item in snap.iterator_cf(meta_cf, IteratorMode::From(prefix, rocksdb::Direction::Forward)) {
            let (k, v) = item?;
            let Some(entry) = k.strip_prefix(prefix) else { break };
            bucket.put(entry, v).map_err(bolt_err)?;
        }
    }
    if let Some(raw) = snap.get_cf(meta_cf, keys::Alarms::KEY)? {
        let mut bucket = tx.bucket_mut(BUCKET_ALARM).ok_or_else(|| missing(BUCKET_ALARM))?;
        for a in alarm::decode_alarms(&raw)? {
            bucket.put(alarm::member(&a).encode_to_vec(), []).map_err(bolt_err)?;
        }
    }
    Ok(())
}

/// Reads etcd's auth and alarm buckets into `meta` records of `batch`
/// (see [`write_auth_and_alarms`]); absent buckets leave auth off and no
/// alarm raised.
fn read_auth_and_alarms<'tx>(tx: &impl TxApi<'tx>, meta_cf: &rocksdb::ColumnFamily, batch: &mut rocksdb::WriteBatch) -> Result<()> {
    let corrupt = |what: String| Error::InvalidArgument(format!("corrupt etcd db: {what}"));
    if let Some(auth) = tx.bucket(BUCKET_AUTH) {
        if let Some(v) = auth.get(AUTH_ENABLED) {
            if v.len() != 1 {
                return Err(corrupt("authEnabled is not one byte".into()));
            }
            batch.put_cf(meta_cf, keys::AuthEnabled::KEY, v);
        }
        if let Some(v) = auth.get(AUTH_REVISION) {
            if v.len() != 8 {
                return Err(corrupt("authRevision is not 8 bytes".into()));
            }
            batch.put_cf(meta_cf, keys::AuthRevision::KEY, v);
        }
    }
    // Users and roles: each a protobuf whose name is its key.
    type NameOf = fn(&[u8]) -> std::result::Result<Vec<u8>, prost::DecodeError>;
    let user_name: NameOf = |v| crate::auth::User::decode(v).map(|u| u.name);
    let role_name: NameOf = |v| crate::auth::Role::decode(v).map(|r| r.name);
    type KeyOf = fn(&[u8]) -> Vec<u8>;
    let entries: [(&[u8], &str, NameOf, KeyOf); 2] = [(BUCKET_AUTH_USERS, "user", user_name, keys::auth_user_key), (BUCKET_AUTH_ROLES, "role", role_name, keys::auth_role_key)];
    for (bucket, what, name_of, key_of) in entries {
        let Some(bucket) = tx.bucket(bucket) else { continue };
        for (k, v) in bucket.iter_entries() {
            let name = name_of(v).map_err(|e| corrupt(format!("{what} {}: {e}", String::from_utf8_lossy(k))))?;
            if name != k {
                return Err(corrupt(format!("{what} {} stored under another name", String::from_utf8_lossy(&name))));
            }
            batch.put_cf(meta_cf, key_of(k), v);
        }
    }
    if let Some(bucket) = tx.bucket(BUCKET_ALARM) {
        let mut alarms = alarm::Alarms::new();
        for (k, _) in bucket.iter_entries() {
            let m = AlarmMember::decode(k).map_err(|e| corrupt(format!("alarm: {e}")))?;
            alarms.insert((m.member_id, m.alarm));
        }
        if !alarms.is_empty() {
            batch.put_cf(meta_cf, keys::Alarms::KEY, alarm::encode_alarms(&alarms));
        }
    }
    Ok(())
}

/// Copies the db part of an etcd snapshot file `file` to `out` (created or
/// truncated), checking the SHA-256 that follows it, as `etcdctl snapshot
/// restore` does: a file whose size is 32 bytes more than a multiple of 512
/// ends with the digest; one without a digest (a db copied from a data dir)
/// is taken only with `skip_hash_check`.
///
/// # Errors
/// [`Error::InvalidArgument`] on a digest mismatch or a missing digest;
/// I/O errors otherwise.
pub fn extract_db(file: &Path, out: &Path, skip_hash_check: bool) -> Result<()> {
    let mut src = std::fs::File::open(file).map_err(Error::internal)?;
    let len = src.metadata().map_err(Error::internal)?.len();
    let has_digest = len % 512 == DIGEST_LEN;
    if !has_digest && !skip_hash_check {
        return Err(Error::InvalidArgument("snapshot missing hash but --skip-hash-check=false".into()));
    }
    let db_len = if has_digest { len - DIGEST_LEN } else { len };
    let mut dst = std::fs::File::create(out).map_err(Error::internal)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = db_len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        src.read_exact(&mut buf[..n]).map_err(Error::internal)?;
        h.update(&buf[..n]);
        dst.write_all(&buf[..n]).map_err(Error::internal)?;
        left -= n as u64;
    }
    if has_digest && !skip_hash_check {
        let mut stored = [0u8; DIGEST_LEN as usize];
        src.read_exact(&mut stored).map_err(Error::internal)?;
        if stored != h.finalize().as_slice() {
            return Err(Error::InvalidArgument("snapshot checksum mismatch: the file is corrupt or truncated".into()));
        }
    }
    dst.sync_all().map_err(Error::internal)?;
    Ok(())
}

/// Whether the file at `path` starts like a bbolt file (its first meta page
/// carries bbolt's magic).
pub fn is_bolt_file(path: &Path) -> bool {
    std::fs::File::open(path).ok().and_then(|mut f| find_page_size(&mut f)).is_some()
}

/// Reads the meta page at byte `at`; `Some` if it is a valid one (bbolt's
/// magic, version 2, and a matching checksum).
fn read_meta(f: &mut std::fs::File, at: u64) -> Option<[u8; meta_page::END]> {
    let mut m = [0u8; meta_page::END];
    f.seek(SeekFrom::Start(at)).ok()?;
    f.read_exact(&mut m).ok()?;
    let valid = le_u32(&m, meta_page::MAGIC) == BOLT_MAGIC && le_u32(&m, meta_page::VERSION) == 2 && le_u64(&m, meta_page::CHECKSUM) == fnv1a64(&m[meta_page::MAGIC..meta_page::CHECKSUM]);
    valid.then_some(m)
}

/// The page size of a bbolt file: from its first meta page, or, when that
/// one is damaged, from the second, looked for where each page size would
/// put it (bbolt falls back to the second meta page as well).
fn find_page_size(f: &mut std::fs::File) -> Option<u64> {
    let ok = |m: &[u8; meta_page::END]| {
        let size = u64::from(le_u32(m, meta_page::PAGE_SIZE));
        ((512..=1 << 16).contains(&size) && size.is_power_of_two()).then_some(size)
    };
    if let Some(size) = read_meta(f, 0).as_ref().and_then(ok) {
        return Some(size);
    }
    [4096u64, 512, 1024, 2048, 8192, 16384, 32768, 65536].into_iter().find(|&size| read_meta(f, size).as_ref().and_then(ok) == Some(size))
}

/// FNV-1a, 64 bits: bbolt's meta page checksum.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Byte offsets inside a meta page: the page header is 16 bytes, then
/// magic, version, page size and flags (u32 each), the root bucket (root
/// page and sequence, u64 each), the freelist page, the high-water mark,
/// the txid and the checksum of everything from the magic up to it (u64s,
/// all little-endian).
mod meta_page {
    pub const MAGIC: usize = 16;
    pub const VERSION: usize = 20;
    pub const PAGE_SIZE: usize = 24;
    pub const ROOT: usize = 32;
    pub const FREELIST: usize = 48;
    pub const PGID: usize = 56;
    pub const TXID: usize = 64;
    pub const CHECKSUM: usize = 72;
    pub const END: usize = 80;
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Checks the meta pages of the bbolt file at `path` and makes it readable
/// by bbolt-rs, which refuses a file whose freelist is not stored in it
/// ("PGID_NO_FREE_LIST not currently supported", even read-only): etcd
/// 3.4 on Linux writes every db, and so every snapshot, that way. The file
/// (a private copy) gets an empty freelist page at its end, and each valid
/// meta page points at it. Only reading follows, which never consults the
/// freelist, so an empty one loses nothing.
///
/// # Errors
/// [`Error::InvalidArgument`] if no meta page is valid (not a bbolt file,
/// or corrupt); I/O errors otherwise.
fn prepare_for_reading(path: &Path) -> Result<()> {
    let corrupt = |why: &str| Error::InvalidArgument(format!("not a valid etcd db: {why}"));
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path).map_err(Error::internal)?;
    let len = f.metadata().map_err(Error::internal)?.len();
    let page_size = find_page_size(&mut f).ok_or_else(|| corrupt("no valid meta page"))?;
    if len < 2 * page_size {
        return Err(corrupt("too short"));
    }
    let mut metas = Vec::new();
    for id in 0..2u64 {
        if let Some(m) = read_meta(&mut f, id * page_size) {
            if le_u64(&m, meta_page::PGID).saturating_mul(page_size) > len {
                return Err(corrupt("truncated (the meta page's high-water mark is past the end of the file)"));
            }
            metas.push((id, m));
        }
    }
    // bbolt reads the valid meta page with the newest txid.
    let newest = metas.iter().max_by_key(|(_, m)| le_u64(m, meta_page::TXID)).map(|(_, m)| *m).ok_or_else(|| corrupt("no valid meta page"))?;
    check_tree(&mut f, page_size, le_u64(&newest, meta_page::PGID), le_u64(&newest, meta_page::ROOT))?;
    if let [(1, m)] = metas[..] {
        // Only the second meta page is valid: bbolt uses it; bbolt-rs
        // reads the first, so the private copy gets it there too (the page
        // header's id aside, a meta page does not say where it is).
        let mut page0 = [0u8; meta_page::END];
        page0.copy_from_slice(&m);
        page0[..8].copy_from_slice(&0u64.to_le_bytes());
        f.seek(SeekFrom::Start(0)).map_err(Error::internal)?;
        f.write_all(&page0).map_err(Error::internal)?;
        metas.push((0, page0));
    }
    if metas.iter().all(|(_, m)| le_u64(m, meta_page::FREELIST) != NO_FREELIST) {
        f.sync_all().map_err(Error::internal)?;
        return Ok(());
    }
    let free = len.div_ceil(page_size);
    let mut page = vec![0u8; page_size as usize];
    page[..8].copy_from_slice(&free.to_le_bytes());
    page[8..10].copy_from_slice(&FREELIST_PAGE_FLAG.to_le_bytes());
    f.seek(SeekFrom::Start(free * page_size)).map_err(Error::internal)?;
    f.write_all(&page).map_err(Error::internal)?;
    for (id, mut m) in metas {
        m[meta_page::FREELIST..meta_page::FREELIST + 8].copy_from_slice(&free.to_le_bytes());
        m[meta_page::PGID..meta_page::PGID + 8].copy_from_slice(&(free + 1).to_le_bytes());
        let sum = fnv1a64(&m[meta_page::MAGIC..meta_page::CHECKSUM]);
        m[meta_page::CHECKSUM..meta_page::END].copy_from_slice(&sum.to_le_bytes());
        f.seek(SeekFrom::Start(id * page_size)).map_err(Error::internal)?;
        f.write_all(&m).map_err(Error::internal)?;
    }
    f.sync_all().map_err(Error::internal)?;
    Ok(())
}

/// Walks the bbolt tree from the root bucket's page `root` and checks
/// every page and element against the bounds bbolt-rs reads without
/// checking: page ids under the high-water mark `pages` (and not a meta
/// page), a page's header naming its own id, elements and the keys and
/// values they point at inside their page (overflow pages included),
/// nested buckets (on their own pages or inline in a value) likewise, and
/// no page reached twice. A corrupt file then fails here with an error
/// instead of making bbolt-rs read outside its map.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the first bad page.
fn check_tree(f: &mut std::fs::File, page_size: u64, pages: u64, root: u64) -> Result<()> {
    const BRANCH: u16 = 0x01;
    const LEAF: u16 = 0x02;
    const BUCKET_LEAF: u32 = 0x01;
    const HEADER: usize = 16;
    const ELEMENT: usize = 16;
    let corrupt = |why: String| Error::InvalidArgument(format!("corrupt etcd db: {why}"));
    let mut seen = std::collections::HashSet::new();
    // Pages (or inline pages) still to check: the bytes of each come from
    // `Page(id)` or are carried along.
    enum Todo {
        Page(u64),
        Inline(Vec<u8>),
    }
    let mut todo = vec![Todo::Page(root)];
    while let Some(next) = todo.pop() {
        let (id, buf) = match next {
            Todo::Page(id) => {
                if id < 2 || id >= pages || !seen.insert(id) {
                    return Err(corrupt(format!("page {id} is out of range or reached twice")));
                }
                let mut head = [0u8; HEADER];
                f.seek(SeekFrom::Start(id * page_size)).map_err(Error::internal)?;
                f.read_exact(&mut head).map_err(|_| corrupt(format!("page {id} is past the end")))?;
                let overflow = u64::from(le_u32(&head, 12));
                if le_u64(&head, 0) != id || id + overflow >= pages {
                    return Err(corrupt(format!("page {id} has a bad header")));
                }
                let mut buf = vec![0u8; ((overflow + 1) * page_size) as usize];
                f.seek(SeekFrom::Start(id * page_size)).map_err(Error::internal)?;
                f.read_exact(&mut buf).map_err(|_| corrupt(format!("page {id} is past the end")))?;
                (id.to_string(), buf)
            }
            Todo::Inline(buf) => ("inline".to_string(), buf),
        };
        if buf.len() < HEADER {
            return Err(corrupt(format!("page {id} is too short")));
        }
        let flags = u16::from_le_bytes([buf[8], buf[9]]);
        let count = usize::from(u16::from_le_bytes([buf[10], buf[11]]));
        if HEADER + count * ELEMENT > buf.len() || (flags != BRANCH && flags != LEAF) || (flags == BRANCH && count == 0) {
            return Err(corrupt(format!("page {id} is neither a branch nor a leaf, or its elements overrun it")));
        }
        for i in 0..count {
            let at = HEADER + i * ELEMENT;
            // Keys and values lie at the element's offset plus `pos`.
            let span = |pos: u32, len: u64| -> Result<std::ops::Range<usize>> {
                let start = at as u64 + u64::from(pos);
                let end = start + len;
                if end > buf.len() as u64 {
                    return Err(corrupt(format!("page {id}: element {i} points past the page")));
                }
                Ok(start as usize..end as usize)
            };
            if flags == BRANCH {
                span(le_u32(&buf, at), u64::from(le_u32(&buf, at + 4)))?;
                todo.push(Todo::Page(le_u64(&buf, at + 8)));
            } else {
                let (elem_flags, pos, ksize, vsize) = (le_u32(&buf, at), le_u32(&buf, at + 4), u64::from(le_u32(&buf, at + 8)), u64::from(le_u32(&buf, at + 12)));
                let value = span(pos, ksize + vsize)?;
                if elem_flags & BUCKET_LEAF != 0 {
                    let value = &buf[value.start + ksize as usize..value.end];
                    if value.len() < 16 {
                        return Err(corrupt(format!("page {id}: bucket {i} is too short")));
                    }
                    match le_u64(value, 0) {
                        0 => todo.push(Todo::Inline(value[16..].to_vec())),
                        page => todo.push(Todo::Page(page)),
                    }
                }
            }
        }
    }
    Ok(())
}

/// Reads the etcd db at `path` (a private copy without the digest, as
/// [`extract_db`] makes; it may be modified) into the state-machine column
/// families of `db`, which must be empty: the history into `kv`, the leases
/// into `lease`, and the current and compacted revisions into `meta`.
///
/// # Errors
/// [`Error::InvalidArgument`] if the file is not a valid etcd db (a bad
/// revision key or value, a missing `key` bucket); I/O, bbolt or RocksDB
/// errors otherwise.
pub fn load_db(path: &Path, db: &DB) -> Result<Summary> {
    prepare_for_reading(path)?;
    // bbolt-rs trusts its input once the meta pages check out; a corrupt
    // page deeper in makes it panic rather than fail. Turn that into an
    // error: the caller removes what was written.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load_checked(path, db)));
    read.unwrap_or_else(|_| Err(Error::InvalidArgument("corrupt etcd db: its pages do not form a valid bbolt tree".into())))
}

fn load_checked(path: &Path, db: &DB) -> Result<Summary> {
    let corrupt = |what: String| Error::InvalidArgument(format!("corrupt etcd db: {what}"));
    let (kv_cf, meta_cf, lease_cf) = (cf(db, keys::CF_KV)?, cf(db, keys::CF_META)?, cf(db, keys::CF_LEASE)?);
    let bolt = bbolt_rs::Bolt::open_ro(path).map_err(|e| Error::InvalidArgument(format!("not a valid etcd db: {e}")))?;
    let tx = bolt.begin().map_err(bolt_err)?;
    let mut summary = Summary { size: tx.size(), ..Summary::default() };
    let history = tx.bucket(BUCKET_KEY).ok_or_else(|| corrupt("no `key` bucket".into()))?;
    let mut batch = rocksdb::WriteBatch::default();
    let mut last_main = 0;
    for (k, v) in history.iter_entries() {
        let (rev, tombstone) = parse_revision_key(k)?;
        let kv = KeyValue::decode(v).map_err(|e| corrupt(format!("value at revision {}: {e}", rev.main)))?;
        if kv.key.is_empty() || rev.main < 1 || rev.sub < 0 {
            return Err(corrupt(format!("entry at revision {}/{}", rev.main, rev.sub)));
        }
        batch.put_cf(kv_cf, keys::kv_key(rev, tombstone), v);
        summary.revisions += 1;
        last_main = rev.main;
        if batch.len() >= 10_000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    if let Some(leases) = tx.bucket(BUCKET_LEASE) {
        for (k, v) in leases.iter_entries() {
            let lease = LeasePb::decode(v).map_err(|e| corrupt(format!("lease {k:?}: {e}")))?;
            if be_i64(k)? != lease.id {
                return Err(corrupt(format!("lease {:x} stored under another ID", lease.id)));
            }
            batch.put_cf(lease_cf, keys::i64_bytes(lease.id), keys::i64_bytes(lease.ttl));
            summary.leases += 1;
        }
    }
    // A mark is absent until the first compaction; -1 then, as raftstore
    // keeps "never compacted".
    let revision_of = |key: &[u8]| -> Result<i64> {
        match tx.bucket(BUCKET_META).and_then(|m| m.get(key).map(<[u8]>::to_vec)) {
            Some(v) => Ok(parse_revision_key(&v)?.0.main),
            None => Ok(-1),
        }
    };
    let finished = revision_of(META_FINISHED_COMPACT)?;
    let compact = revision_of(META_SCHEDULED_COMPACT)?.max(finished);
    if compact >= 0 {
        // A compaction etcd had scheduled but not finished deleting is
        // resumed by raftstore when it opens the store.
        batch.put_cf(meta_cf, keys::CompactRevision::KEY, keys::i64_bytes(compact));
        batch.put_cf(meta_cf, keys::FinishedCompactRevision::KEY, keys::i64_bytes(finished));
    }
    read_auth_and_alarms(&tx, meta_cf, &mut batch)?;
    summary.compact_revision = compact;
    // etcd's rule: the newest revision in the history, or the compaction
    // if that removed the newest ones.
    summary.revision = last_main.max(compact).max(1);
    batch.put_cf(meta_cf, keys::CurrentRevision::KEY, keys::i64_bytes(summary.revision));
    db.write(batch)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::mvcc::MvccStore;
    use proto::etcdserverpb::{CompactionRequest, DeleteRangeRequest, LeaseGrantRequest, PutRequest, RangeRequest, RequestOp, RequestOpRequest, TxnRequest};

    fn ok<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    fn apply(s: &MvccStore, c: Command) {
        ok(s.apply(&c, |_| Ok(())));
    }

    fn put(key: &str, value: &str, lease: i64) -> Command {
        Command::Put(PutRequest { key: key.into(), value: value.into(), lease, ..Default::default() })
    }

    /// A store with overwrites, a txn of several changes, deletions, a
    /// compaction and a lease.
    fn sample(dir: &Path) -> MvccStore {
        let s = ok(MvccStore::open(ok(crate::storage::open(dir)), 1));
        apply(&s, Command::LeaseGrant(LeaseGrantRequest { id: 77, ttl: 600 }));
        apply(&s, put("/a", "1", 0));
        apply(&s, put("/b", "1", 0));
        apply(&s, put("/a", "2", 0));
        apply(&s, Command::DeleteRange(DeleteRangeRequest { key: b"/b".to_vec(), ..Default::default() }));
        apply(&s, Command::Compact(CompactionRequest { revision: 4, physical: true }));
        let op = |k: &str, v: &str| RequestOp { request: Some(RequestOpRequest::RequestPut(PutRequest { key: k.into(), value: v.into(), ..Default::default() })) };
        apply(&s, Command::Txn(TxnRequest { success: vec![op("/c", "1"), op("/d", "1")], ..Default::default() }));
        apply(&s, put("/leased", "x", 77));
        apply(&s, put("/a", "3", 0));
        s
    }

    fn everything(s: &MvccStore, revision: i64) -> Vec<KeyValue> {
        ok(s.range(&RangeRequest { key: vec![0], range_end: vec![0], revision, ..Default::default() })).kvs
    }

    #[test]
    fn revision_keys_are_etcds() {
        let k = revision_key(Revision::new(0x0102, 3), false);
        assert_eq!(k, [0, 0, 0, 0, 0, 0, 1, 2, b'_', 0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(ok(parse_revision_key(&k)), (Revision::new(0x0102, 3), false));
        let t = revision_key(Revision::new(9, 0), true);
        assert_eq!((t.len(), t[17]), (18, b't'));
        assert_eq!(ok(parse_revision_key(&t)), (Revision::new(9, 0), true));
        assert!(parse_revision_key(&k[..16]).is_err());
        let mut bad = t.clone();
        bad[17] = b'x';
        assert!(parse_revision_key(&bad).is_err());
        bad = k.clone();
        bad[8] = b'-';
        assert!(parse_revision_key(&bad).is_err());
    }

    /// raftstore → etcd db → raftstore keeps the history after the
    /// compaction, every key's revisions and version, the lease and its
    /// key, and the current and compacted revisions; the file is whole
    /// pages, nothing past bbolt's high-water mark.
    #[test]
    fn a_written_db_loads_back_with_the_same_history() {
        let tmp = ok(tempfile::tempdir());
        let src = sample(&tmp.path().join("src"));
        let file = tmp.path().join("snap.db");
        let written = ok(write_db(src.db(), &file));
        assert_eq!(written.revision, src.current_revision());
        assert_eq!(written.compact_revision, 4);
        assert_eq!(written.leases, 1);
        let len = ok(std::fs::metadata(&file)).len();
        assert_eq!(len, written.size);
        assert_eq!(len % PAGE_SIZE as u64, 0);
        assert!(len <= 8 * PAGE_SIZE as u64, "{len} bytes for a handful of keys");

        let dst_db = ok(crate::storage::open(&tmp.path().join("dst")));
        let loaded = ok(load_db(&file, &dst_db));
        assert_eq!((loaded.revision, loaded.compact_revision, loaded.revisions, loaded.leases), (written.revision, 4, written.revisions, 1));
        let dst = ok(MvccStore::open(dst_db, 1));
        assert_eq!(dst.current_revision(), src.current_revision());
        assert_eq!(dst.compact_revision(), 4);
        for rev in 4..=src.current_revision() {
            assert_eq!(everything(&dst, rev), everything(&src, rev), "at revision {rev}");
        }
        assert!(matches!(dst.range(&RangeRequest { key: b"/a".to_vec(), revision: 3, ..Default::default() }), Err(Error::Compacted)));
        assert_eq!(dst.leases(), vec![(77, 600)]);
        assert_eq!(dst.lease(77).map(|l| l.keys.into_iter().collect::<Vec<_>>()), Some(vec![b"/leased".to_vec()]));
    }

    /// A history written in many bbolt transactions (as a large store is)
    /// loads back the same, and the pages that the commits in between
    /// freed are reused: the file is barely larger than one written at once.
    #[test]
    fn a_db_written_in_many_transactions_is_the_same_and_compact() {
        let tmp = ok(tempfile::tempdir());
        let src = ok(MvccStore::open(ok(crate::storage::open(&tmp.path().join("src"))), 1));
        for i in 0..3000 {
            apply(&src, put(&format!("/k/{:05}", i % 2000), &format!("{i:0>200}"), 0));
        }
        let (once, steps) = (tmp.path().join("once.db"), tmp.path().join("steps.db"));
        let at_once = ok(write_db(src.db(), &once));
        let in_steps = ok(write_db_in_steps(src.db(), &steps, 16 << 10));
        assert_eq!((in_steps.revision, in_steps.revisions, in_steps.compact_revision), (at_once.revision, 3000, -1));
        assert!(at_once.size >= 3000 * 200, "{at_once:?}");
        assert!(in_steps.size <= at_once.size + 16 * PAGE_SIZE as u64, "{} bytes in steps, {} at once", in_steps.size, at_once.size);
        assert!(at_once.size <= 3000 * 300, "{at_once:?} for 3000 values of 200 bytes");
        let dst_db = ok(crate::storage::open(&tmp.path().join("dst")));
        ok(load_db(&steps, &dst_db));
        let dst = ok(MvccStore::open(dst_db, 1));
        assert_eq!(dst.compact_revision(), -1, "never compacted stays so");
        assert_eq!(everything(&dst, 0), everything(&src, 0));
        assert_eq!(everything(&dst, 1500), everything(&src, 1500));
    }

    /// etcd 3.4 stores no freelist in its files; such a file (made here by
    /// rewriting the meta pages of a written one as etcd's look) still
    /// loads.
    #[test]
    fn a_db_without_a_stored_freelist_loads() {
        let tmp = ok(tempfile::tempdir());
        let src = sample(&tmp.path().join("src"));
        let file = tmp.path().join("snap.db");
        ok(write_db(src.db(), &file));
        let mut bytes = ok(std::fs::read(&file));
        for id in 0..2 {
            let m = &mut bytes[id * PAGE_SIZE..id * PAGE_SIZE + meta_page::END];
            m[meta_page::FREELIST..meta_page::FREELIST + 8].copy_from_slice(&NO_FREELIST.to_le_bytes());
            let sum = fnv1a64(&m[meta_page::MAGIC..meta_page::CHECKSUM]);
            m[meta_page::CHECKSUM..].copy_from_slice(&sum.to_le_bytes());
        }
        ok(std::fs::write(&file, &bytes));
        let dst_db = ok(crate::storage::open(&tmp.path().join("dst")));
        ok(load_db(&file, &dst_db));
        let dst = ok(MvccStore::open(dst_db, 1));
        assert_eq!(everything(&dst, 0), everything(&src, 0));
    }

    #[test]
    fn the_digest_is_checked_and_garbage_is_refused() {
        let tmp = ok(tempfile::tempdir());
        let src = sample(&tmp.path().join("src"));
        let db_file = tmp.path().join("snap.db");
        ok(write_db(src.db(), &db_file));
        let db_bytes = ok(std::fs::read(&db_file));
        let mut snapshot = db_bytes.clone();
        snapshot.extend_from_slice(&Sha256::digest(&db_bytes));
        assert_eq!(snapshot.len() as u64 % 512, DIGEST_LEN, "etcd's rule for a file with a digest");
        let file = tmp.path().join("snapshot");
        let out = tmp.path().join("out.db");
        ok(std::fs::write(&file, &snapshot));
        ok(extract_db(&file, &out, false));
        assert_eq!(ok(std::fs::read(&out)), db_bytes);
        // A flipped byte in the db fails the digest.
        let mut bad = snapshot.clone();
        bad[PAGE_SIZE * 3 + 100] ^= 1;
        ok(std::fs::write(&file, &bad));
        assert!(matches!(extract_db(&file, &out, false), Err(Error::InvalidArgument(m)) if m.contains("checksum mismatch")));
        // A bare db has no digest: refused unless the check is skipped.
        assert!(matches!(extract_db(&db_file, &out, false), Err(Error::InvalidArgument(m)) if m.contains("--skip-hash-check")));
        ok(extract_db(&db_file, &out, true));
        // Not a bbolt file at all.
        ok(std::fs::write(&out, vec![7u8; 3 * PAGE_SIZE]));
        assert!(!is_bolt_file(&out));
        let dst_db = ok(crate::storage::open(&tmp.path().join("dst")));
        assert!(matches!(load_db(&out, &dst_db), Err(Error::InvalidArgument(_))));
        assert!(is_bolt_file(&db_file));
    }

    /// Eight bytes of 0xff written over each 8-byte-aligned spot of every
    /// page past the metas (an offset, a size or a page id, wherever they
    /// fall) never crash the reader: each file either loads or is refused
    /// with an error. Without the tree check such a file made bbolt-rs read
    /// outside its map (a segfault, which no `catch_unwind` can stop).
    #[test]
    fn damaged_pages_are_refused_not_read_outside_the_file() {
        let tmp = ok(tempfile::tempdir());
        let src = sample(&tmp.path().join("src"));
        let file = tmp.path().join("snap.db");
        ok(write_db(src.db(), &file));
        let clean = ok(std::fs::read(&file));
        let mut refused = 0;
        for (n, at) in (2 * PAGE_SIZE..clean.len() - 8).step_by(8).filter(|at| at % PAGE_SIZE < 256).enumerate() {
            let mut bytes = clean.clone();
            bytes[at..at + 8].fill(0xff);
            let copy = tmp.path().join("damaged.db");
            ok(std::fs::write(&copy, &bytes));
            let dst = ok(crate::storage::open(&tmp.path().join(format!("dst{n}"))));
            refused += usize::from(load_db(&copy, &dst).is_err());
        }
        assert!(refused > 0, "some damage must be noticed");
    }

    /// A file whose first meta page is damaged loads from the second, as
    /// bbolt does.
    #[test]
    fn the_second_meta_page_stands_in_for_a_damaged_first() {
        let tmp = ok(tempfile::tempdir());
        let src = sample(&tmp.path().join("src"));
        let file = tmp.path().join("snap.db");
        ok(write_db(src.db(), &file));
        let mut bytes = ok(std::fs::read(&file));
        bytes[..PAGE_SIZE].fill(0);
        ok(std::fs::write(&file, &bytes));
        assert!(is_bolt_file(&file));
        let dst_db = ok(crate::storage::open(&tmp.path().join("dst")));
        ok(load_db(&file, &dst_db));
        let dst = ok(MvccStore::open(dst_db, 1));
        assert_eq!(everything(&dst, 0), everything(&src, 0));
    }
}
