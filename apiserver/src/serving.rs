//! Protection of the HTTPS port against connections that hold resources
//! without making progress, after kube-apiserver's serving defaults (its
//! `http.Server`: `ReadHeaderTimeout` 32 s, which Go also applies to the
//! TLS handshake, `IdleTimeout` 90 s, and 250 concurrent HTTP/2 streams per
//! connection), plus a cap on open connections, which Go's server lacks.
//!
//! The connection helpers are raftstore's ([`raftstore::serving`]), whose
//! client and peer ports are protected the same way:
//!
//! - [`Gate`]: admits a new connection while fewer than `max_connections`
//!   are open; over the cap the connection is closed at once and a warning
//!   is logged (at most one every 10 s).
//! - [`Activity`]: what a connection is doing. Requests in flight (a
//!   request counts until its response body is sent or dropped, so a watch
//!   counts while it streams) and when the last one ended. A connection
//!   with none in flight for `idle_timeout` is shut down gracefully: HTTP/2
//!   gets a GOAWAY, HTTP/1 closes; one that has not finished within
//!   [`GRACE`] after that is dropped.
//! - The handshake timeout bounds the TLS handshake; hyper's header read
//!   timeout bounds the time an HTTP/1 request's head may take to arrive
//!   (a client sending one header line at a time).

use std::time::Duration;

pub use raftstore::serving::{Activity, Gate, InFlight, GRACE};

/// kube-apiserver's `ReadHeaderTimeout`, which Go's server also applies to
/// the TLS handshake.
pub const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// HTTP/2 streams per connection when `--http2-max-streams-per-connection`
/// is 0 (Go's default, which kube keeps).
pub const DEFAULT_HTTP2_STREAMS: u32 = 250;

/// How long a shutting-down server waits for the requests in flight
/// (kube's generic server waits 60 s for them).
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);

/// The limits of the serving port.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long a TLS handshake may take.
    pub tls_handshake_timeout: Duration,
    /// How long an HTTP/1 request head may take to arrive.
    pub read_header_timeout: Duration,
    /// How long a connection may stay without a request in flight.
    pub idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub http2_max_streams: u32,
    /// Open connections at most.
    pub max_connections: usize,
}
