//! Client workload: concurrent workers doing put, linearizable get,
//! txn-cas, delete and lease operations (grant, put with lease, revoke) on
//! a small key set with a unique value per write, plus watchers on the key
//! prefix (from a revision, with prev_kv and progress notifications,
//! resuming at the last delivered revision + 1 after any error).
//!
//! Each worker talks to one member, so a fault on that member shows up as
//! errors. Every operation is recorded with monotonic invocation and
//! completion times ([`crate::history::Operation`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, WatchOptions};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cluster::connect;
use crate::history::*;

/// Per-operation client timeout; past it the outcome is unknown.
pub const OP_TIMEOUT: Duration = Duration::from_secs(2);
/// A watch stream with no response for this long is treated as stalled
/// (e.g. its member is paused) and resumed on another member.
pub const WATCH_STALL: Duration = Duration::from_secs(3);
/// How often a watcher asks for a progress notification.
pub const PROGRESS_REQUEST_EVERY: Duration = Duration::from_millis(300);
/// Lease TTL in seconds: long enough that leases do not expire during a run.
pub const LEASE_TTL: i64 = 600;

/// Shared recording state.
pub struct Recorder {
    base: Instant,
    ops: Mutex<Vec<Operation>>,
    stop: AtomicBool,
    /// The final revision the watchers must reach (0 until known).
    final_revision: AtomicI64,
    /// Set when watchers must stop even if not caught up.
    give_up: AtomicBool,
    /// Key prefix.
    pub prefix: String,
    /// Number of keys.
    pub keys: usize,
}

impl Recorder {
    /// A recorder for keys `prefix0 .. prefix{keys-1}`.
    pub fn new(prefix: &str, keys: usize) -> Arc<Self> {
        Arc::new(Recorder {
            base: Instant::now(),
            ops: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            final_revision: AtomicI64::new(0),
            give_up: AtomicBool::new(false),
            prefix: prefix.to_string(),
            keys,
        })
    }

    /// Nanoseconds since the recorder was created.
    pub fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Appends an operation.
    pub fn record(&self, op: Operation) {
        self.ops.lock().push(op);
    }

