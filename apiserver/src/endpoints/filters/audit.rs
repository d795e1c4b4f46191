//! The audit filter (kube `filters/audit.go`), after authentication (the
//! user is known) and before impersonation and authorization (so refused
//! requests are recorded too, with the decision the later filters add).
//!
//! For a request the policy records, it:
//! 1. builds the event from the request (kube `NewEventFromRequest`) and
//!    puts its [`AuditContext`] in the request's extensions, where the
//!    impersonation filter records the impersonated user, the
//!    authorization filter its decision and reason, and the handlers the
//!    decoded request object;
//! 2. writes `RequestReceived`, and answers 500 if a `blocking-strict`
//!    backend could not store it;
//! 3. runs the rest of the chain; a panic is caught, written as `Panic`
//!    with a 500 status, and answered with 500;
//! 4. writes `ResponseStarted` when the response of a long-running
//!    request (watch, proxy, exec, attach, log, portforward) starts;
//! 5. writes `ResponseComplete` when the response body has been sent, or
//!    dropped because the client went away, with the response object at
//!    `RequestResponse` (not for long-running requests).
//!
//! Response bodies are copied only at `RequestResponse` or for error
//! codes (whose Status the event records); request bodies never: the
//! handlers hand over what they decoded.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::FutureExt as _;
use http_body_util::BodyExt as _;
use hyper::body::{Body as _, Frame};
use serde_json::Value;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use super::authorization::attributes;
use super::request_info::RequestInfo;
use crate::audit::backend::Backend;
use crate::audit::event::{Event, EventUser, ObjectReference, ResponseStatus};
use crate::audit::{AuditContext, Auditor, Level, RequestStamp, Stage};
use crate::authn::UserInfo;
use crate::errors::Status;

/// The peer address of a request's connection, set by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr(pub SocketAddr);

/// kube's `maxUserAgentLength`.
const MAX_USER_AGENT: usize = 1024;
/// Response bodies larger than this are not kept in the record.
const MAX_CAPTURE_BYTES: usize = 64 * 1024 * 1024;
/// Bodies up to this size are kept at every level, in case they are a
/// Status.
const MAX_STATUS_BYTES: u64 = 4096;
/// How a Status shows in a JSON body.
const STATUS_KIND: &[u8] = br#""kind":"Status""#;
/// kube's answer to a request whose handler panicked (`WithPanicRecovery`).
const PANIC_TEXT: &str = "This request caused apiserver to panic. Look in the logs for details.";

/// The request's source IPs as kube's `utilnet.SourceIPs`: the valid
/// addresses of `X-Forwarded-For`, then `X-Real-Ip` unless listed
/// already, then the peer unless it is the last one listed.
pub fn source_ips(req: &Request) -> Vec<String> {
    let mut ips: Vec<std::net::IpAddr> = Vec::new();
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or("");
    for part in header("x-forwarded-for").split(',') {
        if let Ok(ip) = part.trim().parse() {
            ips.push(ip);
        }
    }
    if let Ok(ip) = header("x-real-ip").parse() {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if let Some(RemoteAddr(addr)) = req.extensions().get::<RemoteAddr>() {
        let ip = addr.ip().to_canonical();
        if ips.last() != Some(&ip) {
            ips.push(ip);
        }
    }
    ips.iter().map(ToString::to_string).collect()
}

/// A new event at `level` for `req` (kube `NewEventFromRequest`); `user`
/// is `None` when authentication failed.
pub fn new_event(req: &Request, info: &RequestInfo, user: Option<&UserInfo>, level: Level) -> Event {
    let stamp = req.extensions().get::<RequestStamp>().cloned().unwrap_or_else(|| RequestStamp { audit_id: crate::meta::new_uid(), received: std::time::SystemTime::now() });
    let mut user_agent = req.headers().get(http::header::USER_AGENT).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default();
    if user_agent.len() > MAX_USER_AGENT {
        let mut cut = MAX_USER_AGENT;
        while !user_agent.is_char_boundary(cut) {
            cut -= 1;
        }
        user_agent.truncate(cut);
        user_agent.push_str("...TRUNCATED");
    }
    let object_ref = info.is_resource_request.then(|| ObjectReference {
        resource: info.resource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        api_group: info.api_group.clone(),
        api_version: info.api_version.clone(),
        subresource: info.subresource.clone(),
        ..Default::default()
    });
    Event {
        kind: "Event",
        api_version: "audit.k8s.io/v1",
        level,
        audit_id: stamp.audit_id,
        stage: Stage::RequestReceived,
        request_uri: req.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| req.uri().path().to_string()),
        verb: info.verb.clone(),
        user: user.map(EventUser::from).unwrap_or_default(),
        impersonated_user: None,
        source_ips: source_ips(req),
        user_agent,
        object_ref,
        response_status: None,
        request_object: None,
        response_object: None,
        request_received_timestamp: stamp.received,
        stage_timestamp: stamp.received,
        annotations: Default::default(),
    }
}

