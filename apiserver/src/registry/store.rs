//! The generic store: the one write path of every stored resource (kube
//! `k8s.io/apiserver/pkg/registry/generic/registry/store.go`, with
//! `rest.BeforeCreate` and `rest.BeforeUpdate`).
//!
//! A create runs:
//!
//! ```text
//! fieldManager check → apiVersion/kind → unknown fields (fieldValidation)
//!   → namespace → system metadata (name from generateName, uid,
//!   creationTimestamp, generation) → defaults → managedFields
//!   → strategy prepare → mutating admission → validation
//!   → validating admission → dry run? existence check : store
//! ```
//!
//! An update runs the same checks inside a guaranteed update, on the new
//! object that an [`UpdatedObjectInfo`] makes of the current one (the PUT
//! body, or a patch applied to it; for a server-side apply, the store
//! merges the configuration and records its `Apply` entry itself instead
//! of the `Update` one), so a lost race runs them again; a stale
//! `metadata.resourceVersion` is 409 Conflict. Only `status` changes through
//! the status subresource. An object being deleted whose last finalizer goes
//! is deleted by that update.
//!
//! A delete asks mutating admission, then, inside a guaranteed update,
//! validating admission on the current object; an object that the strategy
//! says is held (finalizers) gets `deletionTimestamp` and stays (202),
//! anything else is removed (200). Dry runs do everything but the write.
//!
//! Handlers never see any of this: they decode, call a REST trait and
//! encode. A subresource is a small REST object over this store
//! ([`super::subresources`]).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::rest::{
    CollectionDeleter, Context, Creater, DeleteOptions, Deleter, FieldValidation, GetOptions, Getter, Gvk, ListOptions, Lister, Rest, Selectors, UpdatedObjectInfo, Updater, WatchOptions, Watcher,
    WriteOptions,
};
use super::{validation, Resource, Strategy};
use crate::admission::{self, Attributes, Chain, Operation};
use crate::errors::{Cause, Status};
use crate::meta;
use crate::schema::Origin;
use crate::storage::{self, ListResult, Preconditions, Storage, TryUpdate, Update, WatchStream};
use crate::warning::Warnings;

/// Which part of an object an update writes, set by the REST object that
/// calls [`Store::update_part`].
#[derive(Clone, Copy)]
pub struct Part<'a> {
    /// The subresource written (`""`, `status`, `scale`, `finalize`), as
    /// recorded in managedFields and shown to admission.
    pub subresource: &'static str,
    /// Only `status` changes (the status subresource); otherwise `status`
    /// is kept from the current object for types with a status
    /// subresource.
    pub status_only: bool,
    /// The kind the subresource shows its object as, when it is another
    /// (a Deployment's Scale): admission sees that kind, and a server-side
    /// apply runs on it. Borrowed from the subresource's REST object, which
    /// knows where its object keeps what it shows (a custom resource's
    /// replicas path).
    pub shown_as: Option<&'a dyn ShownAs>,
}

impl PartialEq for Part<'_> {
    fn eq(&self, other: &Part<'_>) -> bool {
        self.subresource == other.subresource && self.status_only == other.status_only
    }
}

impl Eq for Part<'_> {}

impl std::fmt::Debug for Part<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part").field("subresource", &self.subresource).field("status_only", &self.status_only).field("shown_as", &self.shown_as.map(|s| s.kind())).finish()
    }
}

/// A subresource that shows its object as another kind (the Scale of a
/// Deployment), as kube's scale REST does: admission sees the object as that
/// kind, and a server-side apply runs on it with the object's field
/// ownership mapped onto it; results and ownership go back to the object.
pub trait ShownAs: Send + Sync {
    /// The subresource's kind: (group, version, kind).
    fn kind(&self) -> (&'static str, &'static str, &'static str);
    /// The object as the subresource's kind, with the managedFields entries
    /// that own what the subresource shows.
    fn shown(&self, obj: &Value) -> Value;
    /// `obj` with the applied subresource `sub` carried back: its values,
    /// and its entries' ownership of what the subresource shows.
    ///
    /// # Errors
    /// The subresource's own validation (a Scale without replicas).
    fn carry_back(&self, sub: &Value, obj: &Value) -> Result<Value, Status>;
}

/// Who records the write's fields in `metadata.managedFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracking {
    /// The store, as the request manager's `Update` entry.
    Update,
    /// Already done: a server-side apply wrote its `Apply` entry while
    /// merging its configuration.
    Applied,
}

impl Part<'static> {
    /// The main resource.
    pub const MAIN: Part<'static> = Part { subresource: "", status_only: false, shown_as: None };
    /// The status subresource.
    pub const STATUS: Part<'static> = Part { subresource: "status", status_only: true, shown_as: None };
}

/// Finds the resource served as another version (`v2`) of the same group
/// and resource, in the registry's current catalog.
pub type Siblings = Arc<dyn Fn(&str) -> Option<Arc<Resource>> + Send + Sync>;

/// The generic store of one resource.
pub struct Store {
    resource: Arc<Resource>,
    storage: Arc<dyn Storage>,
    admission: Arc<Chain>,
    schemas: crate::schema::SchemaStore,
    kind: Gvk,
    siblings: Option<Siblings>,
}

fn not_an_object() -> Status {
    Status::bad_request("the body of the request must be a JSON object")
}

impl Store {
    /// The store of `resource` over `storage` (already converting to and
    /// from the storage version if it is another), admitting writes through
    /// `admission`, with the kind's schema from `schemas` (pruning,
    /// managedFields).
    pub fn new(resource: Arc<Resource>, storage: Arc<dyn Storage>, admission: Arc<Chain>, schemas: crate::schema::SchemaStore) -> Self {
        let kind = Gvk::new(&resource.group, &resource.version, &resource.kind);
        Store { resource, storage, admission, schemas, kind, siblings: None }
    }