    /// Tells workers to stop after their current operation.
    pub fn stop_workers(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Tells watchers the final revision to reach.
    pub fn set_final_revision(&self, rev: i64) {
        self.final_revision.store(rev, Ordering::SeqCst);
    }

    /// Tells watchers to stop now.
    pub fn give_up(&self) {
        self.give_up.store(true, Ordering::SeqCst);
    }

    /// The recorded operations.
    pub fn operations(&self) -> Vec<Operation> {
        self.ops.lock().clone()
    }
}

/// Whether an error leaves the outcome unknown (the request may have been
/// applied) or is a definite failure. etcd returns InvalidArgument,
/// NotFound, FailedPrecondition, OutOfRange and similar before applying.
pub fn classify(e: &etcd_client::Error) -> Outcome {
    use tonic::Code;
    let error = e.to_string();
    match e {
        etcd_client::Error::GRpcStatus(s)
            if matches!(
                s.code(),
                Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition | Code::OutOfRange | Code::AlreadyExists | Code::PermissionDenied | Code::Unauthenticated | Code::Unimplemented
            ) =>
        {
            Outcome::Failed { error }
        }
        _ => Outcome::Unknown { error },
    }
}

pub(crate) fn to_kv(kv: &etcd_client::KeyValue) -> Kv {
    Kv {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: String::from_utf8_lossy(kv.value()).into_owned(),
        mod_revision: kv.mod_revision(),
        create_revision: kv.create_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

pub(crate) fn to_event(e: &etcd_client::Event) -> Option<Event> {
    let kv = to_kv(e.kv()?);
    let kind = match e.event_type() {
        EventType::Put => EventKind::Put,
        EventType::Delete => EventKind::Delete,
    };
    Some(Event { kind, kv, prev_kv: e.prev_kv().map(to_kv) })
}

fn header_rev(h: Option<&etcd_client::ResponseHeader>) -> i64 {
    h.map(|h| h.revision()).unwrap_or(0)
}

/// Runs one request against the client and converts the result.
pub async fn execute(c: &mut Client, req: &Request) -> Result<Response, etcd_client::Error> {
    Ok(match req {
        Request::Put { key, value, lease } => {
            let opts = (*lease != 0).then(|| PutOptions::new().with_lease(*lease));
            let r = c.put(key.as_str(), value.as_str(), opts).await?;
            Response::Put { revision: header_rev(r.header()) }
        }
        Request::Get { key } => {
            let r = c.get(key.as_str(), None).await?;
            Response::Get { revision: header_rev(r.header()), kv: r.kvs().first().map(to_kv) }
        }
        Request::Cas { key, expected_mod_revision, value } => {
            let txn = Txn::new().when([Compare::mod_revision(key.as_str(), CompareOp::Equal, *expected_mod_revision)]).and_then([TxnOp::put(key.as_str(), value.as_str(), None)]);
            let r = c.txn(txn).await?;
            Response::Cas { revision: header_rev(r.header()), succeeded: r.succeeded() }
        }
        Request::Delete { key } => {
            let r = c.delete(key.as_str(), None).await?;
            Response::Delete { revision: header_rev(r.header()), deleted: r.deleted() }
        }
        Request::LeaseGrant { ttl } => {
            let r = c.lease_grant(*ttl, None).await?;
            Response::LeaseGrant { revision: header_rev(r.header()), lease: r.id() }
        }
        Request::LeaseRevoke { lease } => {
            let r = c.lease_revoke(*lease).await?;
            Response::LeaseRevoke { revision: header_rev(r.header()) }
        }
    })
}

/// One worker: sequential random operations against `endpoint` until told
/// to stop.
pub async fn worker(rec: Arc<Recorder>, id: usize, member: usize, endpoint: String, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut client: Option<Client> = None;
    let mut seq = 0u64;
    let mut lease: Option<i64> = None;
    let mut mod_revs: HashMap<String, i64> = HashMap::new();
    while !rec.stop.load(Ordering::SeqCst) {
        let c = match client.as_mut() {
            Some(c) => c,
            None => match connect(&endpoint, OP_TIMEOUT).await {
                Ok(c) => client.insert(c),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let key = format!("{}{}", rec.prefix, rng.random_range(0..rec.keys));
        seq += 1;
        let value = format!("c{id}-{seq}");
        let roll = rng.random_range(0..100);
        let req = match roll {
            0..30 => Request::Put { key, value, lease: 0 },
            30..60 => Request::Get { key },
            60..75 => Request::Cas { expected_mod_revision: mod_revs.get(&key).copied().unwrap_or(0), key, value },
            75..85 => Request::Delete { key },
            _ => match lease {
                None => Request::LeaseGrant { ttl: LEASE_TTL },
                Some(l) if roll < 95 => Request::Put { key, value, lease: l },
                Some(l) => Request::LeaseRevoke { lease: l },
            },
        };
        let call_ns = rec.now();
        let res = tokio::time::timeout(OP_TIMEOUT, execute(c, &req)).await;
        let return_ns = rec.now();
        let outcome = match res {
            Ok(Ok(response)) => {
                match (&req, &response) {
                    (Request::Get { key }, Response::Get { kv, .. }) => {
                        mod_revs.insert(key.clone(), kv.as_ref().map(|kv| kv.mod_revision).unwrap_or(0));
                    }
                    (Request::LeaseGrant { .. }, Response::LeaseGrant { lease: l, .. }) => lease = Some(*l),
                    (Request::LeaseRevoke { .. }, _) => lease = None,
                    _ => {}
                }
                Outcome::Ok { response }
            }
            Ok(Err(e)) => classify(&e),
            Err(_) => Outcome::Unknown { error: format!("client timeout after {OP_TIMEOUT:?}") },
        };
        let failed = !matches!(outcome, Outcome::Ok { .. });
        if failed {
            if let Request::LeaseRevoke { .. } | Request::Put { lease: 1.., .. } = req {
                // Start over with a fresh lease rather than reuse one in doubt.
                lease = None;
            }
        }
        rec.record(Operation { client: id, member, call_ns, return_ns, request: req, outcome });
        if failed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One watcher on the key prefix: starts at revision 1 on `first_member`,
/// and after any error or stall resumes on the next member at the last
/// delivered revision + 1. Ends when it has delivered (or been told by a
/// progress notification about) the final revision, or on
/// [`Recorder::give_up`].
///
/// With `request_progress`, the watcher also asks for a progress
/// notification every [`PROGRESS_REQUEST_EVERY`] (etcd RequestProgress), so
/// bookmarks arrive mid-stream and while catching up, where they are most
/// likely to run ahead of events (etcd-io/etcd#15220).
pub async fn watcher(rec: Arc<Recorder>, id: usize, first_member: usize, endpoints: Vec<String>, request_progress: bool) -> Watcher {
    let mut w = Watcher { id, sessions: Vec::new() };
    let mut member = first_member;
    let mut next = 1i64;
    let mut upper = 0i64;
    let done = |upper: i64| {
        let f = rec.final_revision.load(Ordering::SeqCst);
        (f > 0 && upper >= f) || rec.give_up.load(Ordering::SeqCst)
    };
    while !done(upper) {
        let mut s = WatchSession { member, start_revision: next, responses: Vec::new(), error: None };
        let err = watch_session(&rec, &endpoints[member], &mut s, &mut next, &mut upper, &done, request_progress).await;
        s.error = err;
        let failed = s.error.is_some();
        w.sessions.push(s);
        if failed {
            member = (member + 1) % endpoints.len();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    w
}

async fn watch_session(rec: &Recorder, endpoint: &str, s: &mut WatchSession, next: &mut i64, upper: &mut i64, done: &impl Fn(i64) -> bool, request_progress: bool) -> Option<String> {
    let mut c = match connect(endpoint, OP_TIMEOUT).await {
        Ok(c) => c,
        Err(e) => return Some(format!("connect: {e}")),
    };
    let opts = WatchOptions::new().with_prefix().with_start_revision(s.start_revision).with_prev_key().with_progress_notify();
    let mut stream = match tokio::time::timeout(OP_TIMEOUT, c.watch(rec.prefix.as_str(), Some(opts))).await {
        Ok(Ok(st)) => st,
        Ok(Err(e)) => return Some(format!("watch: {e}")),
        Err(_) => return Some("watch: timeout".into()),
    };
    let mut last_response = Instant::now();
    let mut tick = tokio::time::interval(PROGRESS_REQUEST_EVERY);
    loop {
        if done(*upper) {
            return None;
        }
        tokio::select! {
            msg = stream.message() => match msg {
                Ok(Some(resp)) => {
                    last_response = Instant::now();
                    if resp.canceled() {
                        return Some(format!("canceled: {} (compact_revision {})", resp.cancel_reason(), resp.compact_revision()));
                    }
                    if resp.created() && resp.events().is_empty() {
                        continue;
                    }
                    let events: Vec<Event> = resp.events().iter().filter_map(to_event).collect();
                    let header_revision = header_rev(resp.header());
                    if let Some(last) = events.last() {
                        *next = last.kv.mod_revision + 1;
                        *upper = (*upper).max(last.kv.mod_revision);
                    } else {
                        *upper = (*upper).max(header_revision);
                    }
                    s.responses.push(WatchResponse { time_ns: rec.now(), header_revision, events });
                }
                Ok(None) => return Some("stream ended".into()),
                Err(e) => return Some(format!("stream: {e}")),
            },
            _ = tick.tick() => {
                if last_response.elapsed() >= WATCH_STALL {
                    return Some("stalled".into());
                }
                // Ask for a bookmark (etcd RequestProgress), also mid-stream.
                if request_progress && stream.request_progress().await.is_err() {
                    return Some("request progress failed".into());
                }
            }
        }
    }
}
