//! [`Kv`] on remote etcd endpoints (`--etcd-servers`), through the
//! `etcd-client` crate. Works against real etcd and against a standalone
//! raftstore.

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, WatchOptions};
use proto::mvccpb::event_type;
use tokio::sync::mpsc;

use super::embedded::{cas_from_pb, kv_from_pb};
use super::kv::{from_grpc, CasResult, EventBatch, EventKind, Kv, KvBatch, KvEvent, RangeResult, WriteOp};
use super::{Error, Result};

/// Event batches buffered per watcher.
const WATCH_BUFFER: usize = 256;
/// How often an idle watch asks etcd for a progress notification.
const PROGRESS_TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// A client of etcd endpoints.
#[derive(Clone)]
pub struct RemoteKv {
    client: Client,
}

/// Attempts of one request while endpoints fail (a request goes to any of
/// the endpoints; a dead one fails it until the channel drops that
/// endpoint).
const ATTEMPTS: u32 = 6;
/// Pause before the second attempt; it doubles for each next one.
const RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether a failed request may be sent again: reads always when an
/// endpoint is unavailable; writes only when they never left this process
/// (the connection to the endpoint could not be made), as etcd's clientv3
/// retries mutations only when no connection was available.
fn retriable(e: &etcd_client::Error, idempotent: bool) -> bool {
    let (unavailable, message) = match e {
        etcd_client::Error::GRpcStatus(s) => (s.code() == tonic::Code::Unavailable, s.message().to_string()),
        etcd_client::Error::TransportError(t) => (true, t.to_string()),
        _ => return false,
    };
    unavailable && (idempotent || message.contains("connect error"))
}

/// Runs `call` until it succeeds, fails for good, or [`ATTEMPTS`] are spent.
async fn with_retries<T, F, Fut>(idempotent: bool, mut call: F) -> std::result::Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut backoff = RETRY_BACKOFF;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e) if attempt < ATTEMPTS && retriable(&e, idempotent) => {
                tracing::debug!("etcd request failed, attempt {attempt} of {ATTEMPTS}: {e}");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
                attempt += 1;
            }
            r => return r,
        }
    }
}

fn map_err(e: etcd_client::Error) -> Error {
    match e {
        etcd_client::Error::GRpcStatus(s) => from_grpc(&s),
        etcd_client::Error::TransportError(t) => Error::Unavailable(t.to_string()),
        other => Error::Internal(other.to_string()),
    }
}

/// Client TLS to etcd (kube-apiserver's `--etcd-cafile`, `--etcd-certfile`
/// and `--etcd-keyfile`), as PEM bytes.
#[derive(Clone, Debug, Default)]
pub struct Tls {
    /// CA certificates that verify the servers' certificates.
    pub ca: Vec<u8>,
    /// Client certificate chain and key, if etcd asks for one
    /// (`--client-cert-auth`).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl RemoteKv {
    /// Connects to `endpoints` (`http://host:port`, or `https://host:port`
    /// with `tls`). Requests go to any endpoint that is up; one that goes
    /// down is skipped until it is back.
    ///
    /// # Errors
    /// [`Error::Unavailable`] if no endpoint can be reached;
    /// [`Error::Internal`] for URLs or TLS material the client refuses.
    pub async fn connect(endpoints: &[String], tls: Option<&Tls>) -> Result<Self> {
        // kube-apiserver's etcd client keep-alive: a member that stops
        // answering is noticed within 40 s even without traffic.
        let mut opts =
            etcd_client::ConnectOptions::new().with_keep_alive(std::time::Duration::from_secs(30), std::time::Duration::from_secs(10)).with_connect_timeout(std::time::Duration::from_secs(20));
        if let Some(tls) = tls {
            let mut t = etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(&tls.ca));
            if let Some((cert, key)) = &tls.identity {
                t = t.identity(etcd_client::Identity::from_pem(cert, key));
            }
            opts = opts.with_tls(t);
        }
        let client = Client::connect(endpoints, Some(opts)).await.map_err(map_err)?;
        Ok(RemoteKv { client })
    }

    /// The client, for maintenance calls beside [`Kv`] (compaction).
    pub fn client(&self) -> Client {
        self.client.clone()
    }
}

