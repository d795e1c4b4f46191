//! Object storage (kube-apiserver `staging/.../apiserver/pkg/storage`).
//!
//! [`Storage`] is the interface handlers use: get, list with limit and
//! continue at a revision, create, guaranteed update, delete with
//! preconditions, and watch from a revision. Objects are JSON
//! (`serde_json::Value`) whose `metadata.resourceVersion` is the key's etcd
//! `mod_revision`.
//!
//! [`KvStorage`] implements it once, over the small [`kv::Kv`] primitive,
//! which has two backends: [`embedded::EmbeddedKv`] (the raftstore member in
//! this process, the default) and [`remote::RemoteKv`] (etcd endpoints).
//!
//! Keys follow kube-apiserver: `/registry/<group>/<resource>/<namespace>/<name>`,
//! the core group without a group segment (`/registry/configmaps/default/x`);
//! [`keys`] builds every one of them. `--etcd-prefix` moves them under
//! another root ([`prefixed`]); `--etcd-servers-overrides` puts some
//! resources on other etcd servers ([`routed`]); remote etcd is compacted as
//! kube-apiserver compacts it ([`compactor`]).

/// The deepest nesting of arrays and objects a stored object may have:
/// what the JSON decoder that reads stored objects accepts (127 levels;
/// kube's limit for custom resources is about 10,000). The registry
/// refuses to write deeper objects.
pub const MAX_STORED_DEPTH: usize = 127;

pub mod compactor;
pub mod embedded;
pub mod keys;
pub mod kv;
pub mod prefixed;
pub mod remote;
pub mod routed;
pub(crate) mod store;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

pub use store::{inconsistent_continue, KvStorage};

use crate::errors::Status;

/// Errors of the storage layer. Handlers turn them into [`Status`] objects
/// with the resource and name they know (kube's `storeerr.Interpret*`).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key does not exist.
    #[error("key not found")]
    NotFound,
    /// The key exists (create).
    #[error("key exists")]
    AlreadyExists,
    /// A precondition (uid or resourceVersion) does not hold; the message is
    /// kube's `Precondition failed: ...` text.
    #[error("{0}")]
    PreconditionFailed(String),
    /// The revision asked for has been compacted.
    #[error("required revision has been compacted (compacted at {compact_revision})")]
    Compacted {
        /// The store's compacted revision, if known (0 otherwise).
        compact_revision: i64,
    },
    /// The revision asked for is ahead of the store.
    #[error("required revision is a future revision")]
    FutureRevision,
    /// A read asked for a resourceVersion newer than the store (or the
    /// cache) reached in time; kube answers 504 `Too large resource
    /// version` with cause `ResourceVersionTooLarge`.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: i64,
        /// The newest revision available.
        current: i64,
    },
    /// A malformed continue token; the message is kube's.
    #[error("continue key is not valid: {0}")]
    InvalidContinue(String),
    /// The store refused the write as too large (etcd's
    /// `etcdserver: request is too large`, or the gRPC size limit).
    #[error("{0}")]
    TooLarge(String),
    /// The store cannot be reached or has no leader.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A stored value is not a JSON object.
    #[error("stored object {key} is corrupt: {message}")]
    Corrupt {
        /// The key.
        key: String,
        /// The decode error.
        message: String,
    },
    /// The update function refused the update; its Status goes to the client.
    #[error("{0}")]
    Aborted(Box<Status>),
    /// Anything else.
    #[error("internal storage error: {0}")]
    Internal(String),
}

