//! [`Kv`] on the raftstore member running in this process.
//!
//! Reads and txns go through raftstore's own KV service object, called
//! in-process (no socket, no protobuf encoding): it validates requests,
//! does ReadIndex for linearizable reads and proposes writes through Raft,
//! exactly as for a gRPC client. Watches read the member's watch hub and
//! catch up from MVCC history on disk, as raftstore's Watch service does.
//! This avoids a second copy of every object on the wire and a gRPC hop per
//! request, at the price of depending on raftstore's internals (`ctx`).

use std::sync::Arc;

use async_trait::async_trait;
use proto::etcdserverpb::server::Kv as _;
use proto::etcdserverpb::{compare_result, compare_target, Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, RequestOpRequest, ResponseOpResponse, TargetUnion, TxnRequest};
use proto::mvccpb::event_type;
use raftstore::mvcc::{in_range, RevisionEvents};
use raftstore::server::kv::KvService;
use raftstore::server::Ctx;
use tokio::sync::{broadcast, mpsc};

use super::kv::{CasResult, EventBatch, EventKind, KeyValue, Kv, KvBatch, KvEvent, RangeResult, WriteOp};
use super::{Error, Result};

/// Revisions read from disk per catch-up step.
const HISTORY_STEP: usize = 500;
/// Event batches buffered per watcher before the watcher waits.
const WATCH_BUFFER: usize = 256;
/// How often an idle watcher checks the hub for revisions it was not told
/// about (a snapshot install advances the store without events).
const PROGRESS_TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// The embedded member's KV.
pub struct EmbeddedKv {
    ctx: Ctx,
    kv: KvService,
}

impl EmbeddedKv {
    /// Wraps a started member's service context.
    pub fn new(ctx: Ctx) -> Self {
        EmbeddedKv { kv: KvService::new(ctx.clone()), ctx }
    }
}

pub(crate) fn kv_from_pb(kv: proto::mvccpb::KeyValue) -> KeyValue {
    KeyValue { key: kv.key, value: kv.value, create_revision: kv.create_revision, mod_revision: kv.mod_revision }
}

pub(crate) fn txn_request(key: &[u8], expected: i64, op: WriteOp) -> TxnRequest {
    let write = match op {
        WriteOp::Put(value) => RequestOpRequest::RequestPut(PutRequest { key: key.to_vec(), value, ..Default::default() }),
        WriteOp::Delete => RequestOpRequest::RequestDeleteRange(DeleteRangeRequest { key: key.to_vec(), ..Default::default() }),
    };
    TxnRequest {
        compare: vec![Compare { result: compare_result::EQUAL, target: compare_target::MOD, key: key.to_vec(), range_end: Vec::new(), target_union: Some(TargetUnion::ModRevision(expected)) }],
        success: vec![RequestOp { request: Some(write) }],
        failure: vec![RequestOp { request: Some(RequestOpRequest::RequestRange(RangeRequest { key: key.to_vec(), ..Default::default() })) }],
    }
}

pub(crate) fn cas_from_pb(resp: proto::etcdserverpb::TxnResponse) -> CasResult {
    let revision = resp.header.as_ref().map(|h| h.revision).unwrap_or(0);
    let mut current = None;
    if !resp.succeeded {
        for r in resp.responses {
            if let Some(ResponseOpResponse::ResponseRange(rr)) = r.response {
                current = rr.kvs.into_iter().next().map(kv_from_pb);
            }
        }
    }
    CasResult { succeeded: resp.succeeded, revision, current }
}

fn events_of(revs: &[RevisionEvents], key: &[u8], end: &[u8]) -> Vec<KvEvent> {
    let mut out = Vec::new();
    for r in revs {
        for e in &r.events {
            let Some(kv) = &e.kv else { continue };
            if !in_range(&kv.key, key, end) {
                continue;
            }
            let kind = if e.r#type == event_type::DELETE { EventKind::Delete } else { EventKind::Put };
            out.push(KvEvent { kind, kv: kv_from_pb(kv.clone()), prev: e.prev_kv.clone().map(kv_from_pb) });
        }
    }
    out
}

#[async_trait]
impl Kv for EmbeddedKv {
    async fn range(&self, key: &[u8], end: &[u8], revision: i64, limit: i64) -> Result<RangeResult> {
        let req = RangeRequest { key: key.to_vec(), range_end: end.to_vec(), revision, limit, ..Default::default() };
        let resp = self.kv.range(tonic::Request::new(req)).await.map_err(|s| self.map(&s))?.into_inner();
        Ok(RangeResult { revision: resp.header.as_ref().map(|h| h.revision).unwrap_or(0), more: resp.more, kvs: resp.kvs.into_iter().map(kv_from_pb).collect() })
    }