    /// The store, able to reach the other served versions of its resource
    /// through `siblings`: managedFields entries recorded in another
    /// apiVersion are then tracked on objects converted to it.
    #[must_use]
    pub fn with_siblings(mut self, siblings: Siblings) -> Self {
        self.siblings = Some(siblings);
        self
    }

    /// `obj`, of this store's version, converted in process to
    /// `api_version` of the same resource: through the stored version, with
    /// each version's converter (`None`: not served, or a converter that
    /// needs a webhook, or a failed conversion).
    fn convert_to(&self, obj: &Value, api_version: &str) -> Option<Value> {
        let to = self.sibling(api_version)?;
        self.convert_between(obj, &self.resource, &to)
    }

    /// `obj`, of `api_version` of the same resource, converted in process to
    /// this store's version (`None` as for [`Store::convert_to`]).
    fn convert_from(&self, obj: &Value, api_version: &str) -> Option<Value> {
        let from = self.sibling(api_version)?;
        self.convert_between(obj, &from, &self.resource)
    }

    /// The served version `api_version` of this store's resource.
    fn sibling(&self, api_version: &str) -> Option<Arc<Resource>> {
        let siblings = self.siblings.as_ref()?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if group != self.resource.group {
            return None;
        }
        siblings(version)
    }

    /// `obj` converted from one served version to another, through the
    /// stored version.
    fn convert_between(&self, obj: &Value, from: &Arc<Resource>, to: &Arc<Resource>) -> Option<Value> {
        let siblings = self.siblings.as_ref()?;
        let to = to.clone();
        let stored_of = |r: &Arc<Resource>| match r.strategy.storage_version().filter(|_| !r.is_storage_version()) {
            Some((_, v)) => siblings(v),
            None => Some(r.clone()),
        };
        let stored = stored_of(from)?;
        let mut obj = obj.clone();
        if !Arc::ptr_eq(&stored, from) {
            obj = from.converter.convert_local(obj, from, &stored)?.ok()?;
        }
        if !Arc::ptr_eq(&stored, &to) {
            obj = to.converter.convert_local(obj, &stored, &to)?.ok()?;
        }
        Some(obj)
    }

