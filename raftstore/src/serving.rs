//! Serving the client and peer ports: one accept loop per listener that
//! keeps connections which hold resources without making progress from
//! piling up. The defaults are kube-apiserver's (its Go `http.Server`:
//! 32 s to read a request head, which Go also applies to the TLS handshake,
//! 90 s idle), as on the apiserver's own HTTPS port; etcd's Go server sets
//! none of them, so without this a client could hold a connection forever
//! without sending a byte.
//!
//! Every accepted connection
//!
//! 1. passes the listener's [`Gate`]: while `max_connections` are open a
//!    new one is closed at once and a warning is logged (at most one every
//!    10 s);
//! 2. on an https port, finishes its TLS handshake within
//!    `tls_handshake_timeout` (the client-certificate check of
//!    `--client-cert-auth` / `--peer-client-cert-auth` is part of it);
//! 3. is served by hyper: HTTP/2, and on the client port HTTP/1.1 too
//!    (`/health`, `/metrics`, `/version`), with the port's tonic services
//!    behind it. An HTTP/1 request head must arrive within
//!    `first_request_timeout`;
//! 4. is shut down gracefully (HTTP/2 GOAWAY, so clients reconnect
//!    cleanly; HTTP/1 close) once it has had no request in flight for
//!    `first_request_timeout` since it opened (it never sent a request,
//!    not even the HTTP/2 preface) or for `idle_timeout` since its last
//!    request ended, and dropped if it has not finished [`GRACE`] later.
//!
//! A request is in flight from its head until its response body has been
//! sent or dropped, so a connection that carries a watch, a lease
//! keep-alive stream or a peer's replication stream is never idle.
//!
//! This replaces tonic's `Server`, which has no idle timeout and no cap on
//! connections. What tonic's server adds and this does not: enforcing a
//! request's `grpc-timeout` on the server. Clients reset their stream at
//! their deadline (grpc-go and tonic do), and hyper drops the handler when
//! the stream is reset; openraft bounds its own peer RPCs.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a TLS handshake may take (kube-apiserver: Go applies its 32 s
/// `ReadHeaderTimeout` to handshakes).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(32);
/// How long a new connection may go without a request, and an HTTP/1
/// request head may take to arrive (kube-apiserver's `ReadHeaderTimeout`).
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(32);
/// How long a connection may go without a request in flight after one
/// (kube-apiserver's `IdleTimeout`).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Open connections per listener at most, by default (as the apiserver's
/// `--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 8192;
/// Concurrent HTTP/2 streams per client connection, by default: etcd's
/// `--max-concurrent-streams` default (Go's `math.MaxUint32`).
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = u32::MAX;
/// Concurrent HTTP/2 streams per peer connection: hyper's default, which
/// the peer port had under tonic's server. A member opens few streams to a
/// peer (replication, forwarded writes) besides one per read-index or lease
/// query; more wait in the sender for room.
pub const PEER_MAX_STREAMS: u32 = 200;
/// How long a connection shut down for a timeout may take to finish.
pub const GRACE: Duration = Duration::from_secs(10);
/// Pause after a failed accept (most likely out of file descriptors), so
/// that the loop does not spin while nothing can be accepted.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The timeouts and the connection cap of the client and peer ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// How long a TLS handshake may take.
    pub tls_handshake_timeout: Duration,
    /// How long a connection may go without its first request, and an
    /// HTTP/1 request head may take to arrive.
    pub first_request_timeout: Duration,
    /// How long a connection may go without a request in flight after its
    /// first one.
    pub idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per client connection (etcd's
    /// `--max-concurrent-streams`); the peer port uses [`PEER_MAX_STREAMS`].
    pub max_concurrent_streams: u32,
    /// Open connections per listener at most (`--max-connections`).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            tls_handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
            first_request_timeout: FIRST_REQUEST_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The common name of the client certificate a TLS connection presented
/// (and rustls verified against the trusted CA), in the extensions of each
/// request on that connection; etcd's `--client-cert-auth` takes it as the
/// user name of requests without a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertName(pub String);

/// The subject common name of a DER certificate.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some(cn)
}

/// How one listener serves its connections.
#[derive(Clone)]
pub struct Port {
    /// `client`, `peer` or `metrics`, for log lines.
    pub name: &'static str,
    /// TLS, for an https URL.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Whether HTTP/1.1 is served beside HTTP/2.
    pub http1: bool,
    /// Concurrent HTTP/2 streams per connection.
    pub max_streams: u32,
    /// Timeouts and the connection cap.
    pub limits: Limits,
}

/// A socket that connections are accepted on: TCP, or a unix socket
/// (etcd's `unix://` client URLs).
pub trait Listener: Send + 'static {
    /// An accepted connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection and a name of its other end, for log lines.
    fn accept_conn(&self) -> impl std::future::Future<Output = std::io::Result<(Self::Io, String)>> + Send;
}

impl Listener for TcpListener {
    type Io = tokio::net::TcpStream;

    async fn accept_conn(&self) -> std::io::Result<(Self::Io, String)> {
        let (tcp, peer) = self.accept().await?;
        let _ = tcp.set_nodelay(true);
        Ok((tcp, peer.to_string()))
    }
}

impl Listener for UnixListener {
    type Io = tokio::net::UnixStream;

    async fn accept_conn(&self) -> std::io::Result<(Self::Io, String)> {
        let (conn, _) = self.accept().await?;
        Ok((conn, "a unix socket client".to_string()))
    }
}

