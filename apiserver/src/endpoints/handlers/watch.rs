//! WATCH (kube `handlers/watch.go`): a chunked stream of newline-delimited
//! JSON events `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":...}`,
//! served from the watch cache (or the store, for resources it does not
//! cache).
//!
//! Parameters (Kubernetes api-concepts, "Efficient detection of changes"
//! and "Streaming lists"):
//! - `resourceVersion`: unset = the current state (consistent) as ADDED
//!   events, then changes; `"0"` = any state, then changes; `N` = changes
//!   after N, or an ERROR event with 410 Expired ("too old resource
//!   version") when N has left the cache's window.
//! - `sendInitialEvents=true` with `resourceVersionMatch=NotOlderThan`: the
//!   state first, ended by a BOOKMARK annotated `k8s.io/initial-events-end`.
//! - `allowWatchBookmarks=true`: periodic BOOKMARKs carrying the latest
//!   resourceVersion, and a last one when the server shuts down, so the
//!   client resumes from it on another server.
//! - `timeoutSeconds` (default: a random 30–60 minutes), after which the
//!   stream ends normally.
//! - label and field selectors: an object that stops matching arrives as
//!   DELETED, one that starts matching as ADDED.
//!
//! Objects the cache has encoded are written as shared bytes between a
//! static prefix and suffix: no per-watcher copy. Table output (kubectl
//! `get -w`) carries `columnDefinitions` only in the first event.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::list::{int_params, invalid_options, parse_rv, selectors};
use super::Scope;
use crate::endpoints::negotiation::{self, Output};
use crate::endpoints::Response;
use crate::errors::{Cause, Status};
use crate::registry::rest::{EventType, WatchEvent, WatchOptions, WatchStream, INITIAL_EVENTS_END};
use crate::storage::RevisionMatch;
use crate::watchcache::cacher::BOOKMARK_INTERVAL;

type FrameResult = Result<Frame<Bytes>, std::io::Error>;

/// How long a watch may take to end once the server shuts down: enough
/// for the watch cache to flush what the watcher has yet to read and its
/// last BOOKMARK.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// One watch event line `{"type":kind,"object":object}`, keys in kube's
/// order (a `json!` map would sort them).
fn frame(kind: &str, object: &Value) -> FrameResult {
    let mut b = format!("{{\"type\":\"{kind}\",\"object\":").into_bytes();
    serde_json::to_writer(&mut b, object).map_err(std::io::Error::other)?;
    b.extend_from_slice(b"}\n");
    Ok(Frame::data(Bytes::from(b)))
}

/// The bytes before an encoded object in a watch event of `kind`.
fn prefix(kind: EventType) -> Bytes {
    Bytes::from_static(match kind {
        EventType::Added => b"{\"type\":\"ADDED\",\"object\":",
        EventType::Modified => b"{\"type\":\"MODIFIED\",\"object\":",
        EventType::Deleted => b"{\"type\":\"DELETED\",\"object\":",
        EventType::Bookmark => b"{\"type\":\"BOOKMARK\",\"object\":",
    })
}

