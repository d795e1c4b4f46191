//! Plain HTTP on the client port, beside gRPC, and gRPC status fix-ups; the
//! metrics port.
//!
//! etcd answers `GET /health`, `GET /version` and `GET /metrics`
//! (Prometheus text, see [`crate::metrics`]) on its client URLs; health
//! probes, tools and scrapers rely on them. The `--listen-metrics-urls`
//! listeners answer `/metrics` and `/health` only ([`MetricsService`]). This layer answers those, and rewrites two
//! tonic statuses into what grpc-go (and so etcd) sends, since clients show
//! them verbatim: an oversized request, and a call to an unknown service or
//! method (tonic leaves the message empty).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use http_body_util::Full;
use tonic::body::Body;
use tower::{Layer, Service};

use super::maintenance::ETCD_VERSION;
use super::require_leader::{self, LeaderLoss};
use super::{Context, Ctx};

/// gRPC methods a learner serves (etcd `isRPCSupportedForLearner`); Range
/// only when serializable.
const LEARNER_SERVES: [&str; 2] = ["/etcdserverpb.Maintenance/Status", "/etcdserverpb.KV/Range"];

/// gRPC metadata by which a client asks that only a member with a leader
/// serve its request (etcd `rpctypes.MetadataRequireLeaderKey`, value
/// `true`).
const REQUIRE_LEADER_KEY: &str = "hasleader";

/// Services served on the client port, by gRPC name.
const SERVED: [&str; 6] = ["etcdserverpb.KV", "etcdserverpb.Watch", "etcdserverpb.Lease", "etcdserverpb.Maintenance", "etcdserverpb.Cluster", "etcdserverpb.Auth"];

/// The layer; see the module doc.
#[derive(Clone)]
pub struct ClientHttpLayer {
    ctx: Ctx,
    loss: LeaderLoss,
}

impl ClientHttpLayer {
    /// A layer answering from `ctx`. Starts the leader monitor of
    /// [`super::require_leader`] on the current tokio runtime.
    pub fn new(ctx: Ctx) -> Self {
        let loss = LeaderLoss::monitor(&ctx);
        ClientHttpLayer { ctx, loss }
    }
}

impl<S> Layer<S> for ClientHttpLayer {
    type Service = ClientHttp<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClientHttp { inner, ctx: self.ctx.clone(), loss: self.loss.clone() }
    }
}

/// The service made by [`ClientHttpLayer`].
#[derive(Clone)]
pub struct ClientHttp<S> {
    inner: S,
    ctx: Ctx,
    loss: LeaderLoss,
}

fn json(status: u16, body: String) -> http::Response<Body> {
    let mut resp = http::Response::new(Body::new(Full::new(Bytes::from(body))));
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp
}

impl<S> Service<http::Request<Body>> for ClientHttp<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let path = req.uri().path().to_string();
        if req.method() == http::Method::GET {
            match path.as_str() {
                "/health" | "/livez" | "/readyz" => {
                    let resp = health(&self.ctx);
                    return Box::pin(async move { Ok(resp) });
                }
                "/metrics" => {
                    let resp = metrics(&self.ctx);
                    return Box::pin(async move { Ok(resp) });
                }
                "/version" => {
                    let body = format!(r#"{{"etcdserver":"{ETCD_VERSION}","etcdcluster":"3.5.0"}}"#);
                    return Box::pin(async move { Ok(json(200, body)) });
                }
                _ => {}
            }
        }
        // A learner answers only Status and serializable Range (checked in
        // the KV service), as etcd's learner interceptor does.
        if path.starts_with("/etcdserverpb.") && !LEARNER_SERVES.contains(&path.as_str()) && self.ctx.node.is_learner() {
            let resp = tonic::Status::from(crate::error::Error::NotSupportedForLearner).into_http::<Body>();
            return Box::pin(async move { Ok(resp) });
        }
        // etcd's interceptors: a client that requires a leader (metadata
        // `hasleader: true`, clientv3.WithRequireLeader, as kube-apiserver
        // sets on its watches) gets `etcdserver: no leader` (Unavailable)
        // at once from a member that knows none, instead of waiting out
        // the request timeout.
        let require_leader = req.headers().get(REQUIRE_LEADER_KEY).is_some_and(|v| v.as_bytes() == b"true");
        if path.starts_with("/etcdserverpb.") && require_leader && self.ctx.node.leader().is_none() {
            let resp = tonic::Status::from(crate::error::Error::NoLeader).into_http::<Body>();
            return Box::pin(async move { Ok(resp) });
        }
        // An open require-leader stream ends if the leader is lost for a
        // while (see `require_leader`).
        let cut = (require_leader && require_leader::is_stream(&path)).then(|| self.loss.clone());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            let resp = match cut {
                Some(loss) => resp.map(|body| loss.cut(body)),
                None => resp,
            };
            Ok(unknown_method_status(grpc_limit_status(resp), &path))
        })
    }
}