/// Result of the storage layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Conditions a write must meet (`metav1.Preconditions`).
#[derive(Debug, Clone, Default)]
pub struct Preconditions {
    /// The object's UID must be this.
    pub uid: Option<String>,
    /// The object's resourceVersion must be this.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// kube's `Preconditions.Check`: the `Precondition failed` messages.
    ///
    /// # Errors
    /// [`Error::PreconditionFailed`].
    pub fn check(&self, obj: &Value) -> Result<()> {
        let meta = &obj["metadata"];
        if let Some(uid) = &self.uid {
            let actual = meta["uid"].as_str().unwrap_or("");
            if uid != actual {
                return Err(Error::PreconditionFailed(format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}")));
            }
        }
        if let Some(rv) = &self.resource_version {
            let actual = meta["resourceVersion"].as_str().unwrap_or("");
            if rv != actual {
                return Err(Error::PreconditionFailed(format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}")));
            }
        }
        Ok(())
    }
}

/// What an update function decided.
#[derive(Debug, Clone)]
pub enum Update {
    /// Write this object.
    Put(Value),
    /// Delete the object (e.g. its last finalizer went away).
    Delete,
    /// Nothing changed; no write, the current object is returned.
    Unchanged,
}

/// The update step of [`Storage::guaranteed_update`] (kube's
/// `storage.UpdateFunc`): it gets the current object (with its
/// resourceVersion) or `None` for a missing key, and decides what to write.
///
/// It is async so that a step can wait on admission webhooks or conversion,
/// and it may run more than once: after a lost race it runs again on the
/// newer object, so it must not keep effects of an earlier run.
///
/// Plain closures `FnMut(Option<Value>) -> Result<Update, Status>` are
/// update steps.
#[async_trait]
pub trait TryUpdate: Send {
    /// Decides the update of `current`.
    ///
    /// # Errors
    /// The Status to give the client; the update stops and
    /// [`Storage::guaranteed_update`] returns it as [`Error::Aborted`].
    async fn try_update(&mut self, current: Option<Value>) -> std::result::Result<Update, Status>;
}

#[async_trait]
impl<F> TryUpdate for F
where
    F: FnMut(Option<Value>) -> std::result::Result<Update, Status> + Send,
{
    async fn try_update(&mut self, current: Option<Value>) -> std::result::Result<Update, Status> {
        self(current)
    }
}

/// A filter on objects (label and field selectors).
pub type Predicate = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// How a read's `revision` is matched (Kubernetes api-concepts,
/// "resourceVersionMatch").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RevisionMatch {
    /// Exactly `revision`; `revision == 0` means the current revision read
    /// linearizably (a resourceVersion left unset: a consistent read).
    #[default]
    Exact,
    /// Any revision `>= revision`; `revision == 0` means any revision at all
    /// (resourceVersion `"0"`).
    NotOlderThan,
}

/// Options of [`Storage::list`].
#[derive(Clone, Default)]
pub struct ListOptions {
    /// Revision to read at (see `revision_match`); 0 with `Exact` = the
    /// current revision (linearizable read).
    pub revision: i64,
    /// How `revision` is matched.
    pub revision_match: RevisionMatch,
    /// The caller takes items as encoded JSON ([`ListResult::encoded`]) when
    /// the store has them so (the watch cache does); otherwise and by
    /// default items come as values.
    pub allow_encoded: bool,
    /// At most this many matching items (0 = all).
    pub limit: i64,
    /// A continue token from an earlier page (pins that page's revision).
    pub continue_token: Option<String>,
    /// Only items matching this are returned and counted.
    pub predicate: Option<Predicate>,
}

/// One page of a list.
#[derive(Debug, Clone, Default)]
pub struct ListResult {
    /// The objects, in key order, each with its resourceVersion.
    pub items: Vec<Value>,
    /// Instead of `items` (only when asked with
    /// [`ListOptions::allow_encoded`]): each object's JSON encoding, with
    /// its resourceVersion, shared with the cache (no copy per list).
    pub encoded: Vec<bytes::Bytes>,
    /// The revision the list was read at (the list's resourceVersion).
    pub revision: i64,
    /// A token for the next page, if there may be more.
    pub continue_token: Option<String>,
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created (or existed when the watch began at RV 0).
    Added,
    /// The object changed.
    Modified,
    /// The object was deleted; the event carries its last state with the
    /// delete's revision as resourceVersion.
    Deleted,
    /// No change: the watch has seen everything up to the object's
    /// resourceVersion (`object` is `{"metadata":{"resourceVersion":..}}`,
    /// plus the `k8s.io/initial-events-end: "true"` annotation for the
    /// bookmark that ends the initial events). The handler adds kind and
    /// apiVersion.
    Bookmark,
}

impl EventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
        }
    }
}

