//! Alarms (etcd `server/etcdserver/api/v3alarm` and the capped applier):
//! their types and record; [`super::capped`] applies them.
//!
//! An alarm is a (member ID, alarm type) pair, raised and cleared through
//! the Raft log and kept in `meta` (see [`keys::Alarms`]), so every member
//! holds the same set and a restart keeps it. While a NOSPACE alarm is
//! raised by any member, the store refuses what would grow it, as etcd's
//! capped applier does: puts, txns that put, and lease grants fail with
//! `etcdserver: mvcc: database space exceeded`; ranges, deletes (alone or
//! in txns), compaction and lease revokes still work, so that an operator
//! can free space and then disarm the alarm.

use std::collections::BTreeSet;

use proto::etcdserverpb::{AlarmMember, RequestOp, RequestOpRequest};

use crate::command::Command;
use crate::error::{Error, Result};

/// etcd's `AlarmType` values.
pub mod alarm_type {
    /// `NONE`: in a GET, every alarm; never raised.
    pub const NONE: i32 = 0;
    /// `NOSPACE`: the database reached `--quota-backend-bytes`.
    pub const NOSPACE: i32 = 1;
    /// `CORRUPT`: members' histories disagree.
    pub const CORRUPT: i32 = 2;
}

/// etcd's `AlarmRequest.AlarmAction` values.
pub mod alarm_action {
    /// List alarms.
    pub const GET: i32 = 0;
    /// Raise an alarm for a member.
    pub const ACTIVATE: i32 = 1;
    /// Clear a member's alarm.
    pub const DEACTIVATE: i32 = 2;
}

/// The raised alarms, as (member ID, alarm type).
pub type Alarms = BTreeSet<(u64, i32)>;

/// Reads the alarms `meta` holds.
///
/// # Errors
/// [`Error::Internal`] on a damaged record.
pub fn decode_alarms(bytes: &[u8]) -> Result<Alarms> {
    if !bytes.len().is_multiple_of(12) {
        return Err(Error::internal("corrupt alarm record"));
    }
    Ok(bytes
        .chunks_exact(12)
        .map(|c| {
            let mut id = [0u8; 8];
            id.copy_from_slice(&c[..8]);
            let mut t = [0u8; 4];
            t.copy_from_slice(&c[8..]);
            (u64::from_be_bytes(id), i32::from_be_bytes(t))
        })
        .collect())
}

/// The `meta` record of `alarms` (see [`decode_alarms`]).
pub fn encode_alarms(alarms: &Alarms) -> Vec<u8> {
    let mut out = Vec::with_capacity(alarms.len() * 12);
    for (id, t) in alarms {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&t.to_be_bytes());
    }
    out
}

/// What etcd counts per written key on top of its key and value, in bytes.
const KV_OVERHEAD: usize = 256;
/// What etcd counts per granted lease, in bytes.
const LEASE_OVERHEAD: usize = 64;

fn cost_put(p: &proto::etcdserverpb::PutRequest) -> usize {
    KV_OVERHEAD + p.key.len() + p.value.len()
}

fn cost_op(op: &RequestOp) -> usize {
    match &op.request {
        Some(RequestOpRequest::RequestPut(p)) => cost_put(p),
        _ => 0,
    }
}

/// etcd's estimate of the bytes a command adds (0 for what adds nothing):
/// a put's key and value plus overhead; for a txn, the larger of its two
/// branches' puts; a fixed amount for a lease grant. A command carrying
/// its client's identity costs what the command inside it costs.
pub fn cost(cmd: &Command) -> usize {
    match cmd {
        Command::Put(p) => cost_put(p),
        Command::Authed(_, inner) => cost(inner),
        Command::Txn(t) => {
            let success: usize = t.success.iter().map(cost_op).sum();
            let failure: usize = t.failure.iter().map(cost_op).sum();
            success.max(failure)
        }
        Command::LeaseGrant(_) => LEASE_OVERHEAD,
        _ => 0,
    }
}

/// An alarm as etcd's `AlarmMember`.
pub fn member(a: &(u64, i32)) -> AlarmMember {
    AlarmMember { member_id: a.0, alarm: a.1 }
}

/// An alarm as etcd words it in `Maintenance.Status` errors: Go's compact
/// text form of `AlarmMember`, trailing space included
/// (`memberID:10276657743932975437 alarm:NOSPACE `).
pub fn describe(a: &(u64, i32)) -> String {
    let name = match a.1 {
        alarm_type::NONE => "NONE".to_string(),
        alarm_type::NOSPACE => "NOSPACE".to_string(),
        alarm_type::CORRUPT => "CORRUPT".to_string(),
        other => other.to_string(),
    };
    format!("memberID:{} alarm:{name} ", a.0)
}

#[cfg(test)]
mod describe_tests {
    #[test]
    fn alarms_are_worded_as_etcds_status_errors() {
        assert_eq!(super::describe(&(10276657743932975437, super::alarm_type::NOSPACE)), "memberID:10276657743932975437 alarm:NOSPACE ");
        assert_eq!(super::describe(&(1, super::alarm_type::CORRUPT)), "memberID:1 alarm:CORRUPT ");
    }
}
