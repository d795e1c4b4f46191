//! etcd `Watch` service (etcd `v3rpc/watch.go` + `mvcc/watcher.go`).
//!
//! One task per gRPC stream owns every watcher of that stream. The task
//! receives applied revisions from the [`WatchHub`](crate::mvcc::WatchHub)
//! in order and hands each watcher the matching events of a revision in one
//! response. Watchers that start in the past first replay history from disk.
//! If the task falls behind the hub (slow client), it re-reads the missed
//! revisions from disk, so no event is lost or repeated (etcd
//! api_guarantees: ordered, unique, reliable, atomic).

use std::collections::BTreeMap;
use std::sync::Arc;

use proto::etcdserverpb::server::Watch;
use proto::etcdserverpb::{filter_type, WatchRequest, WatchRequestUnion, WatchResponse};
use proto::mvccpb::{event_type, Event};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use super::auth::Credentials;
use super::Ctx;
use crate::auth::perms::Access;
use crate::error::Error;
use crate::mvcc::{in_range, RevisionEvents};

/// Most revisions read from disk in one catch-up step.
const HISTORY_STEP: usize = 1000;
/// Most events in one response while catching up.
const MAX_EVENTS_PER_RESPONSE: usize = 1000;
/// etcd's cancel reason for a create request whose `watch_id` is taken
/// on the stream (mvcc `ErrWatcherDuplicateID`).
const DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";
/// etcd's cancel reason for a `range_end` at or below the key (mvcc
/// `ErrEmptyWatcherRange`).
const EMPTY_RANGE: &str = "mvcc: watcher range is empty";

/// The Watch service.
pub struct WatchService {
    ctx: Ctx,
}

impl WatchService {
    /// A watch service over the shared context.
    pub fn new(ctx: Ctx) -> Self {
        WatchService { ctx }
    }
}

struct Watcher {
    key: Vec<u8>,
    end: Vec<u8>,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    progress_notify: bool,
    /// Set when an event was sent since the last progress tick.
    sent_since_tick: bool,
}

