//! Health checks and the start-up state (kube's
//! `k8s.io/apiserver/pkg/server/healthz` and the cacher's readiness).
//!
//! A node serves HTTPS before its store has a quorum, as kube-apiserver
//! does: it keeps retrying the store while `/livez` says ok and `/readyz`
//! names what it waits for. [`Health`] holds that state; the handlers only
//! render it.
//!
//! | endpoint | checks |
//! |---|---|
//! | `/livez` | `ping` |
//! | `/healthz` | `ping`, `etcd`, (`poststarthook/rbac/bootstrap-roles`) |
//! | `/readyz` | `ping`, `etcd`, `informer-sync`, (`poststarthook/rbac/bootstrap-roles`), `shutdown` |
//!
//! - `etcd` fails until the store has a leader and the system namespaces
//!   exist ([`Health::mark_started`]); then it reads the store's revision
//!   within [`ETCD_CHECK_TIMEOUT`] (kube's `--etcd-healthcheck-timeout`).
//! - `informer-sync` fails until every watch cache has listed its resource
//!   and follows the store.
//! - `poststarthook/rbac/bootstrap-roles`, listed only when RBAC is on
//!   ([`Health::set_rbac_bootstrap_pending`]), fails while its
//!   bootstrap policy is not reconciled yet (kube's post-start hook of that
//!   name), so a ready server enforces RBAC with its informers synced.
//! - `shutdown` fails once the process has begun to shut down
//!   ([`Health::begin_shutdown`]), so load balancers stop sending new
//!   requests while the ones in flight finish (kube's `shutdown` check and
//!   `--shutdown-delay-duration`).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::storage::Storage;
use crate::watchcache::CachedStorage;

/// How long the `etcd` check waits for the store (kube's
/// `--etcd-healthcheck-timeout` default, 2 s).
pub const ETCD_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The message of the 429 that API requests get before the store is ready
/// (kube's cacher answers it while a watch cache is not initialized).
pub const NOT_READY_MESSAGE: &str = "storage is (re)initializing";

/// Seconds a client is told to wait before it retries a request refused
/// with [`NOT_READY_MESSAGE`].
pub const NOT_READY_RETRY_AFTER_SECONDS: i32 = 1;

/// The check of RBAC's bootstrap policy (kube's post-start hook name).
pub const RBAC_BOOTSTRAP: &str = "poststarthook/rbac/bootstrap-roles";

const RBAC_OFF: u8 = 0;
const RBAC_PENDING: u8 = 1;
const RBAC_DONE: u8 = 2;

/// The health of one node: whether its store has come up, and its checks.
pub struct Health {
    storage: Arc<dyn Storage>,
    cache: Option<Arc<CachedStorage>>,
    started: AtomicBool,
    /// RBAC's bootstrap policy: [`RBAC_OFF`], [`RBAC_PENDING`] or
    /// [`RBAC_DONE`].
    rbac_bootstrap: AtomicU8,
    /// True once the shutdown has begun.
    shutdown: AtomicBool,
    /// True once open watches are to end (after the shutdown delay).
    watches_end: tokio::sync::watch::Sender<bool>,
}

impl Health {
    /// The health of an API over `storage`, with its watch `cache` if on.
    /// It starts not started: API requests are refused until
    /// [`Health::mark_started`].
    pub fn new(storage: Arc<dyn Storage>, cache: Option<Arc<CachedStorage>>) -> Self {
        Health { storage, cache, started: AtomicBool::new(false), rbac_bootstrap: AtomicU8::new(RBAC_OFF), shutdown: AtomicBool::new(false), watches_end: tokio::sync::watch::Sender::new(false) }
    }

    /// Records that the store has a leader and the system namespaces exist:
    /// API requests are served from now on.
    pub fn mark_started(&self) {
        self.started.store(true, Ordering::Release);
    }

    /// Whether [`Health::mark_started`] was called.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Records whether RBAC's bootstrap policy is still to be reconciled:
    /// from the first call on, the RBAC check is listed, and it fails while
    /// the policy is pending.
    pub fn set_rbac_bootstrap_pending(&self, pending: bool) {
        self.rbac_bootstrap.store(if pending { RBAC_PENDING } else { RBAC_DONE }, Ordering::Release);
    }

    /// Records that the process is shutting down: `/readyz` fails from now
    /// on, while requests are still served.
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
    }

    /// Whether [`Health::begin_shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Tells every open watch to end: each sends a last BOOKMARK (when the
    /// client allows bookmarks) and closes, so its client resumes on
    /// another server from there.
    pub fn end_watches(&self) {
        if let Some(cache) = &self.cache {
            cache.end_watches();
        }
        self.watches_end.send_replace(true);
    }

    /// Becomes true when open watches are to end ([`Health::end_watches`]).
    pub fn watches_ending(&self) -> tokio::sync::watch::Receiver<bool> {
        self.watches_end.subscribe()
    }

    /// The checks of `endpoint` (`livez`, `readyz` or `healthz`), in the
    /// order they are listed; none for another name.
    pub fn checks(&self, endpoint: &str) -> Vec<&'static str> {
        let rbac = self.rbac_bootstrap.load(Ordering::Acquire) != RBAC_OFF;
        let mut out = match endpoint {
            "livez" => vec!["ping"],
            "healthz" => vec!["ping", "etcd"],
            "readyz" => vec!["ping", "etcd", "informer-sync"],
            _ => return Vec::new(),
        };
        if rbac && endpoint != "livez" {
            out.push(RBAC_BOOTSTRAP);
        }
        if endpoint == "readyz" {
            out.push("shutdown");
        }
        out
    }

    /// Runs the check `name`: `None` for an unknown check, else `Ok` or
    /// why it fails.
    pub async fn check(&self, name: &str) -> Option<Result<(), String>> {
        Some(match name {
            "ping" => Ok(()),
            "etcd" => self.etcd().await,
            "informer-sync" => self.informer_sync(),
            RBAC_BOOTSTRAP => {
                if self.rbac_bootstrap.load(Ordering::Acquire) == RBAC_PENDING {
                    Err("the RBAC bootstrap policy is not reconciled yet".into())
                } else {
                    Ok(())
                }
            }
            "shutdown" => {
                if self.is_shutting_down() {
                    Err("the process is shutting down".into())
                } else {
                    Ok(())
                }
            }
            _ => return None,
        })
    }

    async fn etcd(&self) -> Result<(), String> {
        if !self.is_started() {
            return Err("the store has no leader yet".into());
        }
        match tokio::time::timeout(ETCD_CHECK_TIMEOUT, self.storage.current_revision()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer from the store within {ETCD_CHECK_TIMEOUT:?}")),
        }
    }

    fn informer_sync(&self) -> Result<(), String> {
        let Some(cache) = &self.cache else { return Ok(()) };
        let waiting = cache.unsynced();
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!("watch caches not synced: {}", waiting.join(", ")))
        }
    }
}