    async fn compare_and_write(&self, key: &[u8], expected_mod_revision: i64, op: WriteOp) -> Result<CasResult> {
        let req = txn_request(key, expected_mod_revision, op);
        let resp = self.kv.txn(tonic::Request::new(req)).await.map_err(|s| self.map(&s))?.into_inner();
        Ok(cas_from_pb(resp))
    }

    async fn watch(&self, key: &[u8], end: &[u8], start_revision: i64) -> Result<mpsc::Receiver<EventBatch>> {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let (hub_rx, published) = self.ctx.hub.subscribe();
        let w = HubWatcher { ctx: self.ctx.clone(), key: key.to_vec(), end: end.to_vec(), tx, rx: hub_rx, last: start_revision.max(1) - 1 };
        tokio::spawn(w.run(published));
        Ok(rx)
    }
}

impl EmbeddedKv {
    fn map(&self, s: &tonic::Status) -> Error {
        match super::kv::from_grpc(s) {
            Error::Compacted { .. } => Error::Compacted { compact_revision: self.ctx.store.compact_revision() },
            e => e,
        }
    }
}

/// One watcher over the member's hub: replays history from disk up to the
/// hub position, then follows the hub, re-reading from disk when it lags.
struct HubWatcher {
    ctx: Ctx,
    key: Vec<u8>,
    end: Vec<u8>,
    tx: mpsc::Sender<EventBatch>,
    rx: broadcast::Receiver<Arc<RevisionEvents>>,
    /// Last revision delivered (or skipped as irrelevant).
    last: i64,
}

/// The consumer went away.
struct Gone;

impl HubWatcher {
    async fn run(mut self, published: i64) {
        if self.replay(published).await.is_err() || self.progress().await.is_err() {
            return;
        }
        let mut tick = tokio::time::interval(PROGRESS_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let step = tokio::select! {
                r = self.rx.recv() => match r {
                    Ok(r) => self.on_revision(&r).await,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let to = self.ctx.hub.published();
                        self.replay(to).await
                    }
                    Err(broadcast::error::RecvError::Closed) => Err(Gone),
                },
                _ = tick.tick() => {
                    let to = self.ctx.hub.published();
                    match self.replay(to).await {
                        Ok(()) => self.progress().await,
                        Err(g) => Err(g),
                    }
                }
                _ = self.tx.closed() => Err(Gone),
            };
            if step.is_err() {
                return;
            }
        }
    }

    async fn send(&self, revision: i64, events: Vec<KvEvent>) -> std::result::Result<(), Gone> {
        if events.is_empty() {
            // Progress only: never wait for a busy consumer, a later batch
            // carries a newer revision anyway.
            return match self.tx.try_send(Ok(KvBatch { revision, events })) {
                Err(mpsc::error::TrySendError::Closed(_)) => Err(Gone),
                _ => Ok(()),
            };
        }
        tokio::select! {
            r = self.tx.send(Ok(KvBatch { revision, events })) => r.map_err(|_| Gone),
            _ = self.tx.closed() => Err(Gone),
        }
    }

    /// Tells the consumer how far this watcher has seen.
    async fn progress(&self) -> std::result::Result<(), Gone> {
        self.send(self.last, Vec::new()).await
    }

    async fn on_revision(&mut self, r: &RevisionEvents) -> std::result::Result<(), Gone> {
        if r.revision <= self.last {
            return Ok(());
        }
        if r.revision > self.last + 1 {
            self.replay(r.revision - 1).await?;
        }
        self.last = r.revision;
        self.send(r.revision, events_of(std::slice::from_ref(r), &self.key, &self.end)).await
    }

    /// Delivers `(last, to]` from disk.
    async fn replay(&mut self, to: i64) -> std::result::Result<(), Gone> {
        while self.last < to {
            let store = self.ctx.store.clone();
            let from = self.last + 1;
            let chunk = tokio::task::spawn_blocking(move || store.history(from, to, HISTORY_STEP)).await;
            let chunk = match chunk {
                Ok(Ok(c)) => c,
                Ok(Err(raftstore::Error::Compacted)) => {
                    let compact_revision = self.ctx.store.compact_revision();
                    let _ = self.tx.send(Err(Error::Compacted { compact_revision })).await;
                    return Err(Gone);
                }
                Ok(Err(e)) => {
                    let _ = self.tx.send(Err(Error::Internal(e.to_string()))).await;
                    return Err(Gone);
                }
                Err(e) => {
                    let _ = self.tx.send(Err(Error::Internal(e.to_string()))).await;
                    return Err(Gone);
                }
            };
            let Some(last) = chunk.last().map(|r| r.revision) else {
                self.last = to;
                break;
            };
            let events = events_of(&chunk, &self.key, &self.end);
            if !events.is_empty() {
                self.send(last, events).await?;
            }
            self.last = last;
        }
        Ok(())
    }
}