/// One watch event, as seen by one watcher (selector transitions already
/// applied: an object that stops matching arrives as `Deleted`).
///
/// Objects are shared (`Arc`): a cache hands the same event to every
/// watcher without copying it.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// What happened.
    pub kind: EventType,
    /// The object after the event (for deletes: before it, with the delete's
    /// revision).
    pub object: Arc<Value>,
    /// The object before the event, if known.
    pub prev: Option<Arc<Value>>,
    /// `object` encoded as JSON, when the store has it so; whoever changes
    /// `object` must clear it.
    pub encoded: Option<bytes::Bytes>,
}

impl WatchEvent {
    /// An event without an encoding.
    pub fn new(kind: EventType, object: Value, prev: Option<Value>) -> Self {
        WatchEvent { kind, object: Arc::new(object), prev: prev.map(Arc::new), encoded: None }
    }

    /// A bookmark at `revision`; `initial_events_end` adds kube's
    /// `k8s.io/initial-events-end` annotation.
    pub fn bookmark(revision: i64, initial_events_end: bool) -> Self {
        let mut meta = serde_json::json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            meta["annotations"] = serde_json::json!({INITIAL_EVENTS_END: "true"});
        }
        WatchEvent::new(EventType::Bookmark, serde_json::json!({ "metadata": meta }), None)
    }
}

/// The annotation of the bookmark that ends a watch's initial events
/// (Kubernetes api-concepts, "Streaming lists").
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Options of [`Storage::watch`].
#[derive(Clone, Default)]
pub struct WatchOptions {
    /// Start after this revision; 0 = now. With `revision_match`
    /// `NotOlderThan` and initial events, the initial state is read at any
    /// revision `>= revision`.
    pub revision: i64,
    /// Watch every key under the prefix `key` (which must end with `/`).
    pub recursive: bool,
    /// For `revision == 0`: `Exact` (resourceVersion unset) reads the
    /// initial state at the current revision, linearizably; `NotOlderThan`
    /// (resourceVersion "0") at any revision the store has.
    pub revision_match: RevisionMatch,
    /// Begin with synthetic `Added` events for the state at the start
    /// revision. `None`: kube's legacy rule, only when `revision == 0`.
    pub initial_events: Option<bool>,
    /// End the initial events with a bookmark carrying
    /// [`INITIAL_EVENTS_END`] (`sendInitialEvents=true`).
    pub initial_events_end: bool,
    /// Send periodic bookmarks (`allowWatchBookmarks=true`).
    pub bookmarks: bool,
    /// Only events of matching objects, with selector transitions
    /// (see [`WatchEvent`]).
    pub predicate: Option<Predicate>,
}

impl WatchOptions {
    /// Whether to begin with the initial state.
    pub fn wants_initial_events(&self) -> bool {
        self.initial_events.unwrap_or(self.revision == 0)
    }
}

impl WatchEvent {
    /// This event as a watcher with `predicate` sees it, or `None` when it
    /// does not see it (see [`filter_event`]). An object that stops matching
    /// arrives as `Deleted` carrying its previous state stamped with the
    /// change's resourceVersion, so the watcher gets the object it last saw
    /// matching (kube's `cacheWatcher.convertToWatchEvent` and etcd3 watcher
    /// `transform` do the same).
    pub fn filtered(self, predicate: Option<&Predicate>) -> Option<WatchEvent> {
        let kind = filter_event(self.kind, &self.object, self.prev.as_deref(), predicate)?;
        match (self.kind, kind, &self.prev) {
            (EventType::Modified, EventType::Deleted, Some(prev)) => {
                let mut object = (**prev).clone();
                if let Some(m) = crate::meta::meta_mut(&mut object) {
                    m.insert("resourceVersion".into(), Value::String(crate::meta::resource_version(&self.object).to_string()));
                }
                Some(WatchEvent { kind, object: Arc::new(object), prev: self.prev, encoded: None })
            }
            _ => Some(WatchEvent { kind, ..self }),
        }
    }
}

