//! Commands replicated through the Raft log, and their responses.
//!
//! A command is one modifying etcd request. On the wire (log entries and
//! forwarded requests) a command is one tag byte followed by the protobuf
//! encoding of the etcd request message, so the log holds etcd's own request
//! bytes (as etcd's `InternalRaftRequest` does).
//!
//! A txn and its response are decoded by [`proto::nested_txn`], not by
//! prost, so that a txn nested deeper than prost's recursion limit (about
//! 50 levels) but within etcd's op budget survives the log; they may nest
//! [`MAX_TXN_DEPTH`] levels at most.

use prost::Message;
use proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    Member, PutRequest, PutResponse, TxnRequest, TxnResponse,
};
use proto::nested_txn;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::auth::command::{decode_authed, encode_authed, AuthHeader};
use crate::auth::{AuthCommand, AuthReply};
use crate::error::Error;

/// A modifying request, applied by every member in log order.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// etcd `KV.Put`.
    Put(PutRequest),
    /// etcd `KV.DeleteRange`.
    DeleteRange(DeleteRangeRequest),
    /// etcd `KV.Txn`.
    Txn(TxnRequest),
    /// etcd `KV.Compact`.
    Compact(CompactionRequest),
    /// etcd `Lease.LeaseGrant`; `id` is always set (the proposer picks one).
    LeaseGrant(LeaseGrantRequest),
    /// etcd `Lease.LeaseRevoke`, from a client or from lease expiry.
    LeaseRevoke(LeaseRevokeRequest),
    /// A member publishes its name and client URLs at start (etcd publishes
    /// its member attributes the same way). Takes no revision.
    PublishMember(Member),
    /// etcd `Maintenance.Alarm`: get, activate or deactivate an alarm.
    /// Every action goes through the log, as in etcd, so a GET sees every
    /// alarm raised before it. Takes no revision.
    Alarm(AlarmRequest),
    /// An auth change (etcd's `Auth` service); see [`crate::auth`].
    Auth(AuthCommand),
    /// A client's command with the client's identity, checked against the
    /// auth state when applied (etcd's `RequestHeader.username` and
    /// `auth_revision`). Commands without one come from the server itself
    /// (lease expiry, auto compaction, member attributes) and are not
    /// checked.
    Authed(AuthHeader, Box<Command>),
}

/// The result of applying a [`Command`].
#[derive(Debug, Clone, PartialEq)]
pub enum CommandResponse {
    /// Reply to [`Command::Put`].
    Put(PutResponse),
    /// Reply to [`Command::DeleteRange`].
    DeleteRange(DeleteRangeResponse),
    /// Reply to [`Command::Txn`].
    Txn(TxnResponse),
    /// Reply to [`Command::Compact`].
    Compact(CompactionResponse),
    /// Reply to [`Command::LeaseGrant`].
    LeaseGrant(LeaseGrantResponse),
    /// Reply to [`Command::LeaseRevoke`].
    LeaseRevoke(LeaseRevokeResponse),
    /// Reply to [`Command::Alarm`].
    Alarm(AlarmResponse),
    /// Reply to [`Command::Auth`].
    Auth(AuthReply),
    /// The command was rejected when applied (e.g. unknown lease); nothing
    /// changed.
    Error(Error),
    /// A blank or membership entry: nothing for a client.
    Empty,
}

/// The most levels a txn may nest (a txn without nested txns is 1 deep),
/// wherever it is decoded: in a client's request, in the log and in a
/// response.
///
/// etcd has no such limit, only its op budget (`--max-txn-ops`, 128 by
/// default): a nested txn may spend what its parents left, so a chain of
/// single-op txns 128 deep passes, and 129 with an empty txn innermost. This
/// is twice that, for budgets raised up to 255, and bounds the stack that
/// the code over a txn needs, as it recurses once per level (decoding,
/// validation, apply, encoding, drop): at opt-level 1 about 1 KiB a level
/// in its deepest step, see the test
/// `a_txn_as_deep_as_allowed_fits_a_quarter_of_a_threads_stack`. A deeper
/// txn gets etcd's answer to an over-budget one, `too many operations`.
pub const MAX_TXN_DEPTH: usize = 256;

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;
const TAG_TXN: u8 = 3;
const TAG_COMPACT: u8 = 4;
const TAG_LEASE_GRANT: u8 = 5;
const TAG_LEASE_REVOKE: u8 = 6;
const TAG_PUBLISH_MEMBER: u8 = 7;
const TAG_ALARM: u8 = 22;
const TAG_AUTH: u8 = 20;
const TAG_AUTHED: u8 = 21;
const TAG_ERROR: u8 = 100;
const TAG_EMPTY: u8 = 101;

