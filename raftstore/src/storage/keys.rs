//! Every column family and key encoding on disk, in one place.
//!
//! | column family | key | value |
//! |---|---|---|
//! | `kv` | revision (16 B, big-endian main+sub) + kind byte (`p` put, `t` tombstone) | `mvccpb.KeyValue`, protobuf |
//! | `meta` | typed keys below | see each key |
//! | `meta` | `auth/user/` + name | `authpb.User`, protobuf (password: bcrypt hash) |
//! | `meta` | `auth/role/` + name | `authpb.Role`, protobuf |
//! | `lease` | lease ID, 8 B big-endian | granted TTL in seconds, 8 B big-endian |
//! | `raft_log` | log index, 8 B big-endian | postcard-encoded openraft entry |
//! | `raft_state` | typed keys below | postcard-encoded vote / log ids |

use crate::error::{Error, Result};
use crate::mvcc::revision::{Revision, REVISION_BYTES};

/// MVCC history: revision → key-value (etcd's `key` bucket).
pub const CF_KV: &str = "kv";
/// State-machine metadata: applied log id, membership, compact revision.
pub const CF_META: &str = "meta";
/// Leases: ID → granted TTL.
pub const CF_LEASE: &str = "lease";
/// The Raft log.
pub const CF_RAFT_LOG: &str = "raft_log";
/// Raft vote, committed and purged log ids.
pub const CF_RAFT_STATE: &str = "raft_state";

/// All column families, in creation order.
pub const ALL_CFS: [&str; 5] = [CF_KV, CF_META, CF_LEASE, CF_RAFT_LOG, CF_RAFT_STATE];

/// Column families that make up the state machine (what a snapshot carries).
pub const STATE_MACHINE_CFS: [&str; 3] = [CF_KV, CF_META, CF_LEASE];

const KIND_PUT: u8 = b'p';
const KIND_TOMBSTONE: u8 = b't';

/// Encodes a `kv` key: the revision, then whether it is a tombstone.
pub fn kv_key(rev: Revision, tombstone: bool) -> [u8; REVISION_BYTES + 1] {
    let mut k = [0u8; REVISION_BYTES + 1];
    k[..REVISION_BYTES].copy_from_slice(&rev.to_bytes());
    k[REVISION_BYTES] = if tombstone { KIND_TOMBSTONE } else { KIND_PUT };
    k
}

/// Decodes a `kv` key into (revision, is_tombstone).
///
/// # Errors
/// [`Error::Internal`] on a key of the wrong length or kind (corrupt data).
pub fn decode_kv_key(k: &[u8]) -> Result<(Revision, bool)> {
    if k.len() != REVISION_BYTES + 1 {
        return Err(Error::internal(format!("corrupt kv key of {} bytes", k.len())));
    }
    let rev = Revision::from_bytes(k)?;
    match k[REVISION_BYTES] {
        KIND_PUT => Ok((rev, false)),
        KIND_TOMBSTONE => Ok((rev, true)),
        other => Err(Error::internal(format!("corrupt kv key kind {other}"))),
    }
}

/// The smallest `kv` key at or after `main` revision.
pub fn kv_seek(main: i64) -> [u8; REVISION_BYTES] {
    Revision::new(main, 0).to_bytes()
}

/// A typed metadata key: the key bytes and the type stored under it.
pub trait MetaKey {
    /// Key bytes in its column family.
    const KEY: &'static [u8];
    /// The value's type.
    type Value;
}

/// `meta`: the last applied log id (postcard `Option<LogId>`).
pub struct AppliedLogId;
impl MetaKey for AppliedLogId {
    const KEY: &'static [u8] = b"applied_log_id";
    type Value = Vec<u8>;
}

/// `meta`: the last applied membership (postcard `StoredMembership`).
pub struct LastMembership;
impl MetaKey for LastMembership {
    const KEY: &'static [u8] = b"last_membership";
    type Value = Vec<u8>;
}

/// `meta`: the compacted revision (8 B big-endian i64).
pub struct CompactRevision;
impl MetaKey for CompactRevision {
    const KEY: &'static [u8] = b"compact_revision";
    type Value = i64;
}

/// `meta`: the compact revision whose history is deleted from disk too
/// (8 B big-endian i64; etcd's `finishedCompactRev`). Behind
/// [`CompactRevision`] while the compaction thread is deleting.
pub struct FinishedCompactRevision;
impl MetaKey for FinishedCompactRevision {
    const KEY: &'static [u8] = b"finished_compact_revision";
    type Value = i64;
}

/// `meta`: the current revision, kept so that a store whose newest entries
/// were all compacted away still knows its revision (8 B big-endian i64).
pub struct CurrentRevision;
impl MetaKey for CurrentRevision {
    const KEY: &'static [u8] = b"current_revision";
    type Value = i64;
}

/// `raft_state`: the cluster ID (8 B big-endian u64), fixed at first start.
pub struct ClusterId;
impl MetaKey for ClusterId {
    const KEY: &'static [u8] = b"cluster_id";
    type Value = u64;
}

