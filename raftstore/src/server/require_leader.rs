//! Require-leader streams end when their member loses its leader.
//!
//! A client that sends the gRPC metadata `hasleader: true` (etcd
//! `clientv3.WithRequireLeader`; kube-apiserver sets it on its watches)
//! wants only a member with a leader. A new request on a member without
//! one is refused at once (see [`super::http`]); a stream already open is
//! ended when the member has had no leader for [`NO_LEADER_ROUNDS`]
//! election timeouts in a row, as etcd's `monitorLeader` does, so that the
//! client moves to another member instead of waiting on a watch that will
//! see no more events. The stream ends with `Unavailable` and
//! `etcdserver: no leader`, the status etcd's Watch and LeaseKeepAlive end
//! with when their stream is cancelled this way.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::watch;
use tonic::body::Body;

use super::Context;

/// Election timeouts in a row without a leader after which require-leader
/// streams are ended (etcd `maxNoLeaderCnt`).
pub const NO_LEADER_ROUNDS: u32 = 3;

/// The streaming methods a require-leader client's stream is ended on.
/// etcd ends every stream its interceptor saw with the metadata; these are
/// the streams served on the client port.
const STREAMS: [&str; 4] = ["/etcdserverpb.Watch/Watch", "/etcdserverpb.Lease/LeaseKeepAlive", "/etcdserverpb.Maintenance/Snapshot", "/v3electionpb.Election/Observe"];

/// Whether `path` is a stream that [`LeaderLoss::cut`] applies to.
pub fn is_stream(path: &str) -> bool {
    STREAMS.contains(&path)
}

/// Tells open require-leader streams that the member lost its leader: a
/// counter that goes up each time the monitor decides so.
#[derive(Clone)]
pub struct LeaderLoss {
    losses: Arc<watch::Sender<u64>>,
}

impl LeaderLoss {
    /// Starts the monitor for `ctx`'s member on the current tokio runtime.
    /// It looks once per election timeout and stops when the context is
    /// dropped.
    pub fn monitor(ctx: &Arc<Context>) -> LeaderLoss {
        let losses = Arc::new(watch::Sender::new(0u64));
        let period = ctx.node.election_timeout.max(std::time::Duration::from_millis(10));
        let (weak, tx): (Weak<Context>, _) = (Arc::downgrade(ctx), losses.clone());
        tokio::spawn(async move {
            let mut without = 0u32;
            loop {
                tokio::time::sleep(period).await;
                let Some(ctx) = weak.upgrade() else { return };
                if ctx.node.leader().is_some() {
                    without = 0;
                    continue;
                }
                without = without.saturating_add(1);
                if without >= NO_LEADER_ROUNDS {
                    tracing::warn!("no leader for {without} election timeouts: ending require-leader streams");
                    tx.send_modify(|n| *n += 1);
                }
            }
        });
        LeaderLoss { losses }
    }

    /// `body`, ended with `Unavailable` and `etcdserver: no leader` at the
    /// monitor's next decision that the leader is lost.
    pub fn cut(&self, body: Body) -> Body {
        let mut rx = self.losses.subscribe();
        let lost: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            if rx.changed().await.is_err() {
                // The monitor is gone with the server: never cut.
                std::future::pending::<()>().await;
            }
        });
        Body::new(Cut { inner: body, lost, ended: false })
    }
}

/// A response body that ends with a no-leader status once `lost` is ready.
struct Cut {
    inner: Body,
    lost: Pin<Box<dyn Future<Output = ()> + Send>>,
    ended: bool,
}

impl HttpBody for Cut {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.lost.as_mut().poll(cx).is_ready() {
            self.ended = true;
            // Dropping the stream's body lets the service see its client go.
            self.inner = Body::empty();
            let mut trailers = http::HeaderMap::new();
            let status = tonic::Status::from(crate::error::Error::NoLeader);
            trailers.insert("grpc-status", http::HeaderValue::from(status.code() as i32));
            if let Ok(v) = http::HeaderValue::from_str(&status.message().replace(' ', "%20")) {
                trailers.insert("grpc-message", v);
            }
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