fn tagged(tag: u8, m: &impl Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + m.encoded_len());
    out.push(tag);
    // Encoding into a Vec cannot run out of space.
    let _ = m.encode(&mut out);
    out
}

fn split(b: &[u8]) -> Result<(u8, &[u8]), Error> {
    b.split_first().map(|(t, rest)| (*t, rest)).ok_or_else(|| Error::internal("empty command"))
}

fn decode_err(e: impl std::fmt::Display) -> Error {
    Error::internal(format!("corrupt command: {e}"))
}

impl Command {
    /// Tag byte + protobuf bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Command::Put(r) => tagged(TAG_PUT, r),
            Command::DeleteRange(r) => tagged(TAG_DELETE, r),
            Command::Txn(r) => tagged(TAG_TXN, r),
            Command::Compact(r) => tagged(TAG_COMPACT, r),
            Command::LeaseGrant(r) => tagged(TAG_LEASE_GRANT, r),
            Command::LeaseRevoke(r) => tagged(TAG_LEASE_REVOKE, r),
            Command::PublishMember(m) => tagged(TAG_PUBLISH_MEMBER, m),
            Command::Alarm(r) => tagged(TAG_ALARM, r),
            Command::Auth(a) => [&[TAG_AUTH][..], &a.encode()].concat(),
            Command::Authed(h, c) => [&[TAG_AUTHED][..], &encode_authed(h, &c.encode())].concat(),
        }
    }

    /// Inverse of [`Command::encode`].
    ///
    /// # Errors
    /// [`Error::Internal`] on an unknown tag, malformed protobuf, a txn
    /// nested deeper than [`MAX_TXN_DEPTH`] or an [`Command::Authed`]
    /// inside another.
    pub fn decode(b: &[u8]) -> Result<Self, Error> {
        let (tag, rest) = split(b)?;
        Ok(match tag {
            TAG_PUT => Command::Put(PutRequest::decode(rest).map_err(decode_err)?),
            TAG_DELETE => Command::DeleteRange(DeleteRangeRequest::decode(rest).map_err(decode_err)?),
            TAG_TXN => Command::Txn(nested_txn::decode_request(rest, MAX_TXN_DEPTH).map_err(decode_err)?),
            TAG_COMPACT => Command::Compact(CompactionRequest::decode(rest).map_err(decode_err)?),
            TAG_LEASE_GRANT => Command::LeaseGrant(LeaseGrantRequest::decode(rest).map_err(decode_err)?),
            TAG_LEASE_REVOKE => Command::LeaseRevoke(LeaseRevokeRequest::decode(rest).map_err(decode_err)?),
            TAG_PUBLISH_MEMBER => Command::PublishMember(Member::decode(rest).map_err(decode_err)?),
            TAG_ALARM => Command::Alarm(AlarmRequest::decode(rest).map_err(decode_err)?),
            TAG_AUTH => Command::Auth(AuthCommand::decode(rest)?),
            TAG_AUTHED => {
                let (h, inner) = decode_authed(rest)?;
                // An identity wraps one client command, never another
                // wrapper; refusing one keeps decoding from recursing once
                // per two bytes of a forged command.
                if inner.first() == Some(&TAG_AUTHED) {
                    return Err(Error::internal("corrupt command: an authed command inside another"));
                }
                Command::Authed(h, Box::new(Command::decode(inner)?))
            }
            other => return Err(Error::internal(format!("unknown command tag {other}"))),
        })
    }
}