    /// The kind's schema in `api_version`.
    fn schema_in(&self, api_version: &str) -> Option<crate::schema::Schema> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.schemas.of_kind(group, version, &self.resource.kind)
    }

    /// The verbs a store of a resource with `strategy` serves, in discovery
    /// order.
    pub fn verbs(strategy: &dyn Strategy) -> Vec<String> {
        let mut v = vec!["create", "delete"];
        if strategy.collection_delete() {
            v.push("deletecollection");
        }
        v.extend(["get", "list", "patch", "update", "watch"]);
        v.into_iter().map(String::from).collect()
    }

    /// The resource.
    pub fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }

    /// The storage behind the store.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// A storage error as the Status a client sees for the object `name`
    /// (kube's `storeerr.Interpret*`); `resource_version` is the request's,
    /// if it sent one, quoted in 410 and 504 messages. A store that cannot
    /// answer (no leader, a leader that changed or stopped under the
    /// request, an unreachable etcd) gives kube's answer to an unreachable
    /// etcd: 500 `ServerTimeout` for `operation` with `Retry-After: 2`,
    /// which clients retry.
    pub fn interpret(&self, e: storage::Error, operation: &str, name: &str, resource_version: Option<&str>) -> Status {
        let r = &self.resource;
        match e {
            storage::Error::NotFound => Status::not_found(&r.group, &r.resource, name),
            storage::Error::AlreadyExists => Status::already_exists(&r.group, &r.resource, name),
            storage::Error::PreconditionFailed(m) => Status::conflict(&r.group, &r.resource, name, &m),
            storage::Error::Compacted { compact_revision } => Status::expired(format!("too old resource version: {} ({compact_revision})", resource_version.unwrap_or("0"))),
            storage::Error::FutureRevision => Status::too_large_resource_version_unknown(resource_version.unwrap_or("")),
            storage::Error::TooLargeResourceVersion { requested, current } => Status::too_large_resource_version(requested, current),
            storage::Error::InvalidContinue(m) => Status::bad_request(format!("invalid continue token: continue key is not valid: {m}")),
            storage::Error::Aborted(s) => *s,
            storage::Error::TooLarge(m) => Status::failure(413, crate::errors::reason::REQUEST_ENTITY_TOO_LARGE, format!("Request entity too large: {m}"), None),
            storage::Error::Unavailable(m) => {
                tracing::info!("{operation} {}/{name}: the store is unavailable: {m}", r.resource);
                Status::server_timeout(&r.group, &r.resource, operation, 2)
            }
            other => Status::internal(other),
        }
    }

    /// The selectors as a storage predicate (kube's `SelectionPredicate`);
    /// `None` when they select everything.
    ///
    /// # Errors
    /// 400 `field label not supported: <f>` for a field the strategy does
    /// not offer.
    pub fn predicate(&self, sel: &Selectors) -> Result<Option<storage::Predicate>, Status> {
        let allowed = self.resource.strategy.selectable_fields();
        for r in &sel.fields.0 {
            if !(r.field == "metadata.name" || r.field == "metadata.namespace" || allowed.contains(&r.field.as_str())) {
                return Err(Status::bad_request(format!("field label not supported: {}", r.field)));
            }
        }
        if sel.labels.is_empty() && sel.fields.is_empty() {
            return Ok(None);
        }
        let (labels, fields, res) = (sel.labels.clone(), sel.fields.clone(), self.resource.clone());
        Ok(Some(Arc::new(move |obj: &Value| {
            labels.matches_object(obj)
                && fields.matches(|f| match f {
                    "metadata.name" => meta::name(obj).to_string(),
                    "metadata.namespace" => meta::namespace(obj).to_string(),
                    other => res.strategy.field_value(obj, other),
                })
        })))
    }

    // ---- the checks of every write (kube's BeforeCreate / BeforeUpdate) ----

    /// Fills in or checks `apiVersion` and `kind` against the resource.
    fn check_type_meta(&self, obj: &mut Value) -> Result<(), Status> {
        let r = &self.resource;
        let want_av = r.api_version();
        let o = obj.as_object_mut().ok_or_else(not_an_object)?;
        match o.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => {
                o.insert("apiVersion".into(), Value::String(want_av.clone()));
            }
            Some(av) if av != want_av => {
                return Err(Status::bad_request(format!("the API version in the data ({av}) does not match the expected API version ({want_av})")));
            }
            _ => {}
        }
        match o.get("kind").and_then(Value::as_str) {
            None | Some("") => {
                o.insert("kind".into(), Value::String(r.kind.clone()));
            }
            Some(k) if k != r.kind => {
                return Err(Status::bad_request(format!("{} in version {:?} cannot be handled as a {}: the kind in the data does not match", k, r.version, r.kind)));
            }
            _ => {}
        }
        Ok(())
    }

    /// Sets or checks `metadata.namespace` against the request's.
    fn check_namespace(&self, ctx: &Context<'_>, obj: &mut Value) -> Result<(), Status> {
        let m = meta::meta_mut(obj).ok_or_else(not_an_object)?;
        if self.resource.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                None | Some("") => {
                    m.insert("namespace".into(), Value::String(ctx.namespace.to_string()));
                }
                Some(ns) if ns != ctx.namespace => {
                    return Err(Status::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                }
                _ => {}
            }
        } else {
            m.remove("namespace");
        }
        Ok(())
    }

    /// Checks value types and drops the fields the type's schema does not
    /// declare, as kube's decoder does, and applies `fieldValidation` to the
    /// dropped ones. Null fields and empty maps are dropped and null strings
    /// of string maps made empty, as Go's types decode and encode them.
    /// Types without a schema keep every field.
    ///
    /// # Errors
    /// 400 for a value of the wrong JSON type (always); 400 strict decoding
    /// error.
    fn prune_unknown_fields(&self, directive: FieldValidation, warnings: &Warnings, obj: &mut Value) -> Result<(), Status> {
        let r = &self.resource;
        let Some(schema) = self.schema() else { return Ok(()) };
        if schema.origin() == Origin::Custom {
            // Custom resources decode as unstructured JSON: wrong types are
            // the schema validation's (422), and pruning is structural;
            // defaults follow pruning, as in kube's decoder.
            let unknown: Vec<String> = schema.prune(obj).iter().map(|p| format!("unknown field {p:?}")).collect();
            schema.apply_defaults(obj);
            crate::schema::decode::integral_floats(obj);
            return report_field_errors(r, directive, warnings, unknown);
        }
        if let Some(e) = schema.type_error(obj) {
            return Err(Status::bad_request(format!("{} in version {:?} cannot be handled as a {}: {e}", r.kind, r.version, r.kind)));
        }
        let unknown: Vec<String> = schema.prune(obj).iter().map(|p| format!("unknown field {p:?}")).collect();
        schema.as_go_decodes(obj);
        report_field_errors(r, directive, warnings, unknown)
    }

    /// The schema of the resource's kind, if it has one.
    fn schema(&self) -> Option<crate::schema::Schema> {
        let r = &self.resource;
        self.schemas.of_kind(&r.group, &r.version, &r.kind)
    }

    /// The schema whose defaults reads fill in: a custom kind's, when it
    /// has defaults. Kube's storage decoder defaults custom resources as
    /// it reads them, so a default added to a CRD shows on objects stored
    /// before it.
    fn read_defaults(&self) -> Option<crate::schema::Schema> {
        let r = &self.resource;
        self.schemas.custom_with_defaults(&r.group, &r.version, &r.kind)
    }

    /// `obj` as read, with [`Store::read_defaults`] filled in.
    fn as_read(&self, mut obj: Value) -> Value {
        if let Some(schema) = self.read_defaults() {
            schema.apply_defaults(&mut obj);
        }
        obj
    }

    /// The resource's validation: object meta, then the strategy's.
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Result<(), Status> {
        let r = &self.resource;
        // What is stored must decode again: the JSON decoder reads at most
        // 127 levels, and managedFields or a patch can nest deeper than
        // the body did.
        let depth = meta::nesting_depth(obj);
        if depth > storage::MAX_STORED_DEPTH {
            return Err(Status::bad_request(format!("the object is nested {depth} levels deep; at most {} can be stored", storage::MAX_STORED_DEPTH)));
        }
        let mut causes = validation::object_meta(obj, r.strategy.name_rule(), r.namespaced);
        if let Some(schema) = self.schema().filter(|s| s.origin() == Origin::Custom) {
            // The schema (ratcheted on update: parts that fail only because
            // the schema tightened since they were stored, and that this
            // update leaves alone, pass), then the CRD's CEL rules, before
            // the strategy's checks (the scale fields), as kube's custom
            // resource validator reports them.
            causes.extend(crate::schema::field::to_causes(&schema.validate_write(obj, old)));
        }
        causes.extend(match old {
            Some(old) => r.strategy.validate_update(obj, old),
            None => r.strategy.validate(obj),
        });
        if causes.is_empty() {
            Ok(())
        } else {
            Err(Status::invalid(&r.group, &r.kind, meta::name(obj), causes))
        }
    }

    /// The part of the object a write of `part` may own fields in.
    fn field_scope(&self, part: Part<'_>) -> crate::fieldmanager::Scope {
        use crate::fieldmanager::Scope;
        if part.status_only {
            Scope::StatusOnly
        } else if self.resource.strategy.has_status() {
            Scope::NoStatus
        } else {
            Scope::All
        }
    }

    /// Records the request's manager in `metadata.managedFields` (operation
    /// `Update`; see [`crate::fieldmanager`]).
    fn track_managed_fields(&self, ctx: &Context<'_>, opts: &WriteOptions, part: Part<'_>, old: Option<&Value>, new: &mut Value) {
        use crate::fieldmanager;
        let r = &self.resource;
        let schema = self.schema();
        let manager = fieldmanager::manager_name(opts.field_manager.as_deref(), ctx.user_agent);
        let api_version = r.api_version();
        let now = meta::now();
        let (convert, convert_back, schema_of) = (|o: &Value, v: &str| self.convert_to(o, v), |o: &Value, v: &str| self.convert_from(o, v), |v: &str| self.schema_in(v));
        let versions = self.siblings.is_some().then_some(fieldmanager::Versions { convert: &convert, convert_back: &convert_back, schema_of: &schema_of });
        let req = fieldmanager::Request { manager: &manager, api_version: &api_version, subresource: part.subresource, scope: self.field_scope(part), now: &now, versions };
        fieldmanager::update(schema.as_ref(), old, new, &req);
    }

    /// A server-side apply of `config` to `current` (`None`: the object
    /// `name` does not exist): the merged object with the manager's `Apply`
    /// entry in `metadata.managedFields` (see [`crate::fieldmanager::apply`]).
    ///
    /// # Errors
    /// 409 with the conflicts with other managers (unless `force`); 400 for
    /// a configuration of another kind or one that does not fit the schema.
    fn apply_configuration(&self, current: Option<&Value>, config: &Value, name: &str, opts: &WriteOptions, part: Part<'_>) -> Result<Value, Status> {
        use crate::fieldmanager;
        let r = &self.resource;
        let now = meta::now();
        let manager = opts.field_manager.as_deref().unwrap_or("");
        if let (Some(t), Some(current)) = (part.shown_as, current) {
            let (group, version, kind) = t.kind();
            let schema = self.schemas.of_kind(group, version, kind);
            let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
            let req =
                fieldmanager::ApplyRequest { manager, api_version: &api_version, kind, subresource: part.subresource, scope: fieldmanager::Scope::All, force: opts.force, now: &now, versions: None };
            let sub = fieldmanager::apply(schema.as_ref(), Some(&t.shown(current)), config, &req).map_err(|e| e.into_status(&r.group, &r.resource, name))?;
            return t.carry_back(&sub, current);
        }
        let schema = self.schema();
        let api_version = r.api_version();
        let (convert, convert_back, schema_of) = (|o: &Value, v: &str| self.convert_to(o, v), |o: &Value, v: &str| self.convert_from(o, v), |v: &str| self.schema_in(v));
        let versions = self.siblings.is_some().then_some(fieldmanager::Versions { convert: &convert, convert_back: &convert_back, schema_of: &schema_of });
        let req =
            fieldmanager::ApplyRequest { manager, api_version: &api_version, kind: &r.kind, subresource: part.subresource, scope: self.field_scope(part), force: opts.force, now: &now, versions };
        let obj = fieldmanager::apply(schema.as_ref(), current, config, &req).map_err(|e| e.into_status(&r.group, &r.resource, name))?;
        // Then kube's apply patcher checks, for a missing object, that the
        // configuration names no uid, and the result's name against the
        // URL (`checkName`): an object made from the configuration alone
        // must be named by it.
        let sent_uid = meta::meta_str(config, "uid");
        if current.is_none() && !sent_uid.is_empty() {
            let why = format!("uid mismatch: the provided object specified uid {sent_uid}, and no existing object was found");
            return Err(Status::conflict(&r.group, &r.resource, name, &why));
        }
        match meta::name(&obj) {
            "" => Err(Status::bad_request(format!("the name of the object ({name} based on URL) was undeterminable: name must be provided"))),
            n if n != name => Err(Status::bad_request(format!("the name of the object ({n}) does not match the name on the URL ({name})"))),
            _ => Ok(obj),
        }
    }

    /// Prepares a new object: type and namespace, generated name, uid,
    /// creation timestamp, generation, defaults, managedFields, strategy.
    fn prepare_create(&self, ctx: &Context<'_>, obj: &mut Value, opts: &WriteOptions, part: Part<'_>, tracking: Tracking) -> Result<(), Status> {
        validate_field_manager(opts)?;
        self.check_type_meta(obj)?;
        self.prune_unknown_fields(opts.field_validation, ctx.warnings, obj)?;
        self.check_namespace(ctx, obj)?;
        let strategy = &self.resource.strategy;
        {
            let m = meta::meta_mut(obj).ok_or_else(not_an_object)?;
            if m.get("resourceVersion").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
                return Err(Status::internal("resourceVersion should not be set on objects to be created"));
            }
            let name_empty = m.get("name").and_then(Value::as_str).is_none_or(str::is_empty);
            if name_empty {
                if let Some(g) = m.get("generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
                    let n = meta::generate_name(g);
                    m.insert("name".into(), Value::String(n));
                }
            }
            m.insert("uid".into(), Value::String(meta::new_uid()));
            m.insert("creationTimestamp".into(), Value::String(meta::now()));
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            m.remove("selfLink");
            if strategy.has_generation() {
                m.insert("generation".into(), Value::from(1));
            } else {
                m.remove("generation");
            }
        }
        strategy.default(obj);
        // Fields are tracked after defaulting and before the strategy, as kube's
        // create handler does: defaults count as the request's, fields the
        // server generates (a Job's selector) do not.
        if tracking == Tracking::Update {
            self.track_managed_fields(ctx, opts, part, None, obj);
        }
        strategy.prepare_for_create(obj);
        Ok(())
    }

    /// A new object through prepare, admission and validation: what is
    /// created.
    async fn admit_new(&self, ctx: &Context<'_>, mut obj: Value, opts: &WriteOptions, part: Part<'_>, tracking: Tracking) -> Result<Value, Status> {
        self.prepare_create(ctx, &mut obj, opts, part, tracking)?;
        let options = self.options_json(Operation::Create, opts);
        let obj = self.admit(ctx, Operation::Create, part, obj, None, &options, opts.dry_run).await?;
        self.validate(&obj, None)?;
        self.admit_validate(ctx, Operation::Create, part, Some(&obj), None, &options, opts.dry_run).await?;
        Ok(obj)
    }

    /// Prepares an update of `old` to `new`: type, namespace and name
    /// checks, the resourceVersion precondition, immutable system fields,
    /// defaults, managedFields, strategy, generation bump, admission and
    /// validation. Returns what to write; an object being deleted that no
    /// finalizer holds (any more) is deleted.
    async fn admit_update(&self, ctx: &Context<'_>, mut new: Value, old: &Value, opts: &WriteOptions, part: Part<'_>, tracking: Tracking) -> Result<Update, Status> {
        let r = &self.resource;
        validate_field_manager(opts)?;
        self.check_type_meta(&mut new)?;
        self.prune_unknown_fields(opts.field_validation, ctx.warnings, &mut new)?;
        self.check_namespace(ctx, &mut new)?;
        let name = meta::name(old).to_string();
        let new_name = meta::name(&new).to_string();
        if new_name.is_empty() {
            if let Some(m) = meta::meta_mut(&mut new) {
                m.insert("name".into(), Value::String(name.clone()));
            }
        } else if new_name != name {
            return Err(Status::bad_request(format!("the name of the object ({new_name}) does not match the name on the URL ({name})")));
        }
        let new_rv = meta::resource_version(&new).to_string();
        let old_rv = meta::resource_version(old).to_string();
        if !new_rv.is_empty() && new_rv != old_rv {
            return Err(Status::optimistic_lock(&r.group, &r.resource, &name));
        }
        let new_uid = meta::meta_str(&new, "uid").to_string();
        if !new_uid.is_empty() && new_uid != meta::meta_str(old, "uid") {
            return Err(Status::invalid(&r.group, &r.kind, &name, vec![Cause::invalid("metadata.uid", &Value::String(new_uid), "field is immutable")]));
        }

        if part.status_only {
            // Only status changes through /status (kube's status strategies).
            let mut merged = old.clone();
            match new.get("status") {
                Some(s) => merged["status"] = s.clone(),
                None => {
                    if let Some(o) = merged.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            if tracking == Tracking::Applied {
                // The apply's entries, written for the whole object.
                if let Some(m) = meta::meta_mut(&mut merged) {
                    match new.get("metadata").and_then(|n| n.get("managedFields")) {
                        Some(f) => m.insert("managedFields".into(), f.clone()),
                        None => m.remove("managedFields"),
                    };
                }
            }
            new = merged;
            if tracking == Tracking::Update {
                self.track_managed_fields(ctx, opts, part, Some(old), &mut new);
            }
        } else {
            carry_system_meta(&mut new, old)?;
            r.strategy.default(&mut new);
            if tracking == Tracking::Update {
                self.track_managed_fields(ctx, opts, part, Some(old), &mut new);
            }
            r.strategy.prepare_for_update(&mut new, old);
            if r.strategy.has_generation() {
                let gen = old["metadata"]["generation"].as_i64().unwrap_or(1);
                let changed = r.strategy.generation_changed(&new, old);
                if let Some(m) = meta::meta_mut(&mut new) {
                    m.insert("generation".into(), Value::from(if changed { gen + 1 } else { gen }));
                }
            }
        }
        if let Some(m) = meta::meta_mut(&mut new) {
            m.insert("resourceVersion".into(), Value::String(old_rv));
        }
        let options = self.options_json(Operation::Update, opts);
        let new = self.admit(ctx, Operation::Update, part, new, Some(old), &options, opts.dry_run).await?;
        self.validate(&new, Some(old))?;
        self.admit_validate(ctx, Operation::Update, part, Some(&new), Some(old), &options, opts.dry_run).await?;
        // Before the no-change check, as kube's store decides to delete
        // during an update: a deleting object that nothing holds goes,
        // even when this update changes nothing (it was left behind).
        if meta::is_deleting(&new) && !r.strategy.held_by_finalizers(&new) {
            return Ok(Update::Delete);
        }
        if without_rv(&new) == without_rv(old) {
            return Ok(Update::Unchanged);
        }
        Ok(Update::Put(new))
    }

    // ---- admission ----

    /// The options for admission, only when a plugin will look.
    fn options_json(&self, op: Operation, opts: &WriteOptions) -> Value {
        if self.admission.handles(op) {
            opts.to_json()
        } else {
            Value::Null
        }
    }

    /// The admission attributes of a write of this resource.
    #[allow(clippy::too_many_arguments)] // kube's attributes record
    fn attributes<'a>(
        &'a self,
        ctx: &'a Context<'_>,
        op: Operation,
        part: Part<'_>,
        name: &'a str,
        namespace: &'a str,
        object: Option<Value>,
        old: Option<&'a Value>,
        options: &'a Value,
        dry_run: bool,
    ) -> Attributes<'a> {
        let r = &self.resource;
        let kind = admission::Kind { group: &r.group, version: &r.version, kind: &r.kind };
        Attributes {
            operation: op,
            name,
            namespace,
            resource: admission::Resource { group: &r.group, version: &r.version, resource: &r.resource },
            subresource: part.subresource,
            kind,
            request_kind: kind,
            object,
            old_object: old,
            options,
            user: ctx.user,
            dry_run,
            warnings: ctx.warnings,
            audit: ctx.audit,
            reinvocation: false,
        }
    }

    /// Mutating admission of `obj`; returns it as the plugins left it.
    #[allow(clippy::too_many_arguments)] // the attributes' parts
    async fn admit(&self, ctx: &Context<'_>, op: Operation, part: Part<'_>, obj: Value, old: Option<&Value>, options: &Value, dry_run: bool) -> Result<Value, Status> {
        if !self.admission.mutates(op) {
            return Ok(obj);
        }
        let name = meta::name(&obj).to_string();
        let namespace = if self.resource.namespaced { meta::namespace(&obj).to_string() } else { String::new() };
        if let Some(t) = part.shown_as {
            // Plugins see (and change) the subresource's kind.
            let sub_old = old.map(|o| t.shown(o));
            let mut attrs = self.attributes(ctx, op, part, &name, &namespace, Some(t.shown(&obj)), sub_old.as_ref(), options, dry_run);
            let (group, version, kind) = t.kind();
            attrs.kind = admission::Kind { group, version, kind };
            attrs.request_kind = attrs.kind;
            self.admission.admit(&mut attrs).await?;
            let sub = attrs.object.take().ok_or_else(|| Status::internal("an admission plugin dropped the object"))?;
            let mut obj = t.carry_back(&sub, &obj)?;
            self.decode_admitted(&mut obj)?;
            return Ok(obj);
        }
        let mut attrs = self.attributes(ctx, op, part, &name, &namespace, Some(obj), old, options, dry_run);
        self.admission.admit(&mut attrs).await?;
        let mut obj = attrs.object.take().ok_or_else(|| Status::internal("an admission plugin dropped the object"))?;
        self.decode_admitted(&mut obj)?;
        Ok(obj)
    }

    /// What mutating admission returned, decoded again as kube's dispatcher
    /// decodes a webhook's or policy's patched object: a built-in object
    /// with a value of the wrong type is a 500 (whatever the failure
    /// policy, since the plugin answered), and fields the schema does not
    /// declare are dropped.
    ///
    /// # Errors
    /// 500 InternalError with Go's decoding error.
    fn decode_admitted(&self, obj: &mut Value) -> Result<(), Status> {
        let Some(schema) = self.schema() else { return Ok(()) };
        if schema.origin() != Origin::Custom {
            if let Some(e) = schema.type_error(obj) {
                return Err(Status::internal(e));
            }
        }
        schema.prune(obj);
        Ok(())
    }

    /// Validating admission.
    #[allow(clippy::too_many_arguments)] // the attributes' parts
    async fn admit_validate(&self, ctx: &Context<'_>, op: Operation, part: Part<'_>, obj: Option<&Value>, old: Option<&Value>, options: &Value, dry_run: bool) -> Result<(), Status> {
        if !self.admission.validates(op) {
            return Ok(());
        }
        let about = obj.or(old).unwrap_or(&Value::Null);
        let name = meta::name(about).to_string();
        let namespace = if self.resource.namespaced { meta::namespace(about).to_string() } else { String::new() };
        if let Some(t) = part.shown_as {
            let sub_old = old.map(|o| t.shown(o));
            let mut attrs = self.attributes(ctx, op, part, &name, &namespace, obj.map(|o| t.shown(o)), sub_old.as_ref(), options, dry_run);
            let (group, version, kind) = t.kind();
            attrs.kind = admission::Kind { group, version, kind };
            attrs.request_kind = attrs.kind;
            return self.admission.validate(&attrs).await;
        }
        let attrs = self.attributes(ctx, op, part, &name, &namespace, obj.cloned(), old, options, dry_run);
        self.admission.validate(&attrs).await
    }

    // ---- writes ----

    /// Updates `name` with what `info` makes of the current object, writing
    /// `part` of it: (object, created). A missing object is created when
    /// `part` is the main resource, the strategy creates on update and
    /// `info` may create.
    ///
    /// # Errors
    /// 404; 409 Conflict; 400 and 422 as for create; `info`'s own errors.
    pub async fn update_part(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions, part: Part<'_>) -> Result<(Value, bool), Status> {
        // A server-side apply creates what is missing; a PUT only where the
        // strategy allows it.
        let may_create = part == Part::MAIN && info.may_create() && (info.apply_config().is_some() || self.resource.strategy.allow_create_on_update());
        let mut step = UpdateStep { store: self, ctx, name, info, opts, part, may_create, dry_result: None, created: false };
        let r = self.storage.guaranteed_update(&self.resource.key(ctx.namespace, name), &Preconditions::default(), &mut step).await;
        let created = step.created;
        if let Some(obj) = step.dry_result {
            return Ok((obj, created));
        }
        let obj = r.map_err(|e| self.interpret(e, "update", name, None))?;
        Ok((obj, created))
    }

    /// Deletes the object `name` in `namespace`: (object, removed now?).
    async fn delete_in(&self, ctx: &Context<'_>, namespace: &str, name: &str, opts: &DeleteOptions) -> Result<(Value, bool), Status> {
        if self.admission.mutates(Operation::Delete) {
            let scope = if self.resource.namespaced { namespace } else { "" };
            let mut attrs = self.attributes(ctx, Operation::Delete, Part::MAIN, name, scope, None, None, &opts.raw, opts.dry_run);
            self.admission.admit(&mut attrs).await?;
        }
        let mut step = DeleteStep { store: self, ctx, opts, removed: false, dry_result: None };
        let r = self.storage.guaranteed_update(&self.resource.key(namespace, name), &opts.preconditions, &mut step).await;
        let removed = step.removed;
        let obj = match step.dry_result {
            Some(o) => o,
            None => r.map_err(|e| self.interpret(e, "delete", name, None))?,
        };
        Ok((obj, removed))
    }
}

