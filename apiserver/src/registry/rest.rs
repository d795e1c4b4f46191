//! REST objects: what a resource or subresource can do (kube
//! `k8s.io/apiserver/pkg/registry/rest`).
//!
//! Every served resource and subresource is a [`Rest`] object that offers
//! some verbs, each behind its own trait: [`Getter`], [`Lister`],
//! [`Watcher`], [`Creater`], [`Updater`], [`Deleter`] and
//! [`CollectionDeleter`]. A verb handler asks the object for the capability
//! it needs and answers 405 when it is missing; the discovery verbs come
//! from the same capabilities ([`verbs`]). PATCH is an update whose new
//! object is the patched old one ([`UpdatedObjectInfo`]), so it needs no
//! trait of its own.
//!
//! Stored resources are served by the generic store
//! ([`super::store::Store`]); subresources (`status`, `scale`, a
//! namespace's `finalize`) are small objects over their resource's store
//! ([`super::subresources`]); resources that are never stored (access
//! reviews) implement the traits themselves ([`super::auth`]).

use async_trait::async_trait;
use serde_json::Value;

use crate::authn::UserInfo;
use crate::errors::Status;
use crate::selectors::{FieldSelector, LabelSelector};
pub use crate::storage::{EventType, ListResult, WatchEvent, WatchStream, INITIAL_EVENTS_END};
use crate::warning::Warnings;

/// What a request brings besides its object and options (kube's request
/// context): the namespace of its URL, the user, the client's user agent
/// and where to put warnings.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The namespace of the URL (empty for cluster-scoped resources and
    /// all-namespace lists).
    pub namespace: &'a str,
    /// Who asks.
    pub user: &'a UserInfo,
    /// The `User-Agent` header (the default field manager).
    pub user_agent: Option<&'a str>,
    /// Warnings for the client.
    pub warnings: &'a Warnings,
    /// The request's audit record, when it is audited: admission adds its
    /// annotations there.
    pub audit: Option<&'a dyn crate::admission::AuditAnnotations>,
}

/// How unknown and duplicate fields of a body are treated
/// (`fieldValidation`).
pub use crate::openapi::fields::FieldValidation;

/// The options of a create, update or patch (`CreateOptions`,
/// `UpdateOptions`, `PatchOptions`).
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// `CreateOptions`, `UpdateOptions` or `PatchOptions`: named in 422s
    /// about the options.
    pub kind: &'static str,
    /// `dryRun=All`: everything but the write.
    pub dry_run: bool,
    /// `fieldManager`, as sent (checked by the store).
    pub field_manager: Option<String>,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (PatchOptions of a server-side apply): take the fields
    /// other managers own instead of failing with their conflicts.
    pub force: bool,
}

impl WriteOptions {
    /// The options as `meta.k8s.io/v1` JSON, as admission plugins see them.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), self.kind.into());
        m.insert("apiVersion".into(), "meta.k8s.io/v1".into());
        if self.dry_run {
            m.insert("dryRun".into(), serde_json::json!(["All"]));
        }
        if let Some(f) = &self.field_manager {
            m.insert("fieldManager".into(), f.clone().into());
        }
        if self.force {
            m.insert("force".into(), true.into());
        }
        Value::Object(m)
    }
}

/// The options of a delete (`DeleteOptions`, the parts that matter here).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Conditions the object must meet.
    pub preconditions: crate::storage::Preconditions,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The options as sent, as admission plugins see them.
    pub raw: Value,
}

/// The options of a get.
#[derive(Debug, Clone, Default)]
pub struct GetOptions {
    /// `resourceVersion`: `None` for the latest state (a consistent read),
    /// `Some(0)` for any, `Some(n)` for a state not older than `n`.
    pub min_revision: Option<i64>,
}

/// Label and field selectors of a list, watch or deletecollection.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`; fields other than `metadata.name`,
    /// `metadata.namespace` and the strategy's selectable fields are
    /// refused by the store.
    pub fields: FieldSelector,
}

/// The options of a list or deletecollection.
#[derive(Clone, Default)]
pub struct ListOptions {
    /// Selectors.
    pub selectors: Selectors,
    /// The read (revision, limit, continue); its predicate is set by the
    /// store from `selectors`.
    pub read: crate::storage::ListOptions,
    /// `resourceVersion` as sent, for error messages.
    pub resource_version: Option<String>,
}