impl CommandResponse {
    /// Tag byte + protobuf bytes (errors: tag, gRPC code as i32 BE, message).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            CommandResponse::Put(r) => tagged(TAG_PUT, r),
            CommandResponse::DeleteRange(r) => tagged(TAG_DELETE, r),
            CommandResponse::Txn(r) => tagged(TAG_TXN, r),
            CommandResponse::Compact(r) => tagged(TAG_COMPACT, r),
            CommandResponse::LeaseGrant(r) => tagged(TAG_LEASE_GRANT, r),
            CommandResponse::LeaseRevoke(r) => tagged(TAG_LEASE_REVOKE, r),
            CommandResponse::Alarm(r) => tagged(TAG_ALARM, r),
            CommandResponse::Auth(r) => [&[TAG_AUTH][..], r.token.as_bytes()].concat(),
            CommandResponse::Error(e) => {
                let mut out = vec![TAG_ERROR];
                out.extend_from_slice(&(e.code() as i32).to_be_bytes());
                out.extend_from_slice(e.to_string().as_bytes());
                out
            }
            CommandResponse::Empty => vec![TAG_EMPTY],
        }
    }

    /// Inverse of [`CommandResponse::encode`].
    ///
    /// # Errors
    /// [`Error::Internal`] on an unknown tag or malformed protobuf.
    pub fn decode(b: &[u8]) -> Result<Self, Error> {
        let (tag, rest) = split(b)?;
        Ok(match tag {
            TAG_PUT => CommandResponse::Put(PutResponse::decode(rest).map_err(decode_err)?),
            TAG_DELETE => CommandResponse::DeleteRange(DeleteRangeResponse::decode(rest).map_err(decode_err)?),
            TAG_TXN => CommandResponse::Txn(nested_txn::decode_response(rest, MAX_TXN_DEPTH).map_err(decode_err)?),
            TAG_COMPACT => CommandResponse::Compact(CompactionResponse::decode(rest).map_err(decode_err)?),
            TAG_LEASE_GRANT => CommandResponse::LeaseGrant(LeaseGrantResponse::decode(rest).map_err(decode_err)?),
            TAG_LEASE_REVOKE => CommandResponse::LeaseRevoke(LeaseRevokeResponse::decode(rest).map_err(decode_err)?),
            TAG_ALARM => CommandResponse::Alarm(AlarmResponse::decode(rest).map_err(decode_err)?),
            TAG_AUTH => CommandResponse::Auth(AuthReply { token: String::from_utf8(rest.to_vec()).map_err(|_| Error::internal("corrupt auth reply"))? }),
            TAG_ERROR => {
                if rest.len() < 4 {
                    return Err(Error::internal("corrupt error response"));
                }
                let code = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
                let msg = String::from_utf8_lossy(&rest[4..]);
                CommandResponse::Error(Error::from_code_message(code, &msg))
            }
            TAG_EMPTY => CommandResponse::Empty,
            other => return Err(Error::internal(format!("unknown response tag {other}"))),
        })
    }
}

// openraft needs serde for its app data; commands travel as opaque bytes.
impl Serialize for Command {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_bytes::Bytes::new(&self.encode()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let b = serde_bytes::ByteBuf::deserialize(d)?;
        Command::decode(&b).map_err(serde::de::Error::custom)
    }
}