/// Applies `fieldValidation` to field errors (`unknown field "x"`,
/// `duplicate field "y"`) of a body for `resource`: Strict fails with all of
/// them, Warn adds one warning each, Ignore drops them.
///
/// # Errors
/// 400 strict decoding error.
pub fn report_field_errors(resource: &Resource, directive: FieldValidation, warnings: &Warnings, errors: Vec<String>) -> Result<(), Status> {
    if errors.is_empty() {
        return Ok(());
    }
    match directive {
        FieldValidation::Strict => Err(Status::strict_decoding(&resource.kind, &resource.version, &errors)),
        FieldValidation::Warn => {
            errors.into_iter().for_each(|e| warnings.add(e));
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// Applies `fieldValidation` to an apply configuration's repeated keys,
/// after the merge as kube's apply patcher does (so a conflict is reported
/// first): Strict fails, Warn adds a warning each, Ignore drops them.
///
/// # Errors
/// 400 `error strict decoding YAML: error converting YAML to JSON: yaml:
/// unmarshal errors:` and the keys, one per indented line.
fn report_apply_duplicates(directive: FieldValidation, warnings: &Warnings, duplicates: &[String]) -> Result<(), Status> {
    if duplicates.is_empty() {
        return Ok(());
    }
    match directive {
        FieldValidation::Strict => Err(Status::bad_request(format!("error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {}", duplicates.join("\n  ")))),
        FieldValidation::Warn => {
            duplicates.iter().for_each(|d| warnings.add(d.clone()));
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// Checks the `fieldManager` option as kube does (`ValidateFieldManager`):
/// at most 128 bytes, printable characters only.
///
/// # Errors
/// 422 Invalid on the options kind (`CreateOptions`...) of `meta.k8s.io`.
fn validate_field_manager(opts: &WriteOptions) -> Result<(), Status> {
    let Some(m) = opts.field_manager.as_deref() else { return Ok(()) };
    let causes = validation::field_manager("fieldManager", m);
    if causes.is_empty() {
        return Ok(());
    }
    Err(Status::invalid("meta.k8s.io", opts.kind, "", causes))
}

/// Copies the system fields a client cannot change from `old` to `new`.
fn carry_system_meta(new: &mut Value, old: &Value) -> Result<(), Status> {
    let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
    let m = meta::meta_mut(new).ok_or_else(not_an_object)?;
    for f in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    Ok(())
}

/// `events` with `schema`'s defaults filled into every object.
fn defaulted(schema: crate::schema::Schema, mut events: WatchStream) -> WatchStream {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            let ev = ev.map(|mut e| {
                if e.kind != storage::EventType::Bookmark {
                    let mut object = (*e.object).clone();
                    schema.apply_defaults(&mut object);
                    e.object = Arc::new(object);
                    if let Some(p) = &e.prev {
                        let mut prev = (**p).clone();
                        schema.apply_defaults(&mut prev);
                        e.prev = Some(Arc::new(prev));
                    }
                    e.encoded = None;
                }
                e
            });
            if tx.send(ev).await.is_err() {
                return;
            }
        }
    });
    rx
}

fn without_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// The try-update step of an update.
struct UpdateStep<'a> {
    store: &'a Store,
    ctx: &'a Context<'a>,
    name: &'a str,
    info: &'a dyn UpdatedObjectInfo,
    opts: &'a WriteOptions,
    part: Part<'a>,
    may_create: bool,
    dry_result: Option<Value>,
    created: bool,
}

#[async_trait]
impl TryUpdate for UpdateStep<'_> {
    async fn try_update(&mut self, current: Option<Value>) -> Result<Update, Status> {
        let store = self.store;
        self.created = false;
        self.dry_result = None;
        let current = current.map(|o| store.as_read(o));
        let applied = self.info.apply_config();
        let tracking = if applied.is_some() { Tracking::Applied } else { Tracking::Update };
        let Some(old) = current else {
            if !self.may_create {
                return Err(Status::not_found(&store.resource.group, &store.resource.resource, self.name));
            }
            let mut obj = match applied {
                Some(config) => {
                    let r = &store.resource;
                    if let Some(why) = r.strategy.create_refused() {
                        return Err(Status::method_not_supported(&r.group, &r.resource, why));
                    }
                    let obj = store.apply_configuration(None, config, self.name, self.opts, self.part)?;
                    report_apply_duplicates(self.opts.field_validation, self.ctx.warnings, self.info.apply_duplicates())?;
                    obj
                }
                None => self.info.updated_object(None).await?,
            };
            if let Some(m) = meta::meta_mut(&mut obj) {
                m.remove("resourceVersion");
            }
            let obj = store.admit_new(self.ctx, obj, self.opts, self.part, tracking).await?;
            self.created = true;
            if self.opts.dry_run {
                self.dry_result = Some(obj);
                return Ok(Update::Unchanged);
            }
            return Ok(Update::Put(obj));
        };
        let new = match applied {
            Some(config) => {
                let obj = store.apply_configuration(Some(&old), config, self.name, self.opts, self.part)?;
                report_apply_duplicates(self.opts.field_validation, self.ctx.warnings, self.info.apply_duplicates())?;
                obj
            }
            None => self.info.updated_object(Some(&old)).await?,
        };
        let u = store.admit_update(self.ctx, new, &old, self.opts, self.part, tracking).await?;
        if self.opts.dry_run {
            self.dry_result = Some(match &u {
                Update::Put(o) => o.clone(),
                _ => old,
            });
            return Ok(Update::Unchanged);
        }
        Ok(u)
    }
}

/// The try-update step of a delete: graceful (finalizers) or immediate.
struct DeleteStep<'a> {
    store: &'a Store,
    ctx: &'a Context<'a>,
    opts: &'a DeleteOptions,
    removed: bool,
    dry_result: Option<Value>,
}