/// kube's `BasicLongRunningRequestCheck` with the verbs `watch` and
/// `proxy` and the subresources `attach`, `exec`, `proxy`, `log` and
/// `portforward`.
pub fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy") || (info.is_resource_request && matches!(info.subresource.as_str(), "attach" | "exec" | "proxy" | "log" | "portforward"))
}

/// The filter.
pub struct WithAudit {
    next: Arc<dyn Handler>,
    auditor: Arc<Auditor>,
}

impl WithAudit {
    /// Wraps `next`, recording what `auditor`'s policy asks for.
    pub fn wrap(next: Arc<dyn Handler>, auditor: Arc<Auditor>) -> Arc<dyn Handler> {
        Arc::new(WithAudit { next, auditor })
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into())
}

impl Handler for WithAudit {
    fn call(&self, mut req: Request) -> BoxFuture<'_, Response> {
        Box::pin(async move {
            let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
            let user = req.extensions().get::<UserInfo>().cloned().unwrap_or_default();
            let config = self.auditor.policy.evaluate(&attributes(&user, &info), true).clone();
            if config.level == Level::None {
                return self.next.call(req).await;
            }
            let ctx = AuditContext::new(config.clone(), new_event(&req, &info, Some(&user), config.level));
            req.extensions_mut().insert(ctx.clone());
            let backend = self.auditor.backend.clone();
            if let Some(ev) = ctx.event_at(Stage::RequestReceived, false) {
                if !backend.process(ev).await {
                    return responses::status(&Status::internal("failed to store audit event"));
                }
            }
            let long_running = is_long_running(&info);
            let resp = match std::panic::AssertUnwindSafe(self.next.call(req)).catch_unwind().await {
                Ok(r) => r,
                Err(payload) => {
                    let message = format!("APIServer panic'd: {}", panic_text(payload.as_ref()));
                    tracing::error!("{message}");
                    ctx.set_response_status(ResponseStatus { status: "Failure".into(), message, reason: crate::errors::reason::INTERNAL_ERROR.into(), ..ResponseStatus::code(500) });
                    if let Some(ev) = ctx.event_at(Stage::Panic, true) {
                        backend.process(ev).await;
                    }
                    return responses::text(500, PANIC_TEXT);
                }
            };
            let code = resp.status().as_u16();
            ctx.log_response_code(code);
            if long_running {
                if let Some(ev) = ctx.event_at(Stage::ResponseStarted, false) {
                    backend.process(ev).await;
                }
            }
            // A Status answer (an error, a delete's Success) is recorded at
            // every level, as kube's LogResponseObject does: small bodies are
            // kept to look for one.
            let small = resp.body().size_hint().exact().is_some_and(|n| n <= MAX_STATUS_BYTES);
            let capture = (config.level >= Level::RequestResponse && !long_running) || code >= 400 || (small && !long_running);
            let content_type = resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            resp.map(move |inner| AuditedBody { inner, finish: Some(Finish { ctx, backend, code, content_type, captured: capture.then(Vec::new) }), pending: std::sync::Mutex::new(None) }.boxed())
        })
    }
}

/// What is left to do once a response body ends.
struct Finish {
    ctx: Arc<AuditContext>,
    backend: Arc<dyn Backend>,
    code: u16,
    content_type: String,
    /// The body so far, when it is kept; `None` once over the limit.
    captured: Option<Vec<u8>>,
}

impl Finish {
    fn keep(&mut self, data: &[u8]) {
        if let Some(buf) = self.captured.as_mut() {
            if buf.len() + data.len() > MAX_CAPTURE_BYTES {
                self.captured = None;
            } else {
                buf.extend_from_slice(data);
            }
        }
    }

    /// The `ResponseComplete` event.
    fn event(self) -> (Arc<dyn Backend>, Option<Event>) {
        let whole = self.ctx.level() >= Level::RequestResponse;
        let body = self.captured.filter(|b| whole || self.code >= 400 || b.windows(STATUS_KIND.len()).any(|w| w == STATUS_KIND)).and_then(|b| {
            let mime = self.content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
            match mime.as_str() {
                "application/yaml" => serde_saphyr::from_slice::<Value>(&b).ok(),
                m if m == "application/json" || m.ends_with("+json") || m.is_empty() => serde_json::from_slice::<Value>(&b).ok(),
                _ => None,
            }
        });
        if body.is_some() || self.code >= 400 {
            self.ctx.log_response(self.code, body);
        }
        (self.backend, self.ctx.event_at(Stage::ResponseComplete, true))
    }
}

/// A response body that records `ResponseComplete` when it ends or is
/// dropped; it reports its end only after the event is handed over, so a
/// blocking backend holds the response back rather than queue without
/// bound.
struct AuditedBody {
    inner: super::super::Body,
    finish: Option<Finish>,
    /// The hand-over in progress (a `Mutex` only to make the body `Sync`).
    pending: std::sync::Mutex<Option<BoxFuture<'static, ()>>>,
}