impl Serialize for CommandResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_bytes::Bytes::new(&self.encode()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for CommandResponse {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let b = serde_bytes::ByteBuf::deserialize(d)?;
        CommandResponse::decode(&b).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proto::etcdserverpb::{RequestOp, RequestOpRequest, ResponseOp, ResponseOpResponse};

    #[test]
    fn commands_round_trip_and_garbage_is_an_error() {
        let cmds = vec![
            Command::Put(PutRequest { key: b"a".to_vec(), value: b"1".to_vec(), lease: 7, ..Default::default() }),
            Command::DeleteRange(DeleteRangeRequest { key: b"a".to_vec(), range_end: b"b".to_vec(), prev_kv: true }),
            Command::Compact(CompactionRequest { revision: 3, physical: true }),
            Command::LeaseGrant(LeaseGrantRequest { ttl: 5, id: 9 }),
            Command::Auth(AuthCommand::Enable),
            Command::Authed(AuthHeader { username: "alice".into(), auth_revision: 3 }, Box::new(Command::Compact(CompactionRequest { revision: 3, physical: false }))),
        ];
        for c in cmds {
            assert_eq!(Command::decode(&c.encode()).ok(), Some(c.clone()));
            let bytes = postcard::to_allocvec(&c).unwrap_or_default();
            assert_eq!(postcard::from_bytes::<Command>(&bytes).ok(), Some(c));
        }
        assert!(Command::decode(&[]).is_err());
        assert!(Command::decode(&[99, 1, 2]).is_err());
        assert!(Command::decode(&[TAG_PUT, 0xff, 0xff, 0xff]).is_err());
        // An identity around an identity: from two levels to a forged
        // megabyte of them (two bytes each: the tag, an empty header).
        let twice = Command::Authed(AuthHeader::default(), Box::new(Command::Authed(AuthHeader::default(), Box::new(Command::Compact(CompactionRequest::default())))));
        assert!(Command::decode(&twice.encode()).is_err());
        assert!(Command::decode(&[TAG_AUTHED, 0].repeat(500_000)).is_err());
        let e = CommandResponse::Error(Error::LeaseNotFound);
        assert_eq!(CommandResponse::decode(&e.encode()).ok(), Some(e));
        let a = CommandResponse::Auth(AuthReply { token: "abc.7".into() });
        assert_eq!(CommandResponse::decode(&a.encode()).ok(), Some(a));
    }

    /// A chain of txns `levels` deep whose innermost holds `leaf`.
    pub(crate) fn nest(levels: usize, leaf: RequestOpRequest) -> TxnRequest {
        let mut t = TxnRequest { success: vec![RequestOp { request: Some(leaf) }], ..Default::default() };
        for _ in 1..levels {
            t = TxnRequest { success: vec![RequestOp { request: Some(RequestOpRequest::RequestTxn(t)) }], ..Default::default() };
        }
        t
    }

    /// The response to [`nest`]: `levels` deep, `leaf` innermost.
    pub(crate) fn nest_response(levels: usize, leaf: ResponseOpResponse) -> TxnResponse {
        let mut r = TxnResponse { succeeded: true, responses: vec![ResponseOp { response: Some(leaf) }], ..Default::default() };
        for _ in 1..levels {
            r = TxnResponse { succeeded: true, responses: vec![ResponseOp { response: Some(ResponseOpResponse::ResponseTxn(r)) }], ..Default::default() };
        }
        r
    }

    fn put_k() -> RequestOpRequest {
        RequestOpRequest::RequestPut(PutRequest { key: b"k".to_vec(), value: b"v".to_vec(), ..Default::default() })
    }

    #[test]
    fn txns_nested_beyond_prosts_limit_survive_the_log_up_to_the_cap() {
        let (t, r) = (nest(MAX_TXN_DEPTH, put_k()), nest_response(MAX_TXN_DEPTH, ResponseOpResponse::ResponsePut(PutResponse::default())));
        let authed = Command::Authed(AuthHeader { username: "alice".into(), auth_revision: 3 }, Box::new(Command::Txn(t.clone())));
        for c in [Command::Txn(t), authed] {
            assert_eq!(Command::decode(&c.encode()).ok().as_ref(), Some(&c));
            let bytes = postcard::to_allocvec(&c).unwrap_or_default();
            assert_eq!(postcard::from_bytes::<Command>(&bytes).ok().as_ref(), Some(&c), "through serde, as in the log");
        }
        let r = CommandResponse::Txn(r);
        assert_eq!(CommandResponse::decode(&r.encode()).ok().as_ref(), Some(&r));

        let (t, r) = (nest(MAX_TXN_DEPTH + 1, put_k()), nest_response(MAX_TXN_DEPTH + 1, ResponseOpResponse::ResponsePut(PutResponse::default())));
        let e = Command::decode(&Command::Txn(t).encode());
        assert!(matches!(e, Err(Error::Internal(ref m)) if m.contains("nested deeper than 256")), "{e:?}");
        assert!(CommandResponse::decode(&CommandResponse::Txn(r).encode()).is_err());
    }
}