#[async_trait]
impl TryUpdate for DeleteStep<'_> {
    async fn try_update(&mut self, current: Option<Value>) -> Result<Update, Status> {
        let store = self.store;
        self.removed = false;
        self.dry_result = None;
        let Some(mut obj) = current else { return Ok(Update::Unchanged) };
        store.admit_validate(self.ctx, Operation::Delete, Part::MAIN, None, Some(&obj), &self.opts.raw, self.opts.dry_run).await?;
        let strategy = &store.resource.strategy;
        if strategy.held_by_finalizers(&obj) {
            if meta::is_deleting(&obj) {
                return Ok(Update::Unchanged);
            }
            if let Some(m) = meta::meta_mut(&mut obj) {
                m.insert("deletionTimestamp".into(), Value::String(meta::now()));
                m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
            }
            strategy.prepare_for_delete(&mut obj);
            if self.opts.dry_run {
                self.dry_result = Some(obj);
                return Ok(Update::Unchanged);
            }
            return Ok(Update::Put(obj));
        }
        self.removed = true;
        if self.opts.dry_run {
            self.dry_result = Some(obj);
            return Ok(Update::Unchanged);
        }
        Ok(Update::Delete)
    }
}

impl Rest for Store {
    fn kind(&self) -> &Gvk {
        &self.kind
    }
    fn getter(&self) -> Option<&dyn Getter> {
        Some(self)
    }
    fn lister(&self) -> Option<&dyn Lister> {
        Some(self)
    }
    fn watcher(&self) -> Option<&dyn Watcher> {
        Some(self)
    }
    fn creater(&self) -> Option<&dyn Creater> {
        Some(self)
    }
    fn updater(&self) -> Option<&dyn Updater> {
        Some(self)
    }
    fn deleter(&self) -> Option<&dyn Deleter> {
        Some(self)
    }
    fn collection_deleter(&self) -> Option<&dyn CollectionDeleter> {
        self.resource.strategy.collection_delete().then_some(self as &dyn CollectionDeleter)
    }
}