impl Watcher {
    fn select(&self, events: &[Event]) -> Vec<Event> {
        events
            .iter()
            .filter(|e| {
                let Some(kv) = &e.kv else { return false };
                if !in_range(&kv.key, &self.key, &self.end) {
                    return false;
                }
                !((e.r#type == event_type::PUT && self.no_put) || (e.r#type == event_type::DELETE && self.no_delete))
            })
            .map(|e| {
                let mut e = e.clone();
                if !self.prev_kv {
                    e.prev_kv = None;
                }
                e
            })
            .collect()
    }
}

type Out = mpsc::Sender<Result<WatchResponse, Status>>;

struct StreamTask {
    ctx: Ctx,
    out: Out,
    watchers: BTreeMap<i64, Watcher>,
    next_id: i64,
    /// Last revision this stream has delivered (or skipped) for all watchers.
    last: i64,
    rx: broadcast::Receiver<Arc<RevisionEvents>>,
    /// Watchers whose start revision is still in the future.
    pending_start: BTreeMap<i64, i64>,
    /// Who opened the stream, checked at each create (etcd
    /// `isWatchPermitted`).
    creds: Credentials,
}

/// The stream ended (client gone); stop the task.
struct Closed;

impl StreamTask {
    async fn send(&self, resp: WatchResponse) -> Result<(), Closed> {
        self.out.send(Ok(resp)).await.map_err(|_| Closed)
    }

    fn resp(&self, watch_id: i64, revision: i64) -> WatchResponse {
        WatchResponse { header: self.ctx.header(revision), watch_id, ..Default::default() }
    }

    /// Sends `events` (already filtered) to one watcher, split into
    /// responses that never divide a revision.
    async fn deliver(&mut self, id: i64, revs: &[RevisionEvents]) -> Result<(), Closed> {
        let Some(w) = self.watchers.get(&id) else { return Ok(()) };
        let mut batch: Vec<Event> = Vec::new();
        let mut batch_rev = 0;
        let mut out = Vec::new();
        for r in revs {
            let evs = w.select(&r.events);
            if evs.is_empty() {
                continue;
            }
            if !batch.is_empty() && batch.len() + evs.len() > MAX_EVENTS_PER_RESPONSE {
                out.push((std::mem::take(&mut batch), batch_rev));
            }
            batch.extend(evs);
            batch_rev = r.revision;
        }
        if !batch.is_empty() {
            out.push((batch, batch_rev));
        }
        if out.is_empty() {
            return Ok(());
        }
        if let Some(w) = self.watchers.get_mut(&id) {
            w.sent_since_tick = true;
        }
        for (events, rev) in out {
            let mut resp = self.resp(id, rev);
            resp.events = events;
            self.send(resp).await?;
        }
        Ok(())
    }

    /// Replays `[from, to]` from disk to the given watchers. A compacted
    /// start cancels them with the compact revision, as etcd does.
    async fn replay(&mut self, ids: &[i64], from: i64, to: i64) -> Result<(), Closed> {
        let mut next = from;
        while next <= to {
            let store = self.ctx.store.clone();
            let chunk = tokio::task::spawn_blocking(move || store.history(next, to, HISTORY_STEP)).await;
            let chunk = match chunk {
                Ok(Ok(c)) => c,
                Ok(Err(Error::Compacted)) => {
                    let compact = self.ctx.store.compact_revision();
                    for id in ids {
                        if self.watchers.remove(id).is_some() {
                            let mut resp = self.resp(*id, self.ctx.store.current_revision());
                            resp.canceled = true;
                            resp.compact_revision = compact;
                            self.send(resp).await?;
                        }
                    }
                    return Ok(());
                }
                Ok(Err(e)) => {
                    let _ = self.out.send(Err(e.into())).await;
                    return Err(Closed);
                }
                Err(e) => {
                    let _ = self.out.send(Err(Status::internal(e.to_string()))).await;
                    return Err(Closed);
                }
            };
            let Some(last) = chunk.last().map(|r| r.revision) else { break };
            for id in ids {
                self.deliver(*id, &chunk).await?;
            }
            next = last + 1;
        }
        Ok(())
    }

    /// Why the stream's caller may not watch `[key, end)`, in etcd's words
    /// (the text of its gRPC error, as grpc-go prints it); `None` if it may.
    async fn auth_refusal(&self, key: &[u8], end: &[u8]) -> Option<String> {
        let checked = match self.creds.resolve(&self.ctx).await {
            Ok(who) => self.ctx.auth.check_key(who.as_ref(), Access::Read, key, end),
            Err(e) => Err(e),
        };
        let e = match checked {
            Ok(()) => return None,
            Err(e @ (Error::InvalidAuthToken | Error::AuthOldRevision | Error::UserEmpty)) => e,
            Err(_) => Error::PermissionDenied,
        };
        Some(format!("rpc error: code = {:?} desc = {e}", e.code()))
    }

    async fn on_request(&mut self, req: WatchRequest) -> Result<(), Closed> {
        match req.request_union {
            Some(WatchRequestUnion::CreateRequest(c)) => {
                let mut key = c.key;
                if key.is_empty() {
                    key = vec![0];
                }
                // etcd refuses a watch it cannot create with watch ID -1, so
                // the answer never names a live watch of the stream. A watch
                // the caller may not read is refused first, as etcd checks
                // permission before it creates the watch.
                let refusal = if let Some(reason) = self.auth_refusal(&key, &c.range_end).await {
                    Some(reason)
                } else if !c.range_end.is_empty() && c.range_end != [0] && key >= c.range_end {
                    Some(EMPTY_RANGE.to_string())
                } else if c.watch_id != 0 && self.watchers.contains_key(&c.watch_id) {
                    Some(DUPLICATE_ID.to_string())
                } else {
                    None
                };
                if let Some(reason) = refusal {
                    let mut resp = self.resp(-1, self.last);
                    resp.created = true;
                    resp.canceled = true;
                    resp.cancel_reason = reason;
                    return self.send(resp).await;
                }
                let id = if c.watch_id != 0 {
                    c.watch_id
                } else {
                    while self.watchers.contains_key(&self.next_id) {
                        self.next_id += 1;
                    }
                    let id = self.next_id;
                    self.next_id += 1;
                    id
                };
                let w = Watcher {
                    key,
                    end: c.range_end,
                    prev_kv: c.prev_kv,
                    no_put: c.filters.contains(&filter_type::NOPUT),
                    no_delete: c.filters.contains(&filter_type::NODELETE),
                    progress_notify: c.progress_notify,
                    sent_since_tick: false,
                };
                self.watchers.insert(id, w);
                let mut created = self.resp(id, self.last);
                created.created = true;
                self.send(created).await?;
                if c.start_revision > 0 && c.start_revision <= self.last {
                    self.replay(&[id], c.start_revision, self.last).await?;
                }
                // etcd takes a negative start revision for one below every
                // revision: compacted once the store was compacted.
                let compact = self.ctx.store.compact_revision();
                if c.start_revision < 0 && c.start_revision < compact {
                    self.watchers.remove(&id);
                    let mut resp = self.resp(id, self.ctx.store.current_revision());
                    resp.canceled = true;
                    resp.compact_revision = compact;
                    return self.send(resp).await;
                }
                // Future start revisions need no special case: events are
                // filtered by revision below, so none before the start go out.
                if c.start_revision > self.last + 1 {
                    self.pending_start.insert(id, c.start_revision);
                }
                Ok(())
            }
            Some(WatchRequestUnion::CancelRequest(c)) => {
                if self.watchers.remove(&c.watch_id).is_some() {
                    self.pending_start.remove(&c.watch_id);
                    let mut resp = self.resp(c.watch_id, self.last);
                    resp.canceled = true;
                    self.send(resp).await?;
                }
                Ok(())
            }
            Some(WatchRequestUnion::ProgressRequest(_)) => {
                self.drain().await?;
                let resp = self.resp(-1, self.last);
                self.send(resp).await
            }
            None => Ok(()),
        }
    }

    /// Delivers everything the hub has already published.
    async fn drain(&mut self) -> Result<(), Closed> {
        loop {
            match self.rx.try_recv() {
                Ok(r) => self.on_revision(r).await?,
                Err(broadcast::error::TryRecvError::Lagged(_)) => self.catch_up().await?,
                Err(_) => return Ok(()),
            }
        }
    }

    async fn catch_up(&mut self) -> Result<(), Closed> {
        let to = self.ctx.hub.published();
        let ids: Vec<i64> = self.watchers.keys().copied().collect();
        if to > self.last {
            self.replay_filtered(&ids, self.last + 1, to).await?;
            self.last = to;
        }
        Ok(())
    }

    async fn replay_filtered(&mut self, ids: &[i64], from: i64, to: i64) -> Result<(), Closed> {
        // Watchers with a future start revision skip what precedes it.
        let (waiting, ready): (Vec<i64>, Vec<i64>) = ids.iter().partition(|id| self.pending_start.get(id).is_some_and(|s| *s > from));
        self.replay(&ready, from, to).await?;
        for id in waiting {
            if let Some(start) = self.pending_start.get(&id).copied() {
                if start <= to {
                    self.pending_start.remove(&id);
                    self.replay(&[id], start, to).await?;
                }
            }
        }
        Ok(())
    }

    async fn on_revision(&mut self, r: Arc<RevisionEvents>) -> Result<(), Closed> {
        if r.revision <= self.last {
            return Ok(());
        }
        if r.revision > self.last + 1 {
            // A gap (e.g. a snapshot was installed): read it from disk.
            let ids: Vec<i64> = self.watchers.keys().copied().collect();
            self.replay_filtered(&ids, self.last + 1, r.revision - 1).await?;
        }
        self.last = r.revision;
        let ids: Vec<i64> = self.watchers.keys().copied().collect();
        let one = std::slice::from_ref(r.as_ref());
        for id in ids {
            if let Some(start) = self.pending_start.get(&id).copied() {
                if r.revision < start {
                    continue;
                }
                self.pending_start.remove(&id);
            }
            self.deliver(id, one).await?;
        }
        Ok(())
    }

    async fn on_tick(&mut self) -> Result<(), Closed> {
        let ids: Vec<i64> = self.watchers.iter().filter(|(_, w)| w.progress_notify).map(|(id, _)| *id).collect();
        for id in ids {
            let sent = self.watchers.get(&id).map(|w| w.sent_since_tick).unwrap_or(true);
            if !sent {
                let resp = self.resp(id, self.last);
                self.send(resp).await?;
            }
            if let Some(w) = self.watchers.get_mut(&id) {
                w.sent_since_tick = false;
            }
        }
        Ok(())
    }
}

type WatchStream = ReceiverStream<Result<WatchResponse, Status>>;

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = WatchStream;

    async fn watch(&self, req: Request<Streaming<WatchRequest>>) -> Result<Response<Self::WatchStream>, Status> {
        let creds = Credentials::of(&req);
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(128);
        let (hub_rx, last) = self.ctx.hub.subscribe();
        let mut task = StreamTask { ctx: self.ctx.clone(), out: tx, watchers: BTreeMap::new(), next_id: 0, last, rx: hub_rx, pending_start: BTreeMap::new(), creds };
        let interval = self.ctx.progress_notify_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            // A client that half-closes (ends its requests) still gets the
            // events of its watches, as from etcd; the stream ends when the
            // client goes away.
            let mut inbound_open = true;
            loop {
                let step = tokio::select! {
                    msg = inbound.next(), if inbound_open => match msg {
                        Some(Ok(req)) => task.on_request(req).await,
                        Some(Err(status)) => {
                            let _ = task.out.send(Err(super::inbound_error(status))).await;
                            Err(Closed)
                        }
                        None => {
                            inbound_open = false;
                            Ok(())
                        }
                    },
                    _ = task.out.closed() => Err(Closed),
                    r = task.rx.recv() => match r {
                        Ok(r) => task.on_revision(r).await,
                        Err(broadcast::error::RecvError::Lagged(_)) => task.catch_up().await,
                        Err(broadcast::error::RecvError::Closed) => Err(Closed),
                    },
                    _ = tick.tick() => task.on_tick().await,
                };
                if step.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