/// `raft_state`: this member's ID (8 B big-endian u64), fixed at first start
/// so that a restart with other URLs keeps its Raft identity.
pub struct MemberId;
impl MetaKey for MemberId {
    const KEY: &'static [u8] = b"member_id";
    type Value = u64;
}

/// `meta`: the raised alarms, 12 B each: member ID (8 B big-endian u64)
/// and alarm type (4 B big-endian i32, etcd's `AlarmType`).
pub struct Alarms;
impl MetaKey for Alarms {
    const KEY: &'static [u8] = b"alarms";
    type Value = Vec<u8>;
}

/// `meta`: prefix of published member attributes; key = prefix + member ID
/// (8 B big-endian), value = protobuf `etcdserverpb.Member`.
pub const MEMBER_ATTR_PREFIX: &[u8] = b"member/";

/// `meta` key of one member's published attributes.
pub fn member_attr_key(id: u64) -> Vec<u8> {
    let mut k = MEMBER_ATTR_PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `meta`: whether auth is enabled (1 byte: 1 yes, 0 no; absent: no).
pub struct AuthEnabled;
impl MetaKey for AuthEnabled {
    const KEY: &'static [u8] = b"auth/enabled";
    type Value = bool;
}

/// `meta`: the auth revision (8 B big-endian u64; absent: 1, as a new etcd
/// store starts at 1).
pub struct AuthRevision;
impl MetaKey for AuthRevision {
    const KEY: &'static [u8] = b"auth/revision";
    type Value = u64;
}

/// `meta`: prefix of auth users; key = prefix + user name.
pub const AUTH_USER_PREFIX: &[u8] = b"auth/user/";
/// `meta`: prefix of auth roles; key = prefix + role name.
pub const AUTH_ROLE_PREFIX: &[u8] = b"auth/role/";

/// `meta` key of a user.
pub fn auth_user_key(name: &[u8]) -> Vec<u8> {
    [AUTH_USER_PREFIX, name].concat()
}

/// `meta` key of a role.
pub fn auth_role_key(name: &[u8]) -> Vec<u8> {
    [AUTH_ROLE_PREFIX, name].concat()
}

/// `raft_state`: the vote (postcard).
pub struct Vote;
impl MetaKey for Vote {
    const KEY: &'static [u8] = b"vote";
    type Value = Vec<u8>;
}

/// `raft_state`: the committed log id (postcard `Option<LogId>`).
pub struct Committed;
impl MetaKey for Committed {
    const KEY: &'static [u8] = b"committed";
    type Value = Vec<u8>;
}

/// `raft_state`: the last purged log id (postcard `LogId`).
pub struct LastPurged;
impl MetaKey for LastPurged {
    const KEY: &'static [u8] = b"last_purged";
    type Value = Vec<u8>;
}

/// Encodes an i64 big-endian.
pub fn i64_bytes(v: i64) -> [u8; 8] {
    v.to_be_bytes()
}

/// Decodes a big-endian i64.
///
/// # Errors
/// [`Error::Internal`] if `b` is not 8 bytes.
pub fn decode_i64(b: &[u8]) -> Result<i64> {
    let arr: [u8; 8] = b.try_into().map_err(|_| Error::internal(format!("corrupt i64 of {} bytes", b.len())))?;
    Ok(i64::from_be_bytes(arr))
}

/// Decodes a big-endian u64.
///
/// # Errors
/// [`Error::Internal`] if `b` is not 8 bytes.
pub fn decode_u64(b: &[u8]) -> Result<u64> {
    let arr: [u8; 8] = b.try_into().map_err(|_| Error::internal(format!("corrupt u64 of {} bytes", b.len())))?;
    Ok(u64::from_be_bytes(arr))
}

/// `raft_log` key of a log index.
pub fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_keys_round_trip_and_reject_garbage() {
        let r = Revision::new(7, 2);
        assert_eq!(decode_kv_key(&kv_key(r, false)).ok(), Some((r, false)));
        assert_eq!(decode_kv_key(&kv_key(r, true)).ok(), Some((r, true)));
        assert!(decode_kv_key(b"short").is_err());
        let mut bad = kv_key(r, false);
        bad[16] = b'x';
        assert!(decode_kv_key(&bad).is_err());
        assert!(kv_key(Revision::new(7, 2), true) < kv_key(Revision::new(7, 3), false));
        assert!(decode_i64(&[1, 2]).is_err());
    }

    #[test]
    fn meta_keys_are_distinct() {
        let keys = [AppliedLogId::KEY, LastMembership::KEY, CompactRevision::KEY, FinishedCompactRevision::KEY, CurrentRevision::KEY, AuthEnabled::KEY, AuthRevision::KEY];
        for (i, a) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|b| a != b), "{:?}", String::from_utf8_lossy(a));
            assert!(!a.starts_with(MEMBER_ATTR_PREFIX));
            assert!(!a.starts_with(AUTH_USER_PREFIX) && !a.starts_with(AUTH_ROLE_PREFIX));
            assert_eq!(decode_i64(&i64_bytes(-(i as i64))).ok(), Some(-(i as i64)));
        }
        assert_eq!(auth_user_key(b"u"), b"auth/user/u".to_vec());
        assert_eq!(auth_role_key(b"r"), b"auth/role/r".to_vec());
    }
}