#[async_trait]
impl Getter for Store {
    async fn get(&self, ctx: &Context<'_>, name: &str, opts: &GetOptions) -> Result<Value, Status> {
        let key = self.resource.key(ctx.namespace, name);
        let obj = match opts.min_revision {
            None => self.storage.get(&key).await,
            Some(rev) => self.storage.get_not_older_than(&key, rev).await,
        };
        obj.map(|o| self.as_read(o)).map_err(|e| self.interpret(e, "get", name, None))
    }
}

#[async_trait]
impl Lister for Store {
    async fn list(&self, ctx: &Context<'_>, opts: &ListOptions) -> Result<ListResult, Status> {
        let mut read = opts.read.clone();
        read.predicate = self.predicate(&opts.selectors)?;
        let defaults = self.read_defaults();
        if defaults.is_some() {
            read.allow_encoded = false;
        }
        let prefix = self.resource.prefix(Some(ctx.namespace));
        let listed = self.storage.list(&prefix, &read).await.map(|mut l| {
            if let Some(schema) = &defaults {
                for item in &mut l.items {
                    schema.apply_defaults(item);
                }
            }
            l
        });
        listed.map_err(|e| match e {
            storage::Error::Compacted { .. } if read.continue_token.is_some() => {
                let token = read.continue_token.as_deref().and_then(|t| storage::inconsistent_continue(t, &prefix).ok());
                Status::continue_expired(token)
            }
            e => self.interpret(e, "list", "", opts.resource_version.as_deref()),
        })
    }
}