/// The event a watcher with `predicate` sees for a change from `prev` to
/// `obj`, or `None` to skip it (kube's filtered watch): an object that starts
/// matching is `Added`, one that stops matching `Deleted`.
pub fn filter_event(kind: EventType, obj: &Value, prev: Option<&Value>, predicate: Option<&Predicate>) -> Option<EventType> {
    let Some(p) = predicate else { return Some(kind) };
    match kind {
        EventType::Bookmark => Some(kind),
        EventType::Added => p(obj).then_some(EventType::Added),
        EventType::Deleted => p(prev.unwrap_or(obj)).then_some(EventType::Deleted),
        EventType::Modified => match (p(obj), prev.map(|o| p(o))) {
            (true, Some(true)) => Some(EventType::Modified),
            (true, _) => Some(EventType::Added),
            (false, Some(true)) => Some(EventType::Deleted),
            (false, _) => None,
        },
    }
}

/// A stream of watch events; an `Err` item ends it.
pub type WatchStream = mpsc::Receiver<Result<WatchEvent>>;

/// kube's `storage.Interface`, on JSON objects.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Reads one object (linearizable).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Unavailable`].
    async fn get(&self, key: &str) -> Result<Value>;

    /// Reads one object at any revision `>= min_revision` (a GET with
    /// resourceVersion set; "0" = any). Stores without a cache read the
    /// current state.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::TooLargeResourceVersion`] if the store
    /// is behind `min_revision`.
    async fn get_not_older_than(&self, key: &str, min_revision: i64) -> Result<Value> {
        let obj = self.get(key).await?;
        if min_revision > 0 {
            let current = self.current_revision().await?;
            if min_revision > current {
                return Err(Error::TooLargeResourceVersion { requested: min_revision, current });
            }
        }
        Ok(obj)
    }

    /// Lists the objects under `prefix` (ending with `/`).
    ///
    /// # Errors
    /// [`Error::Compacted`] for an expired revision or continue token;
    /// [`Error::InvalidContinue`]; [`Error::Unavailable`].
    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult>;

    /// Creates `obj` at `key`; returns it with its resourceVersion.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`].
    async fn create(&self, key: &str, obj: Value) -> Result<Value>;

    /// Read, await `try_update`, then write if `mod_revision` is unchanged;
    /// retried when another writer won the race. Returns the written object
    /// (for [`Update::Delete`], the deleted object).
    ///
    /// # Errors
    /// [`Error::NotFound`] if the key is missing and `try_update` asked to
    /// delete; [`Error::PreconditionFailed`]; [`Error::Aborted`] with the
    /// update function's own error.
    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value>;

    /// Deletes the object at `key` if `preconditions` hold; returns its last
    /// state.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::PreconditionFailed`].
    async fn delete(&self, key: &str, preconditions: &Preconditions) -> Result<Value>;

    /// Watches `key` (or every key under it) from a revision.
    ///
    /// # Errors
    /// [`Error::Compacted`] if the start revision is gone; [`Error::Unavailable`].
    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream>;

    /// The store's current revision (linearizable).
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    async fn current_revision(&self) -> Result<i64>;

    /// The store that holds the keys under `prefix` (one resource), when
    /// this storage spreads resources over several stores with revisions of
    /// their own (`--etcd-servers-overrides`, see [`routed`]); `None`: this
    /// storage itself. The watch cache feeds each resource's cache from it,
    /// so a consistent read waits for that store's revision.
    fn backend_for(&self, _prefix: &str) -> Option<Arc<dyn Storage>> {
        None
    }
}

/// Where the registry gets the storage of each resource it serves (kube's
/// `RESTOptionsGetter` and storage decorator): the store itself, or the
/// store behind a watch cache of that resource.
pub trait StorageProvider: Send + Sync {
    /// The storage for the objects under `prefix` (a resource's key prefix,
    /// ending with `/`), ready to serve. Each `open` is matched by one
    /// [`StorageProvider::close`].
    fn open(&self, prefix: &str) -> Arc<dyn Storage>;

    /// The resource under `prefix` is no longer served by one of those who
    /// opened it; what `open` started for it stops with the last one.
    fn close(&self, prefix: &str);
}

/// Every resource straight from one store (`--watch-cache=false`).
pub struct Direct(pub Arc<dyn Storage>);

impl StorageProvider for Direct {
    fn open(&self, _prefix: &str) -> Arc<dyn Storage> {
        self.0.clone()
    }

    fn close(&self, _prefix: &str) {}
}
