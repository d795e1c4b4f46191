//! raftstore: an etcd v3-compatible MVCC key-value store on RocksDB,
//! replicated by openraft, serving etcd's gRPC wire protocol.
//!
//! Layout (after etcd's `server/`):
//! - [`mvcc`]: revisions, the key index, the KV store, the watch hub;
//! - [`storage`]: RocksDB column families and key encodings;
//! - [`raft`]: openraft integration (log store, state machine, transport);
//! - [`server`]: the etcd gRPC services;
//! - [`auth`]: users, roles, permissions and tokens;
//! - [`serving`]: accepting and serving connections on the client, peer
//!   and metrics ports (TCP or unix sockets), with timeouts and a
//!   connection cap; [`tls`]: the self-signed certificates of
//!   `--auto-tls` and `--peer-auto-tls`;
//! - [`lease`], [`compactor`]: lease expiry and auto compaction;
//! - [`metrics`]: Prometheus metrics with etcd's names;
//! - [`node`]: wiring a member together; [`snapshot`]: the client snapshot
//!   format and restore.

pub mod auth;
pub mod command;
pub mod compactor;
pub mod error;
pub mod etcd_db;
pub mod import;
pub mod lease;
pub mod metrics;
pub mod mvcc;
pub mod node;
pub mod raft;
pub mod server;
pub mod serving;
pub mod snapshot;
pub mod storage;
pub mod tls;

pub use error::{Error, Result};
