//! The peer transport: openraft RPCs, snapshot streaming, request forwarding
//! and read index over tonic (`proto/raftpb.proto`).
//!
//! openraft messages travel postcard-encoded inside `RaftMessage.payload`.
//! A snapshot travels as the files of a RocksDB checkpoint, in chunks of at
//! most [`CHUNK_BYTES`].
//!
//! - [`peers`]: the gRPC clients to the other members, and the requests a
//!   member sends the leader (forwarded writes, lease and read-index
//!   queries, membership changes);
//! - [`forward`]: the standing stream that carries forwarded writes;
//! - [`replication`]: openraft's client side (AppendEntries, votes,
//!   snapshots);
//! - [`service`]: the server side of every peer RPC.

pub mod forward;
pub mod peers;
pub mod replication;
pub mod service;

use std::future::Future;
use std::pin::Pin;

pub use forward::{ForwardStream, FORWARD_WINDOW};
pub use peers::{PeerClients, PeerTls};
pub use replication::{Network, NetworkFactory};
pub use service::TransportService;

/// Largest piece of a snapshot file sent in one message, in bytes.
pub const CHUNK_BYTES: usize = 1 << 20;

/// What a peer answers when a member that was removed from the cluster
/// asks for votes; the removed member then shuts itself down (etcd answers
/// removed members the same way and they stop).
pub const REMOVED_MESSAGE: &str = "the member has been permanently removed from the cluster";

/// Boxed future alias used by the services.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