/// The options of a watch.
#[derive(Clone, Default)]
pub struct WatchOptions {
    /// Selectors.
    pub selectors: Selectors,
    /// The watch (start revision, initial events, bookmarks); its predicate
    /// and `recursive` are set by the store.
    pub read: crate::storage::WatchOptions,
    /// `resourceVersion` as sent, for error messages.
    pub resource_version: Option<String>,
}

/// The new object of an update, computed from the current one inside the
/// store's guaranteed update (kube's `rest.UpdatedObjectInfo`): the PUT
/// body, or the current object with a patch applied. It may run more than
/// once, each time on a newer current object.
#[async_trait]
pub trait UpdatedObjectInfo: Send + Sync {
    /// The new object, given the current one (`None` when it does not
    /// exist and the resource creates on update).
    ///
    /// # Errors
    /// The Status for the client (a patch that does not apply, a bad
    /// Scale).
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status>;

    /// Whether a missing object may be created from
    /// [`UpdatedObjectInfo::updated_object`] (a PUT to a resource that
    /// creates on update; never a patch).
    fn may_create(&self) -> bool {
        true
    }

    /// The apply configuration of a server-side apply
    /// (`application/apply-patch+yaml`), or `None` for every other update.
    /// The store merges it into the current object itself and records its
    /// fields as the manager's `Apply` entry ([`crate::fieldmanager::apply`])
    /// instead of calling [`UpdatedObjectInfo::updated_object`]; a missing
    /// object is created from it.
    fn apply_config(&self) -> Option<&Value> {
        None
    }

    /// The keys the apply configuration's text gives twice in one mapping,
    /// as kube's strict YAML decoder words them (`line 3: key "a" already
    /// set in map`). The configuration keeps the last value of each; the
    /// store reports them per `fieldValidation` once the apply merged.
    fn apply_duplicates(&self) -> &[String] {
        &[]
    }
}

/// GET of one object.
#[async_trait]
pub trait Getter: Send + Sync {
    /// The object `name`.
    ///
    /// # Errors
    /// 404; 504 for a resourceVersion not reached; 500 for store errors.
    async fn get(&self, ctx: &Context<'_>, name: &str, opts: &GetOptions) -> Result<Value, Status>;
}

/// LIST.
#[async_trait]
pub trait Lister: Send + Sync {
    /// One page of objects.
    ///
    /// # Errors
    /// 400 for unsupported field selectors or bad continue tokens; 410 for
    /// expired revisions or tokens; 504 for a resourceVersion not reached.
    async fn list(&self, ctx: &Context<'_>, opts: &ListOptions) -> Result<ListResult, Status>;
}

/// WATCH.
#[async_trait]
pub trait Watcher: Send + Sync {
    /// Events of the object `name`, or of every object (in the context's
    /// namespace) when `name` is empty.
    ///
    /// # Errors
    /// 400 for unsupported field selectors; 504 for a start the server has
    /// not reached. An expired start comes in the stream.
    async fn watch(&self, ctx: &Context<'_>, name: &str, opts: &WatchOptions) -> Result<WatchStream, Status>;
}

/// CREATE.
#[async_trait]
pub trait Creater: Send + Sync {
    /// Creates `obj`; returns what was stored (or would be, on a dry run).
    ///
    /// # Errors
    /// 400, 403, 404, 409 AlreadyExists, 422 Invalid.
    async fn create(&self, ctx: &Context<'_>, obj: Value, opts: &WriteOptions) -> Result<Value, Status>;
}

/// CREATE of a subresource of a named object (kube's `rest.NamedCreater`):
/// `POST .../serviceaccounts/<name>/token`.
#[async_trait]
pub trait NamedCreater: Send + Sync {
    /// Creates `obj` for the object `name`; returns the answer.
    ///
    /// # Errors
    /// 400, 403, 404 for a missing object, 422 Invalid.
    async fn create(&self, ctx: &Context<'_>, name: &str, obj: Value, opts: &WriteOptions) -> Result<Value, Status>;
}

/// UPDATE (PUT) and PATCH.
#[async_trait]
pub trait Updater: Send + Sync {
    /// Updates `name` to what `info` makes of it: (object, created).
    ///
    /// # Errors
    /// 400, 404, 409 Conflict, 422 Invalid.
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status>;
}

/// DELETE.
#[async_trait]
pub trait Deleter: Send + Sync {
    /// Deletes `name`: (the deleted object, or the object now held by its
    /// finalizers; whether it is gone).
    ///
    /// # Errors
    /// 403 (admission), 404, 409 when a precondition fails.
    async fn delete(&self, ctx: &Context<'_>, name: &str, opts: &DeleteOptions) -> Result<(Value, bool), Status>;
}

/// DELETECOLLECTION.
#[async_trait]
pub trait CollectionDeleter: Send + Sync {
    /// Deletes every object `list` selects; returns them (as deleted, or as
    /// now held by their finalizers) and the revision of the list.
    ///
    /// # Errors
    /// As [`Lister::list`] and [`Deleter::delete`].
    async fn delete_collection(&self, ctx: &Context<'_>, opts: &DeleteOptions, list: &ListOptions) -> Result<(Vec<Value>, i64), Status>;
}

/// A group, version and kind (owned).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gvk {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl Gvk {
    /// A GVK.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }
}

/// An update to a given object, whatever the current one (a PUT body;
/// never a create). Controllers write with it: the object's
/// resourceVersion makes a concurrent change a conflict.
pub struct Replace(pub Value);

#[async_trait]
impl UpdatedObjectInfo for Replace {
    async fn updated_object(&self, _current: Option<&Value>) -> Result<Value, Status> {
        Ok(self.0.clone())
    }
    fn may_create(&self) -> bool {
        false
    }
}

/// A resource or subresource as served (kube's `rest.Storage` and the
/// optional interfaces an installer looks for).
pub trait Rest: Send + Sync {
    /// The kind of the objects it takes and returns (discovery's
    /// `responseKind`, a patch's schema).
    fn kind(&self) -> &Gvk;

