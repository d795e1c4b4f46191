//! etcd's backend quota (`--quota-backend-bytes`, etcd `etcdserver/quota.go`
//! and the quota interceptor of `v3rpc`).
//!
//! Before a write that adds data is proposed, the size of the key-value
//! store (not the Raft log: etcd's WAL is outside its quota too) plus an
//! estimate of what the write adds is compared with the quota. A write
//! that does not fit raises the NOSPACE alarm for this member (through the
//! log, so the whole cluster refuses writes from then on; see
//! [`crate::mvcc::alarm`]) and fails with `etcdserver: mvcc: database
//! space exceeded`.

use proto::etcdserverpb::AlarmRequest;

use super::Ctx;
use crate::command::Command;
use crate::error::{Error, Result};
use crate::mvcc::alarm::{alarm_action, alarm_type, cost};

/// The quota when the flag is 0: 2 GiB, etcd's default.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The quota a `--quota-backend-bytes` value sets: the default for 0, none
/// for a negative value (etcd's rules).
pub fn from_flag(bytes: i64) -> Option<u64> {
    match bytes {
        0 => Some(DEFAULT_QUOTA_BYTES),
        b if b < 0 => None,
        b => Some(b as u64),
    }
}

/// Refuses `cmd` with [`Error::NoSpace`] if it would take the database over
/// the quota, raising the NOSPACE alarm first.
///
/// # Errors
/// [`Error::NoSpace`].
pub async fn check(ctx: &Ctx, cmd: &Command) -> Result<()> {
    let Some(quota) = ctx.quota_backend_bytes else { return Ok(()) };
    let cost = cost(cmd) as u64;
    if cost == 0 {
        return Ok(());
    }
    let size = u64::try_from(crate::storage::state_machine_size(ctx.store.db())).unwrap_or(0);
    if size.saturating_add(cost) < quota {
        return Ok(());
    }
    let raise = AlarmRequest { action: alarm_action::ACTIVATE, member_id: ctx.member_id, alarm: alarm_type::NOSPACE };
    if let Err(e) = ctx.node.propose(Command::Alarm(raise)).await {
        tracing::warn!("raising the NOSPACE alarm: {e}");
    } else {
        tracing::warn!(size, quota, "database space exceeded: NOSPACE alarm raised");
    }
    Err(Error::NoSpace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::etcdserverpb::{PutRequest, RequestOp, RequestOpRequest, TxnRequest};

    #[test]
    fn costs_and_flag_values_follow_etcd() {
        let put = |k: &str, v: &str| PutRequest { key: k.into(), value: v.into(), ..Default::default() };
        assert_eq!(cost(&Command::Put(put("ab", "cde"))), 256 + 5);
        let op = |p| RequestOp { request: Some(RequestOpRequest::RequestPut(p)) };
        let txn = TxnRequest { compare: vec![], success: vec![op(put("a", "1")), op(put("b", "2"))], failure: vec![op(put("c", "12345"))] };
        assert_eq!(cost(&Command::Txn(txn)), 2 * (256 + 2));
        let authed = Command::Authed(Default::default(), Box::new(Command::Put(put("ab", "cde"))));
        assert_eq!(cost(&authed), 256 + 5, "a client's identity must not hide a put from the quota");
        assert_eq!(from_flag(0), Some(DEFAULT_QUOTA_BYTES));
        assert_eq!(from_flag(-1), None);
        assert_eq!(from_flag(4096), Some(4096));
    }
}