/// kube's `validateWatchOptions`.
fn validate(scope: &Scope) -> Result<(), Status> {
    let q = &scope.query;
    let mut causes = Vec::new();
    let m = q.get("resourceVersionMatch").unwrap_or("");
    let sie = q.get("sendInitialEvents");
    if sie.is_some() && m != "NotOlderThan" {
        causes.push(Cause::forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    if !m.is_empty() {
        if sie.is_none() {
            causes.push(Cause::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
        }
        if m != "NotOlderThan" {
            causes.push(Cause { reason: "FieldValueNotSupported".into(), message: format!("Unsupported value: {m:?}: supported values: \"NotOlderThan\""), field: "resourceVersionMatch".into() });
        }
        if q.get("continue").is_some_and(|c| !c.is_empty()) {
            causes.push(Cause::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid_options(causes))
    }
}

/// Handles `watch`.
///
/// # Errors
/// 400 for bad parameters, 422 for invalid option combinations. An expired
/// or too new start revision is reported in the stream as an ERROR event
/// (410 Expired / 504 Timeout), as kube does.
pub async fn handle(scope: Scope) -> Result<Response, Status> {
    let (timeout, _) = int_params(&scope)?;
    validate(&scope)?;
    let q = &scope.query;
    let rv = parse_rv(q.get("resourceVersion"))?;
    let rv_set = q.get("resourceVersion").is_some_and(|r| !r.is_empty());
    let selectors = selectors(&scope)?;
    let send_initial = q.get("sendInitialEvents").map(|_| q.flag("sendInitialEvents"));
    let bookmarks = q.flag("allowWatchBookmarks");
    // As kube's handler: 0 or unset picks a random 30-60 minutes; a
    // negative value is an already expired timer, so the watch ends at once.
    let timeout = match timeout {
        Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
        Some(t) if t < 0 => Duration::ZERO,
        _ => Duration::from_secs(rand::random_range(1800..3600)),
    };
    let read = crate::storage::WatchOptions {
        revision: rv,
        recursive: false,
        revision_match: if rv_set { RevisionMatch::NotOlderThan } else { RevisionMatch::Exact },
        initial_events: send_initial,
        initial_events_end: send_initial == Some(true),
        bookmarks,
        predicate: None,
    };
    let opts = WatchOptions { selectors, read, resource_version: q.get("resourceVersion").map(String::from) };
    let requested = q.get("resourceVersion").unwrap_or("").to_string();
    let watcher = scope.rest.watcher().ok_or_else(Status::method_not_allowed)?;
    let events = watcher.watch(&scope.context(), &scope.info.name, &opts).await?;
    let (tx, rx) = mpsc::channel::<FrameResult>(64);
    let ending = scope.state.health.watches_ending();
    let w = Writer { tx, resource: scope.resource().clone(), output: scope.output, include: scope.include, bookmarks, requested, ending };
    tokio::spawn(w.run(events, timeout));
    let body = StreamBody::new(ReceiverStream::new(rx)).boxed();
    let mut resp = http::Response::new(body);
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// Writes one watcher's events to its HTTP stream.
struct Writer {
    tx: mpsc::Sender<FrameResult>,
    resource: std::sync::Arc<crate::registry::Resource>,
    output: Output,
    include: negotiation::IncludeObject,
    bookmarks: bool,
    requested: String,
    /// Becomes true when the server shuts down.
    ending: tokio::sync::watch::Receiver<bool>,
}

impl Writer {
    async fn run(mut self, mut events: WatchStream, timeout: Duration) {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut first = true;
        let mut last_bookmark: Option<tokio::time::Instant> = None;
        // Once the server shuts down, the stream gets a short while to
        // deliver what is pending and its last bookmark (the watch cache
        // sends one and ends its watchers); then it ends either way.
        let mut ending = false;
        let mut ending_gone = false;
        loop {
            let ev = tokio::select! {
                e = events.recv() => e,
                _ = &mut deadline => return,
                _ = self.tx.closed() => return,
                r = self.ending.changed(), if !ending && !ending_gone => {
                    match r {
                        Ok(()) if *self.ending.borrow_and_update() => {
                            ending = true;
                            let drain = tokio::time::Instant::now() + SHUTDOWN_DRAIN;
                            if drain < deadline.deadline() {
                                deadline.as_mut().reset(drain);
                            }
                        }
                        Ok(()) => {}
                        Err(_) => ending_gone = true,
                    }
                    continue;
                }
            };
            let Some(ev) = ev else { return };
            let ev = match ev {
                Ok(ev) => ev,
                Err(crate::storage::Error::Compacted { compact_revision }) => {
                    let s = Status::expired(format!("too old resource version: {} ({compact_revision})", self.requested));
                    let _ = self.tx.send(frame("ERROR", &s.to_value())).await;
                    return;
                }
                Err(crate::storage::Error::TooLargeResourceVersion { requested, current }) => {
                    let _ = self.tx.send(frame("ERROR", &Status::too_large_resource_version(requested, current).to_value())).await;
                    return;
                }
                Err(e) => {
                    let s = Status::internal(e);
                    let _ = self.tx.send(frame("ERROR", &s.to_value())).await;
                    return;
                }
            };
            if ev.kind == EventType::Bookmark {
                let end = ev.object["metadata"]["annotations"][INITIAL_EVENTS_END] == "true";
                // Bookmarks from the store come with its progress; clients
                // get them only when asked, and at most every interval.
                if !end && (!self.bookmarks || (!ending && last_bookmark.is_some_and(|t| t.elapsed() < BOOKMARK_INTERVAL))) {
                    continue;
                }
                last_bookmark = Some(tokio::time::Instant::now());
                let mut obj = (*ev.object).clone();
                obj["kind"] = json!(self.resource.kind);
                obj["apiVersion"] = json!(self.resource.api_version());
                if self.tx.send(frame("BOOKMARK", &obj)).await.is_err() {
                    return;
                }
                continue;
            }
            if !self.send(ev, first).await {
                return;
            }
            first = false;
        }
    }

    /// Sends one change; false when the client is gone.
    async fn send(&self, ev: WatchEvent, first: bool) -> bool {
        if let (Output::Object, Some(encoded)) = (self.output, &ev.encoded) {
            for f in [prefix(ev.kind), encoded.clone(), Bytes::from_static(b"}\n")] {
                if self.tx.send(Ok(Frame::data(f))).await.is_err() {
                    return false;
                }
            }
            return true;
        }
        let object = match self.output {
            Output::Object => (*ev.object).clone(),
            Output::Metadata => negotiation::partial_metadata(&ev.object),
            Output::Table => {
                let rv = crate::meta::resource_version(&ev.object).to_string();
                negotiation::table(&self.resource, std::slice::from_ref(&*ev.object), &rv, None, self.include, first)
            }
        };
        self.tx.send(frame(ev.kind.as_str(), &object)).await.is_ok()
    }
}