    /// Whether responses come in the form the client asked for (Table,
    /// PartialObjectMetadata) built from its resource; `false` answers
    /// plain JSON (a Scale).
    fn negotiated(&self) -> bool {
        true
    }

    /// GET, if offered.
    fn getter(&self) -> Option<&dyn Getter> {
        None
    }
    /// LIST, if offered.
    fn lister(&self) -> Option<&dyn Lister> {
        None
    }
    /// WATCH, if offered.
    fn watcher(&self) -> Option<&dyn Watcher> {
        None
    }
    /// CREATE, if offered.
    fn creater(&self) -> Option<&dyn Creater> {
        None
    }
    /// CREATE on a named object (a subresource's POST), if offered.
    fn named_creater(&self) -> Option<&dyn NamedCreater> {
        None
    }
    /// UPDATE, if offered (PATCH too, with a getter).
    fn updater(&self) -> Option<&dyn Updater> {
        None
    }
    /// DELETE, if offered.
    fn deleter(&self) -> Option<&dyn Deleter> {
        None
    }
    /// DELETECOLLECTION, if offered.
    fn collection_deleter(&self) -> Option<&dyn CollectionDeleter> {
        None
    }
}

/// Whether `rest` offers `verb` (kube's verbs: `get`, `list`, `watch`,
/// `create`, `update`, `patch`, `delete`, `deletecollection`). PATCH needs
/// both a getter and an updater, as kube's `rest.Patcher`.
pub fn supports(rest: &dyn Rest, verb: &str) -> bool {
    match verb {
        "get" => rest.getter().is_some(),
        "list" => rest.lister().is_some(),
        "watch" => rest.watcher().is_some(),
        "create" => rest.creater().is_some() || rest.named_creater().is_some(),
        "update" => rest.updater().is_some(),
        "patch" => rest.getter().is_some() && rest.updater().is_some(),
        "delete" => rest.deleter().is_some(),
        "deletecollection" => rest.collection_deleter().is_some(),
        _ => false,
    }
}

/// The verbs `rest` offers, sorted as discovery lists them.
pub fn verbs(rest: &dyn Rest) -> Vec<String> {
    ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"].into_iter().filter(|v| supports(rest, v)).map(String::from).collect()
}