/// Accepts connections on `listener` and serves each with `service` on its
/// own task, as the module doc describes. Runs for as long as the process.
pub async fn serve<L, S>(listener: L, port: Port, service: S)
where
    L: Listener,
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let port = Arc::new(port);
    let gate = Gate::new(port.limits.max_connections);
    loop {
        let (tcp, peer) = match listener.accept_conn().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("{} port: accept: {e}", port.name);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Some(slot) = gate.admit(port.name) else {
            drop(tcp);
            continue;
        };
        let (port, service) = (port.clone(), service.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let Some(acceptor) = &port.tls else {
                return serve_connection(tcp, &port, service, None).await;
            };
            match tokio::time::timeout(port.limits.tls_handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let name = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).and_then(|c| common_name(c)).map(ClientCertName);
                    serve_connection(tls, &port, service, name).await
                }
                Ok(Err(e)) => tracing::debug!("{} port: TLS handshake with {peer}: {e}", port.name),
                Err(_) => tracing::debug!("{} port: TLS handshake with {peer}: not done within {:?}", port.name, port.limits.tls_handshake_timeout),
            }
        });
    }
}

/// Serves one connection until it ends, or until it has been idle too long
/// (see the module doc).
async fn serve_connection<IO, S>(io: IO, port: &Port, service: S, cert_name: Option<ClientCertName>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let activity = Activity::new();
    let seen = activity.clone();
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let in_flight = seen.begin();
        let mut req = req.map(tonic::body::Body::new);
        if let Some(name) = &cert_name {
            req.extensions_mut().insert(name.clone());
        }
        let call = tower::ServiceExt::oneshot(service.clone(), req);
        async move {
            let resp = match call.await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            // In flight until the body is sent or dropped.
            Ok::<_, Infallible>(resp.map(|body| {
                tonic::body::Body::new(body.map_frame(move |f| {
                    let _ = &in_flight;
                    f
                }))
            }))
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if port.http1 {
        builder.http1().timer(TokioTimer::new()).header_read_timeout(port.limits.first_request_timeout);
    } else {
        builder = builder.http2_only();
    }
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(port.max_streams);
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let limits = &port.limits;
    // While a request is in flight nothing tells this loop when it ends:
    // look again at this pace, so a connection closes within about 1.25
    // times its timeout.
    let busy = (limits.first_request_timeout.min(limits.idle_timeout) / 4).max(Duration::from_millis(50));
    let result = loop {
        let left = activity.time_left(limits.first_request_timeout, limits.idle_timeout);
        if left == Some(Duration::ZERO) {
            conn.as_mut().graceful_shutdown();
            break tokio::time::timeout(GRACE, conn.as_mut()).await.unwrap_or(Ok(()));
        }
        tokio::select! {
            r = conn.as_mut() => break r,
            () = tokio::time::sleep(left.unwrap_or(busy)) => {}
        }
    };
    if let Err(e) = result {
        tracing::debug!("{} port: connection: {e}", port.name);
    }
}

/// Admits connections up to the cap. Public for the apiserver's HTTPS
/// port, which protects itself the same way.
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

    /// A slot for a new connection on the `port` port, held while it is
    /// open; `None` (and a warning, at most every 10 s) when `max` are open.
    pub fn admit(&self, port: &str) -> Option<OwnedSemaphorePermit> {
        match self.slots.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                let mut last = self.last_warning.lock();
                if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    *last = Some(Instant::now());
                    tracing::warn!("connection limit reached: {} connections are open on the {port} port (--max-connections); new connections are closed until some end", self.max);
                }
                None
            }
        }
    }

    /// How many connections are open (holding a slot).
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }
}

/// What one connection is doing: requests in flight, whether it has had
/// one, and when the last one ended (or the connection opened).
pub struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    served: AtomicBool,
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
    /// A connection that has just opened.
    pub fn new() -> Arc<Self> {
        Arc::new(Activity { start: Instant::now(), in_flight: AtomicUsize::new(0), served: AtomicBool::new(false), idle_since_ms: AtomicU64::new(0) })
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Release);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// How much longer the connection may stay without a request: `None`
    /// while one is in flight; else what is left of `first_request` (no
    /// request yet) or of `idle` (since the last one ended), zero once it
    /// has run out.
    pub fn time_left(&self, first_request: Duration, idle: Duration) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let limit = if self.served.load(Ordering::Acquire) { idle } else { first_request };
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        Some(limit.saturating_sub(self.start.elapsed().saturating_sub(since)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_closes_at_the_cap_and_reopens() {
        let gate = Gate::new(2);
        let a = gate.admit("client");
        let b = gate.admit("client");
        assert!(a.is_some() && b.is_some());
        assert_eq!(gate.open(), 2);
        assert!(gate.admit("client").is_none());
        drop(a);
        assert!(gate.admit("client").is_some());
    }

    #[test]
    fn a_connection_runs_out_of_time_only_without_requests_in_flight() {
        let (first, idle) = (Duration::from_secs(30), Duration::from_secs(90));
        let act = Activity::new();
        let left = act.time_left(first, idle);
        assert!(left.is_some_and(|d| d > Duration::from_secs(29) && d <= first), "a new connection has the first-request timeout: {left:?}");
        let r = act.begin();
        assert_eq!(act.time_left(first, idle), None, "a request is in flight");
        drop(r);
        let left = act.time_left(first, idle);
        assert!(left.is_some_and(|d| d > Duration::from_secs(89) && d <= idle), "after a request, the idle timeout: {left:?}");
        assert_eq!(act.time_left(Duration::ZERO, Duration::ZERO), Some(Duration::ZERO));
    }
}