#[async_trait]
impl Watcher for Store {
    async fn watch(&self, ctx: &Context<'_>, name: &str, opts: &WatchOptions) -> Result<WatchStream, Status> {
        let mut read = opts.read.clone();
        read.predicate = self.predicate(&opts.selectors)?;
        read.recursive = name.is_empty();
        let key = if name.is_empty() { self.resource.prefix(Some(ctx.namespace)) } else { self.resource.key(ctx.namespace, name) };
        match self.storage.watch(&key, &read).await {
            Ok(events) => Ok(match self.read_defaults() {
                Some(schema) => defaulted(schema, events),
                None => events,
            }),
            // kube reports a start it cannot reach in the stream (HTTP 200,
            // then an ERROR event), not as the response.
            Err(e @ storage::Error::TooLargeResourceVersion { .. }) => {
                let (tx, rx) = tokio::sync::mpsc::channel(1);
                let _ = tx.try_send(Err(e));
                Ok(rx)
            }
            Err(e) => Err(self.interpret(e, "watch", name, opts.resource_version.as_deref())),
        }
    }
}

#[async_trait]
impl Creater for Store {
    async fn create(&self, ctx: &Context<'_>, obj: Value, opts: &WriteOptions) -> Result<Value, Status> {
        if let Some(why) = self.resource.strategy.create_refused() {
            return Err(Status::method_not_supported(&self.resource.group, &self.resource.resource, why));
        }
        let obj = self.admit_new(ctx, obj, opts, Part::MAIN, Tracking::Update).await?;
        let name = meta::name(&obj).to_string();
        let key = self.resource.key(meta::namespace(&obj), &name);
        if opts.dry_run {
            // kube checks existence for dry runs too.
            return match self.storage.get(&key).await {
                Ok(_) => Err(Status::already_exists(&self.resource.group, &self.resource.resource, &name)),
                Err(storage::Error::NotFound) => Ok(obj),
                Err(e) => Err(self.interpret(e, "create", &name, None)),
            };
        }
        self.storage.create(&key, obj).await.map_err(|e| self.interpret(e, "create", &name, None))
    }
}