#[async_trait]
impl Kv for RemoteKv {
    async fn range(&self, key: &[u8], end: &[u8], revision: i64, limit: i64) -> Result<RangeResult> {
        let mut opts = GetOptions::new().with_revision(revision).with_limit(limit);
        if !end.is_empty() {
            opts = opts.with_range(end.to_vec());
        }
        let resp = with_retries(true, || {
            let (mut client, key, opts) = (self.client.clone(), key.to_vec(), opts.clone());
            async move { client.get(key, Some(opts)).await }
        })
        .await
        .map_err(map_err)?
        .0;
        Ok(RangeResult { revision: resp.header.as_ref().map(|h| h.revision).unwrap_or(0), more: resp.more, kvs: resp.kvs.into_iter().map(kv_from_pb).collect() })
    }

    async fn compare_and_write(&self, key: &[u8], expected_mod_revision: i64, op: WriteOp) -> Result<CasResult> {
        let write = match op {
            WriteOp::Put(v) => TxnOp::put(key.to_vec(), v, None),
            WriteOp::Delete => TxnOp::delete(key.to_vec(), None),
        };
        let txn = Txn::new().when([Compare::mod_revision(key.to_vec(), CompareOp::Equal, expected_mod_revision)]).and_then([write]).or_else([TxnOp::get(key.to_vec(), None)]);
        let resp = with_retries(false, || {
            let (mut client, txn) = (self.client.clone(), txn.clone());
            async move { client.txn(txn).await }
        })
        .await
        .map_err(map_err)?
        .0;
        Ok(cas_from_pb(resp))
    }

    async fn watch(&self, key: &[u8], end: &[u8], start_revision: i64) -> Result<mpsc::Receiver<EventBatch>> {
        let mut opts = WatchOptions::new().with_prev_key().with_start_revision(start_revision);
        if !end.is_empty() {
            opts = opts.with_range(end.to_vec());
        }
        let (mut watcher, mut stream) = with_retries(true, || {
            let (mut client, key, opts) = (self.client.clone(), key.to_vec(), opts.clone());
            async move { client.watch(key, Some(opts)).await }
        })
        .await
        .map_err(map_err)?
        .split();
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROGRESS_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let msg = tokio::select! {
                    m = futures::StreamExt::next(&mut stream) => m.transpose(),
                    _ = tick.tick() => {
                        // etcd answers with a WatchResponse without events
                        // whose header carries the current revision.
                        let _ = watcher.request_progress().await;
                        continue;
                    }
                    _ = tx.closed() => return,
                };
                let resp = match msg {
                    Ok(Some(r)) => r.0,
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(map_err(e))).await;
                        return;
                    }
                };
                if resp.compact_revision != 0 {
                    let _ = tx.send(Err(Error::Compacted { compact_revision: resp.compact_revision })).await;
                    return;
                }
                if resp.canceled {
                    let _ = tx.send(Err(Error::Unavailable(format!("watch canceled: {}", resp.cancel_reason)))).await;
                    return;
                }
                let events: Vec<KvEvent> = resp
                    .events
                    .into_iter()
                    .filter_map(|e| {
                        let kind = if e.r#type == event_type::DELETE { EventKind::Delete } else { EventKind::Put };
                        Some(KvEvent { kind, kv: kv_from_pb(e.kv?), prev: e.prev_kv.map(kv_from_pb) })
                    })
                    .collect();
                let revision = resp.header.as_ref().map(|h| h.revision).unwrap_or(0);
                if events.is_empty() {
                    if resp.created || revision == 0 {
                        continue;
                    }
                    if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(Ok(KvBatch { revision, events })) {
                        return;
                    }
                    continue;
                }
                // A batch's revision is that of its last event: a response
                // may hold the events of several revisions, the header the
                // store's revision when it was sent.
                let last = events.last().map(|e| e.kv.mod_revision).unwrap_or(revision);
                if tx.send(Ok(KvBatch { revision: last, events })).await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }
}
