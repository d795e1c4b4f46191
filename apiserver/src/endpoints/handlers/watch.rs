//! WATCH (kube `handlers/watch.go`): a chunked stream of newline-delimited
//! JSON events `{"type":"ADDED|MODIFIED|DELETED|ERROR","object":...}`, read
//! straight from the store.
//!
//! With selectors, an object that stops matching is reported as DELETED and
//! one that starts matching as ADDED (kube's filtered watch). For Table
//! output only the first event carries `columnDefinitions`. The stream ends
//! after `timeoutSeconds` (default: a random 30–60 minutes), which kubectl
//! treats as a normal end.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::list::{parse_rv, predicate};
use super::Scope;
use crate::endpoints::negotiation::{self, Output};
use crate::endpoints::Response;
use crate::errors::Status;
use crate::storage::{EventType, WatchEvent, WatchOptions};

fn frame(v: &Value) -> Result<Frame<Bytes>, std::io::Error> {
    let mut b = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    b.push(b'\n');
    Ok(Frame::data(Bytes::from(b)))
}

/// Handles `watch`.
///
/// # Errors
/// 400 for bad parameters; a compacted start revision is reported in the
/// stream as an ERROR event with 410 Expired, as kube does.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let rv = parse_rv(scope.query.get("resourceVersion"))?;
    let pred = predicate(&scope)?;
    if scope.query.flag("sendInitialEvents") {
        return Err(Status::invalid("meta.k8s.io", "ListOptions", "", vec![crate::errors::Cause::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")]));
    }
    let timeout = match scope.query.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()) {
        Some(t) if t > 0 => Duration::from_secs(t),
        _ => Duration::from_secs(rand::random_range(1800..3600)),
    };
    let single = !scope.info.name.is_empty();
    let (key, recursive) = if single { (scope.key(), false) } else { (scope.prefix(), true) };
    let mut events = scope.storage.watch(&key, &WatchOptions { revision: rv, recursive }).await.map_err(|e| scope.storage_error(e, &scope.info.name))?;

    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(64);
    let resource = scope.resource.clone();
    let output = scope.output;
    let include = scope.include;
    let requested_rv = rv;
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut first = true;
        loop {
            let ev = tokio::select! {
                e = events.recv() => e,
                _ = &mut deadline => return,
                _ = tx.closed() => return,
            };
            let Some(ev) = ev else { return };
            let (kind, obj) = match ev {
                Ok(WatchEvent { kind, object, prev }) => {
                    let Some(kind) = filtered(kind, &object, prev.as_ref(), pred.as_ref()) else { continue };
                    (kind, object)
                }
                Err(crate::storage::Error::Compacted { compact_revision }) => {
                    let s = Status::expired(format!("too old resource version: {requested_rv} ({compact_revision})"));
                    let _ = tx.send(frame(&json!({"type": "ERROR", "object": s.to_value()}))).await;
                    return;
                }
                Err(e) => {
                    let s = Status::internal(e);
                    let _ = tx.send(frame(&json!({"type": "ERROR", "object": s.to_value()}))).await;
                    return;
                }
            };
            let object = match output {
                Output::Object => obj,
                Output::Metadata => negotiation::partial_metadata(&obj),
                Output::Table => {
                    let rv = crate::meta::resource_version(&obj).to_string();
                    negotiation::table(&resource, std::slice::from_ref(&obj), &rv, None, include, first)
                }
            };
            first = false;
            if tx.send(frame(&json!({"type": kind, "object": object}))).await.is_err() {
                return;
            }
        }
    });
    let body = StreamBody::new(ReceiverStream::new(rx)).boxed();
    let mut resp = http::Response::new(body);
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// The event type a filtered watcher sees, or `None` to skip the event.
fn filtered(kind: EventType, obj: &Value, prev: Option<&Value>, pred: Option<&crate::storage::Predicate>) -> Option<&'static str> {
    let Some(p) = pred else {
        return Some(match kind {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        });
    };
    match kind {
        EventType::Added => p(obj).then_some("ADDED"),
        EventType::Deleted => p(prev.unwrap_or(obj)).then_some("DELETED"),
        EventType::Modified => match (p(obj), prev.map(|o| p(o))) {
            (true, Some(true)) => Some("MODIFIED"),
            (true, _) => Some("ADDED"),
            (false, Some(true)) => Some("DELETED"),
            (false, _) => None,
        },
    }
}