#[async_trait]
impl Updater for Store {
    async fn update(&self, ctx: &Context<'_>, name: &str, info: &dyn UpdatedObjectInfo, opts: &WriteOptions) -> Result<(Value, bool), Status> {
        self.update_part(ctx, name, info, opts, Part::MAIN).await
    }
}

#[async_trait]
impl Deleter for Store {
    async fn delete(&self, ctx: &Context<'_>, name: &str, opts: &DeleteOptions) -> Result<(Value, bool), Status> {
        self.delete_in(ctx, ctx.namespace, name, opts).await
    }
}

#[async_trait]
impl CollectionDeleter for Store {
    async fn delete_collection(&self, ctx: &Context<'_>, opts: &DeleteOptions, list: &ListOptions) -> Result<(Vec<Value>, i64), Status> {
        let listed = Lister::list(self, ctx, list).await?;
        let mut deleted = Vec::new();
        for item in listed.items {
            let name = meta::name(&item).to_string();
            let namespace = meta::namespace(&item).to_string();
            match self.delete_in(ctx, &namespace, &name, opts).await {
                Ok((obj, removed)) => deleted.push(if removed { item } else { obj }),
                Err(s) if s.is_not_found() => {}
                Err(s) => return Err(s),
            }
        }
        Ok((deleted, listed.revision))
    }
}
