//! Protection of the HTTPS port against connections that hold resources
//! without making progress, after kube-apiserver's serving defaults (its
//! `http.Server`: `ReadHeaderTimeout` 32 s, which Go also applies to the
//! TLS handshake, `IdleTimeout` 90 s, and 250 concurrent HTTP/2 streams per
//! connection), plus a cap on open connections, which Go's server lacks.
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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// kube-apiserver's `ReadHeaderTimeout`, which Go's server also applies to
/// the TLS handshake.
pub const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// HTTP/2 streams per connection when `--http2-max-streams-per-connection`
/// is 0 (Go's default, which kube keeps).
pub const DEFAULT_HTTP2_STREAMS: u32 = 250;
/// How long a connection shut down for idleness may take to finish.
pub const GRACE: Duration = Duration::from_secs(10);

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

/// Admits connections up to the cap.
pub struct Gate {
    slots: Arc<Semaphore>,
    max: usize,
    last_warning: Mutex<Option<Instant>>,
}

impl Gate {
    /// A gate for `max` open connections (at least 1).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Gate { slots: Arc::new(Semaphore::new(max)), max, last_warning: Mutex::new(None) }
    }

    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// A slot for a new connection, held while it is open; `None` (and a
    /// warning, at most every 10 s) when `max` are open.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        match self.slots.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                let mut last = self.last_warning.lock();
                if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    *last = Some(Instant::now());
                    tracing::warn!("connection limit reached: {} connections are open (--max-connections); new connections are closed until some end", self.max);
                }
                None
            }
        }
    }
}

/// What one connection is doing: requests in flight and the time the last
/// one ended (or the connection opened).
pub struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when the connection last went idle.
    idle_since_ms: AtomicU64,
}

/// Counts one request as in flight until dropped.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        a.idle_since_ms.store(a.start.elapsed().as_millis().try_into().unwrap_or(u64::MAX), Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Activity {
    /// A connection that has just opened (idle since now).
    pub fn new() -> Arc<Self> {
        Arc::new(Activity { start: Instant::now(), in_flight: AtomicUsize::new(0), idle_since_ms: AtomicU64::new(0) })
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// How long the connection has had no request in flight; `None` while
    /// one is.
    pub fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        Some(self.start.elapsed().saturating_sub(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_closes_at_the_cap_and_reopens() {
        let gate = Gate::new(2);
        let a = gate.admit();
        let b = gate.admit();
        assert!(a.is_some() && b.is_some());
        assert!(gate.admit().is_none());
        drop(a);
        assert!(gate.admit().is_some());
    }

    #[test]
    fn a_connection_is_idle_only_without_requests_in_flight() {
        let act = Activity::new();
        assert!(act.idle_for().is_some());
        let r = act.begin();
        assert_eq!(act.idle_for(), None);
        std::thread::sleep(Duration::from_millis(20));
        drop(r);
        let idle = act.idle_for();
        assert!(idle.is_some_and(|d| d < Duration::from_millis(20)), "idle counts from the request's end: {idle:?}");
    }
}
