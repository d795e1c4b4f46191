//! The standing `ForwardStream` a follower sends its clients' writes to
//! the leader on.

use std::collections::HashMap;

use parking_lot::Mutex;
use proto::raftpb::raft_transport_client::RaftTransportClient;
use proto::raftpb::{ForwardRequest, ForwardResponse};
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Status;

use crate::error::{Error, Result};

/// One long-lived `ForwardStream` call to a leader carrying this member's
/// forwarded writes, each tagged with an id that the leader's answer echoes
/// (answers arrive in completion order). A unary call per write paid for a
/// new HTTP/2 stream and a hop through tonic's buffer task each time; etcd
/// likewise forwards proposals over its standing peer stream.
///
/// When the stream fails, every write waiting on it fails: with `no leader`
/// if the connection was never made (nothing was sent, so the caller may
/// send again elsewhere) and `leader changed` otherwise (it may have been
/// applied). A write abandoned while waiting (the request timeout) closes the
/// stream for new writes, so that a stuck stream is replaced by the next
/// write; a connection that went silent is dropped by its PINGs (see
/// `PEER_PING_TIMEOUT`), else the new stream would share it.
pub struct ForwardStream {
    pub(super) url: String,
    /// Requests not yet written to the stream. Never full: every request in
    /// it holds a permit of `window`.
    tx: tokio::sync::mpsc::Sender<ForwardRequest>,
    /// Room for writes in flight (queued or awaiting their answers); a write
    /// waits here when [`FORWARD_WINDOW`] are already out.
    window: std::sync::Arc<tokio::sync::Semaphore>,
    pending: std::sync::Arc<Mutex<ForwardPending>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// Most forwarded writes one member keeps in flight on one
/// [`ForwardStream`] to a leader, and most the leader works on at once for
/// one stream. Further writes wait for room (backpressure reaches the
/// clients), so neither side's queues grow without bound when the other
/// side is slow. It bounds each stream, not the member: a write given up by
/// its caller frees its room at once although the leader may still apply
/// it, and an abandoned stream (see [`ForwardStream`]) drains while the
/// next one fills, so under heavy cancellation a leader can hold a few
/// windows' worth from one follower, each bounded by the request timeout.
pub const FORWARD_WINDOW: usize = 1024;

/// The waiters of a [`ForwardStream`], by request id, and how it ended.
#[derive(Default)]
struct ForwardPending {
    waiters: HashMap<u64, tokio::sync::oneshot::Sender<ForwardResponse>>,
    /// Set once the stream ended (or was given up): the error for waiters.
    closed: Option<Error>,
}

impl ForwardPending {
    fn close(&mut self, err: Error) {
        if self.closed.is_none() {
            self.closed = Some(err);
        }
        // Dropping the senders wakes every waiter with the error above.
        self.waiters.clear();
    }
}

impl ForwardStream {
    /// Starts the call on `client` (whose peer URL is `url`); the task that
    /// reads the answers runs until the leader ends the stream.
    pub(super) fn open(mut client: RaftTransportClient<Channel>, url: String) -> std::sync::Arc<Self> {
        let (tx, rx) = tokio::sync::mpsc::channel(FORWARD_WINDOW);
        let pending: std::sync::Arc<Mutex<ForwardPending>> = Default::default();
        let reader = pending.clone();
        tokio::spawn(async move {
            let input = tokio_stream::wrappers::ReceiverStream::new(rx);
            let mut answers = match client.forward_stream(input).await {
                Ok(r) => r.into_inner(),
                Err(st) => {
                    reader.lock().close(if never_connected(&st) { Error::NoLeader } else { Error::LeaderChanged });
                    return;
                }
            };
            while let Some(Ok(resp)) = answers.next().await {
                if let Some(w) = reader.lock().waiters.remove(&resp.id) {
                    let _ = w.send(resp);
                }
            }
            reader.lock().close(Error::LeaderChanged);
        });
        let window = std::sync::Arc::new(tokio::sync::Semaphore::new(FORWARD_WINDOW));
        std::sync::Arc::new(ForwardStream { url, tx, window, pending, next_id: std::sync::atomic::AtomicU64::new(1) })
    }

    pub(super) fn is_closed(&self) -> bool {
        self.pending.lock().closed.is_some()
    }

    /// Sends one serialised command and waits for the leader's answer.
    pub(super) async fn call(&self, command: Vec<u8>) -> Result<Offer> {
        // Held until the answer (or the stream's end); waiting here sends
        // nothing, so giving up while waiting is harmless.
        let Ok(_room) = self.window.acquire().await else { return Ok(Offer::Refused) };
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (done, answer) = tokio::sync::oneshot::channel();
        {
            let mut p = self.pending.lock();
            if p.closed.is_some() {
                return Ok(Offer::Refused);
            }
            p.waiters.insert(id, done);
        }
        if self.tx.try_send(ForwardRequest { command, id }).is_err() {
            // The request never left this member.
            self.pending.lock().waiters.remove(&id);
            return Err(Error::NoLeader);
        }
        /// Closes the stream if the write is abandoned before its answer.
        struct Abandon<'a>(&'a ForwardStream, bool);
        impl Drop for Abandon<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    let mut p = self.0.pending.lock();
                    if p.closed.is_none() {
                        p.closed = Some(Error::LeaderChanged);
                    }
                }
            }
        }
        let mut guard = Abandon(self, false);
        let out = answer.await;
        guard.1 = true;
        match out {
            Ok(resp) => Ok(Offer::Answered(resp)),
            Err(_) => Err(self.pending.lock().closed.clone().unwrap_or(Error::LeaderChanged)),
        }
    }
}

/// What became of a write offered to a [`ForwardStream`].
pub(super) enum Offer {
    /// The leader's answer.
    Answered(ForwardResponse),
    /// The stream had already ended (or was given up): nothing was sent.
    Refused,
}

/// Whether a failed call never reached the peer: the TCP connection could
/// not be made (refused, or the connect attempt failed or timed out).
/// Anything else (a reset mid-call, a timeout) may have been processed.
fn never_connected(st: &Status) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(st);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        if e.to_string().contains("tcp connect error") {
            return true;
        }
        cur = e.source();
    }
    false
}