impl hyper::body::Body for AuditedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            let pending = this.pending.get_mut().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = pending.as_mut() {
                return match p.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        *pending = None;
                        Poll::Ready(None)
                    }
                    Poll::Pending => Poll::Pending,
                };
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let (Some(data), Some(f)) = (frame.data_ref(), this.finish.as_mut()) {
                        f.keep(data);
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(None) => {
                    let Some(f) = this.finish.take() else { return Poll::Ready(None) };
                    let (backend, event) = f.event();
                    let Some(event) = event else { return Poll::Ready(None) };
                    *pending = Some(Box::pin(async move {
                        backend.process(event).await;
                    }));
                }
                other => return other,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.finish.is_none() && self.pending.lock().map(|p| p.is_none()).unwrap_or(true) && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for AuditedBody {
    fn drop(&mut self) {
        if let Some(f) = self.finish.take() {
            let (backend, event) = f.event();
            if let Some(event) = event {
                backend.process_now(event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::backend::{Buffered, Mode, Writer};
    use crate::audit::policy::{parse, Evaluator};

    /// Events written by a real [`Buffered`] backend, kept in memory.
    struct Collect(Arc<parking_lot::Mutex<Vec<Event>>>);

    impl Writer for Collect {
        fn write(&mut self, events: &[Event]) -> Result<(), crate::audit::backend::Error> {
            self.0.lock().extend_from_slice(events);
            Ok(())
        }
    }

    struct Panics;

    impl Handler for Panics {
        fn call(&self, _req: Request) -> BoxFuture<'_, Response> {
            Box::pin(async { panic!("boom") })
        }
    }

    struct Ok200;

    impl Handler for Ok200 {
        fn call(&self, _req: Request) -> BoxFuture<'_, Response> {
            Box::pin(async { responses::json(200, &serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [{}]}})) })
        }
    }

    fn request(path: &str) -> Request {
        let mut req = http::Request::builder().uri(path).header("user-agent", "test").header("x-forwarded-for", "10.0.0.1, bad, 10.0.0.2").body(responses::full(Bytes::new())).unwrap_or_default();
        let info = super::super::request_info::resolve(&http::Method::GET, req.uri().path(), req.uri().query());
        req.extensions_mut().insert(info);
        req.extensions_mut().insert(UserInfo { name: "bob".into(), ..Default::default() });
        req.extensions_mut().insert(RemoteAddr(SocketAddr::from(([127, 0, 0, 1], 4000))));
        req
    }

    fn auditor(policy: &str) -> (Arc<Auditor>, Arc<parking_lot::Mutex<Vec<Event>>>) {
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let backend = Buffered::start("test", Mode::BlockingStrict, 10, 10, Box::new(Collect(seen.clone()))).unwrap_or_else(|e| panic!("{e}"));
        let policy = Evaluator::new(parse(policy.as_bytes()).unwrap_or_else(|e| panic!("{e}")));
        (Arc::new(Auditor { policy: Arc::new(policy), backend }), seen)
    }

    #[tokio::test]
    async fn a_panic_is_recorded_at_stage_panic_with_500() {
        let (a, seen) = auditor("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n");
        let chain = WithAudit::wrap(Arc::new(Panics), a.clone());
        let resp = chain.call(request("/api/v1/namespaces/a/configmaps/x")).await;
        assert_eq!(resp.status(), 500);
        a.backend.flush().await;
        let events = seen.lock().clone();
        let stages: Vec<Stage> = events.iter().map(|e| e.stage).collect();
        assert_eq!(stages, vec![Stage::RequestReceived, Stage::Panic]);
        let s = events[1].response_status.clone().unwrap_or_default();
        assert_eq!((s.code, s.reason.as_str(), s.message.as_str()), (500, "InternalError", "APIServer panic'd: boom"));
        assert_eq!(events[0].source_ips, vec!["10.0.0.1", "10.0.0.2", "127.0.0.1"]);
    }

    #[tokio::test]
    async fn response_objects_at_request_response_without_managed_fields() {
        let (a, seen) = auditor("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitManagedFields: true\nrules:\n- level: RequestResponse\n  omitStages: [RequestReceived]\n");
        let chain = WithAudit::wrap(Arc::new(Ok200), a.clone());
        let resp = chain.call(request("/api/v1/namespaces/a/configmaps/x")).await;
        let body = resp.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        assert!(!body.is_empty());
        a.backend.flush().await;
        let events = seen.lock().clone();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].stage, Stage::ResponseComplete);
        assert_eq!(events[0].response_object, Some(serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "a"}})));
        assert_eq!(events[0].response_status, Some(ResponseStatus::code(200)));
    }
}