/// `GET /health`: 200 while this member knows a leader, else 503.
fn health(ctx: &Context) -> http::Response<Body> {
    if ctx.node.status().0.is_some() {
        json(200, r#"{"health":"true","reason":""}"#.to_string())
    } else {
        json(503, r#"{"health":"false","reason":"RAFT NO LEADER"}"#.to_string())
    }
}

/// `GET /metrics`: every metric in the Prometheus text format.
fn metrics(ctx: &Context) -> http::Response<Body> {
    let mut resp = http::Response::new(Body::new(Full::new(Bytes::from(scrape(ctx)))));
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    resp
}

fn text(status: http::StatusCode, body: &'static str) -> http::Response<Body> {
    let mut resp = http::Response::new(Body::new(Full::new(Bytes::from_static(body.as_bytes()))));
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

/// What the `--listen-metrics-urls` listeners serve: `/metrics` and
/// `/health` as on the client port, and nothing else, as etcd's metrics
/// mux (`etcdhttp.HandleMetricsHealth`): another path is Go's
/// `404 page not found`, and `/health` other than by GET is 405.
#[derive(Clone)]
pub struct MetricsService {
    ctx: Ctx,
}

impl MetricsService {
    /// A service answering from `ctx`.
    pub fn new(ctx: Ctx) -> Self {
        MetricsService { ctx }
    }
}

impl Service<http::Request<Body>> for MetricsService {
    type Response = http::Response<Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let resp = match req.uri().path() {
            "/metrics" => metrics(&self.ctx),
            "/health" if req.method() == http::Method::GET => health(&self.ctx),
            "/health" => text(http::StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
            _ => text(http::StatusCode::NOT_FOUND, "404 page not found\n"),
        };
        std::future::ready(Ok(resp))
    }
}

/// grpc-go's message for a call to a service or method that is not served:
/// `unknown service S` or `unknown method M for service S`.
fn unknown_method_status(mut resp: http::Response<Body>, path: &str) -> http::Response<Body> {
    let h = resp.headers();
    if h.get("grpc-status").map(|v| v.as_bytes()) != Some(b"12") {
        return resp;
    }
    if h.get("grpc-message").is_some_and(|v| !v.is_empty()) {
        return resp;
    }
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let (service, method) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let text = if SERVED.contains(&service) { format!("unknown method {method} for service {service}") } else { format!("unknown service {service}") };
    if let Ok(v) = http::HeaderValue::from_str(&text.replace(' ', "%20")) {
        resp.headers_mut().insert("grpc-message", v);
    }
    resp
}

/// Rewrites tonic's status for an oversized request into grpc-go's, which is
/// what etcd clients see from etcd: `ResourceExhausted` and
/// `grpc: received message larger than max (N vs. M)` (tonic says
/// `OutOfRange`).
fn grpc_limit_status(mut resp: http::Response<tonic::body::Body>) -> http::Response<tonic::body::Body> {
    const PREFIX: &str = "Error, decoded message length too large: found ";
    let msg = resp.headers().get("grpc-message").and_then(|v| v.to_str().ok()).map(str::to_string);
    let Some(msg) = msg else { return resp };
    let decoded = percent_decode(&msg);
    let Some(rest) = decoded.strip_prefix(PREFIX) else { return resp };
    let nums: Vec<&str> = rest.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).collect();
    if let [found, limit, ..] = nums.as_slice() {
        let text = format!("grpc: received message larger than max ({found} vs. {limit})");
        let h = resp.headers_mut();
        h.insert("grpc-status", http::HeaderValue::from_static("8"));
        if let Ok(v) = http::HeaderValue::from_str(&text.replace(' ', "%20")) {
            h.insert("grpc-message", v);
        }
    }
    resp
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Refreshes the gauges that mirror Raft and storage state from `ctx`, then
/// renders every metric in the Prometheus text format (version 0.0.4).
fn scrape(ctx: &Context) -> String {
    use openraft::async_runtime::watch::WatchReceiver;
    let m = crate::metrics::metrics();
    {
        let raft = ctx.node.raft.metrics();
        let r = raft.borrow_watched();
        let leader = ctx.node.effective_leader(&r);
        m.has_leader.set(i64::from(leader.is_some()));
        m.is_leader.set(i64::from(leader == Some(ctx.member_id)));
        m.proposals_committed.set(r.local_committed.as_ref().map(|l| l.index()).unwrap_or(0) as i64);
        m.proposals_applied.set(r.last_applied.as_ref().map(|l| l.index()).unwrap_or(0) as i64);
        m.raft_log_purged.set(r.purged.as_ref().map(|l| l.index()).unwrap_or(0) as i64);
        let learner = r.membership_config.membership().learner_ids().any(|id| id == ctx.member_id);
        m.is_learner.set(i64::from(learner));
    }
    m.db_total_size.set(crate::storage::db_size(ctx.store.db()));
    m.keys_total.set(ctx.store.index_len() as i64);
    m.current_revision.set(ctx.store.current_revision());
    m.compact_revision.set(ctx.store.compact_revision().max(0));
    m.server_id.with_label_values(&[crate::metrics::id_label(ctx.member_id).as_str()]).set(1);
    m.server_version.with_label_values(&[ETCD_VERSION]).set(1);
    crate::metrics::render()
}
