//! Everything that touches openraft lives under this module, so that an
//! openraft version change touches one place. This file holds the types
//! openraft is configured with; the rest is one file per concern:
//!
//! - [`log_store`]: the Raft log and vote on RocksDB (`raft_log`,
//!   `raft_state`); appends are fsynced before openraft is told they are
//!   durable.
//! - [`state_machine`]: applies committed commands to the MVCC store and
//!   builds/installs snapshots from RocksDB checkpoints.
//! - [`network`]: the peer transport (tonic, `proto/raftpb.proto`).
//! - [`timing`]: etcd's timing flags mapped onto openraft's, and creating
//!   the member.
//! - [`node`]: [`RaftNode`], the small API the gRPC services use, and what
//!   it reports (leader, term, members).
//! - [`requests`]: proposals, linearizable reads and leader lease queries,
//!   with their retries while leadership moves.
//! - [`read_index`]: the leader's confirmation of its term for
//!   linearizable reads and lease queries.
//! - [`membership`]: etcd's membership changes on openraft.
//! - [`transfer`]: leadership transfer (etcd's MoveLeader, and the hand-over
//!   before a leader stops).

pub mod log_store;
pub mod membership;
pub mod network;
pub mod node;
pub mod read_index;
pub mod requests;
pub mod state_machine;
pub mod timing;
pub mod transfer;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::command::{Command, CommandResponse};

pub use membership::MemberChange;
pub use node::RaftNode;
pub use timing::{create, OpenraftTiming, Timing};

/// A member as Raft knows it: etcd's member name and URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// `--name`.
    pub name: String,
    /// `--initial-advertise-peer-urls`.
    pub peer_urls: Vec<String>,
    /// `--advertise-client-urls`.
    pub client_urls: Vec<String>,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Command::Put(_) => "Put",
            Command::DeleteRange(_) => "DeleteRange",
            Command::Txn(_) => "Txn",
            Command::Compact(_) => "Compact",
            Command::LeaseGrant(_) => "LeaseGrant",
            Command::LeaseRevoke(_) => "LeaseRevoke",
            Command::PublishMember(_) => "PublishMember",
            Command::Alarm(_) => "Alarm",
            Command::Auth(_) => "Auth",
            Command::Authed(_, inner) => return inner.fmt(f),
        };
        f.write_str(name)
    }
}

openraft::declare_raft_types!(
    /// raftstore's openraft type configuration.
    pub TypeConfig:
        D = Command,
        R = CommandResponse,
        NodeId = u64,
        Node = Member,
);

/// The openraft handle.
pub type Raft = openraft::Raft<TypeConfig, state_machine::StateMachine>;
/// A log id.
pub type LogId = openraft::type_config::alias::LogIdOf<TypeConfig>;
/// Membership as stored in the log and the state machine.
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<TypeConfig>;
/// A log entry.
pub type Entry = openraft::type_config::alias::EntryOf<TypeConfig>;
/// A vote.
pub type Vote = openraft::type_config::alias::VoteOf<TypeConfig>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<openraft::type_config::alias::CommittedLeaderIdOf<TypeConfig>, u64, Member>;
/// A snapshot: metadata plus the checkpoint directory.
pub type Snapshot = openraft::Snapshot<openraft::type_config::alias::CommittedLeaderIdOf<TypeConfig>, u64, Member, state_machine::SnapshotDir>;

/// postcard encoding of openraft's serde types (entries, votes, log ids).
pub(crate) fn encode<T: Serialize>(v: &T) -> std::io::Result<Vec<u8>> {
    postcard::to_allocvec(v).map_err(std::io::Error::other)
}

/// Inverse of [`encode`]; malformed bytes are an I/O error, never a panic.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(b: &[u8]) -> std::io::Result<T> {
    postcard::from_bytes(b).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
