//! One compiled schema per kind (group, version, kind), for built-in types
//! and custom resources alike (kube's apiextensions-apiserver
//! `pkg/apiserver/schema` and structured-merge-diff's view of OpenAPI).
//!
//! - [`SchemaSource`]: what schemas are compiled from. The built-ins fill
//!   it from Kubernetes' v1.33 definitions; a CRD version fills it with its
//!   `openAPIV3Schema` ([`SchemaSource::crd`]).
//! - [`Compiled`]: a source compiled into an arena of typed nodes, `$ref`s
//!   resolved; [`SchemaRef`] walks it and answers types, required,
//!   nullable, enums, formats, list types and map keys, map types, patch
//!   strategies and merge keys, int-or-string, preserve-unknown-fields,
//!   embedded resources and defaults.
//! - [`Schema`]: one kind's schema, cheap to clone, with what is done with
//!   it: [`Schema::prune`], [`Schema::apply_defaults`],
//!   [`Schema::validate`], and for built-ins the decoder's checks
//!   ([`Schema::type_error`], [`Schema::as_go_decodes`]).
//! - [`SchemaStore`]: the server's shared handle. A lock-free swap of
//!   [`Schemas`]: the built-ins, compiled once per process, and the custom
//!   kinds, which come and go with their CRDs ([`SchemaStore::set_crd`],
//!   [`SchemaStore::remove`]).
//! - [`validate_crd_schema`]: a CRD's schema checked as kube-apiserver
//!   checks it (structural, defaults, extensions).
//! - [`ratchet`]: validation ratcheting of updates.
//!
//! Strategic merge patch, fieldValidation, managedFields and the OpenAPI
//! documents read schemas from here; server-side apply will too.
//!
//! Layering: this module sits below `registry/` and uses only
//! [`crate::errors`] (for Status causes). It never imports `endpoints`,
//! `registry`, `server` or the OpenAPI documents.
//!
//! A custom resource's write, in kube's order:
//!
//! ```text
//! store.set_crd("stable.example.com", "v1", "CronTab", &open_api_v3_schema);   // once, after validate_crd_schema
//! let s = store.of_kind("stable.example.com", "v1", "CronTab")?;
//! let unknown = s.prune(&mut obj);        // ["spec.extra"]: fieldValidation warnings or a Strict 400
//! s.apply_defaults(&mut obj);             // spec.replicas: 1 filled in
//! let errs = s.validate(&obj);            // [spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0]
//! let errs = ratchet(errs, &obj, &old);   // on update: errors on parts left unchanged are dropped
//! Status::invalid(group, kind, name, field::to_causes(&errs))             // 422
//! ```

mod cel_check;
mod cel_rules;
mod cel_values;
mod compiled;
pub mod decode;
mod defaulting;
pub mod field;
mod field_path;
pub mod formats;
mod pruning;
mod ratcheting;
pub mod source;
mod structural;
mod validation;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use serde_json::Value;

use compiled::NodeId;
pub use compiled::{Compiled, ListType, MapType, Origin, SchemaRef, Type};
pub use field::{BadValue, ErrorType, FieldError};
pub use ratcheting::ratchet;
pub use source::{crd_definition_name, SchemaSource, REF_PREFIX};
pub use structural::validate_crd_schema;

/// ObjectMeta's definition name among the built-ins.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A (group, version, kind) key.
type Gvk = (String, String, String);

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    (group.to_string(), version.to_string(), kind.to_string())
}

/// The schema of one kind: its compiled layer and root node (an `Arc` and
/// an index, cheap to clone), and for custom kinds ObjectMeta's schema.
#[derive(Debug, Clone)]
pub struct Schema {
    layer: Arc<Compiled>,
    root: NodeId,
    object_meta: Option<(Arc<Compiled>, NodeId)>,
    /// The layer's `x-kubernetes-validations`, compiled with it; `None`
    /// when it has none (and for the built-ins).
    rules: Option<Arc<cel_rules::Rules>>,
}

impl Schema {
    /// The kind's root schema.
    pub fn root(&self) -> SchemaRef<'_> {
        self.layer.at(self.root)
    }

    /// Built-in or custom.
    pub fn origin(&self) -> Origin {
        self.layer.origin()
    }

    fn object_meta(&self) -> Option<SchemaRef<'_>> {
        self.object_meta.as_ref().map(|(l, id)| l.at(*id))
    }

    /// ObjectMeta's schema for this kind: the root's `metadata` property
    /// for built-ins, the built-in ObjectMeta for custom kinds (whose CRD
    /// schemas leave `metadata` out); what the root and embedded resources'
    /// `metadata` are typed by (field management, server-side apply).
    pub fn metadata_schema(&self) -> Option<SchemaRef<'_>> {
        match self.origin() {
            Origin::Builtin => self.root().property("metadata"),
            Origin::Custom => self.object_meta(),
        }
    }

    /// Drops the fields the schema does not declare and returns their
    /// paths, sorted (`spec.template.spec.containers[0].imagePullPolcy`),
    /// for `fieldValidation`: built-ins as Go's decoder drops them
    /// ([`decode::prune_unknown`]); custom resources by structural pruning,
    /// which keeps apiVersion, kind and metadata at the root and in
    /// embedded resources, cuts metadata to ObjectMeta's fields, and then
    /// drops nulls their schema neither allows nor defaults.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        match self.origin() {
            Origin::Builtin => decode::prune_unknown(self.root(), obj),
            Origin::Custom => {
                let unknown = pruning::prune(self.root(), obj, self.object_meta());
                pruning::prune_nulls(Some(self.root()), obj);
                unknown
            }
        }
    }

    /// Fills in the schema's `default`s (structural defaulting; the
    /// built-in definitions have none, their defaults are the strategies').
    /// Apply after [`Schema::prune`], as kube does.
    pub fn apply_defaults(&self, obj: &mut Value) {
        defaulting::apply(self.root(), obj);
    }

    /// Whether the schema's layer has any `default` (the layer of a custom
    /// kind is its own; the built-ins have none).
    pub fn has_defaults(&self) -> bool {
        self.layer.has_defaults()
    }

    /// Validates a custom resource against its schema, the type meta of
    /// its embedded resources, and its `x-kubernetes-list-type` set and
    /// map lists for duplicates, with kube's field errors, in kube's order
    /// (the checks are described in `schema/validation.rs`). Built-in kinds
    /// validate in their strategies, not here: their definitions carry no
    /// bounds. The root's ObjectMeta is the registry's to check.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validation::validate(self.root(), obj, None);
        errs.extend(validation::validate_embedded(self.root(), obj, None));
        errs.extend(validation::validate_lists(self.root(), obj, None));
        errs
    }

    /// A custom resource's whole validation against its CRD version, as
    /// kube's custom resource strategy runs it on create (`old` `None`)
    /// and update: [`Schema::validate`], ratcheted on update ([`ratchet`]),
    /// then the `x-kubernetes-validations` rules (see `schema/cel_rules.rs`:
    /// `spec: Invalid value: "object": replicas must be <= 8`). The rules
    /// are skipped, with kube's `<nil>: Invalid value: "null": some
    /// validation rules were not checked because the object was invalid;
    /// correct the existing errors to complete validation`, when the
    /// schema errors include a wrong type, a missing required field, an
    /// unsupported value, or a value too long or with too many items.
    pub fn validate_write(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = self.validate(obj);
        if let Some(old) = old {
            errors = ratchet(errors, obj, old);
        }
        if let Some(rules) = &self.rules {
            let blocking = errors.iter().any(|e| matches!(e.kind, ErrorType::NotSupported | ErrorType::Required | ErrorType::TooLong | ErrorType::TooMany | ErrorType::TypeInvalid));
            if blocking {
                errors.push(FieldError::invalid("<nil>", Value::Null, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"));
            } else {
                errors.extend(rules.validate(self.root(), obj, old));
            }
        }
        errors
    }

    /// Validates `status` (the status subresource's write) against the
    /// schema of the `status` property, fields under `status` and names
    /// relative to it, as kube does: `status.num: Invalid value: 15: num in
    /// body should be less than or equal to 10`.
    pub fn validate_status(&self, status: &Value) -> Vec<FieldError> {
        match self.root().property("status") {
            Some(s) => validation::validate(s, status, Some("status")),
            None => Vec::new(),
        }
    }

    /// The first value of a built-in object of the wrong JSON type, in
    /// Go's words ([`decode::type_error`]).
    pub fn type_error(&self, obj: &Value) -> Option<String> {
        decode::type_error(self.root(), obj)
    }

    /// Drops null fields and empty maps, and makes null strings of string
    /// maps empty, as a built-in object comes out of kube's Go types
    /// ([`decode::as_go_decodes`]).
    pub fn as_go_decodes(&self, obj: &mut Value) {
        decode::as_go_decodes(self.root(), obj)
    }
}

/// Every schema the server knows at one moment: the built-ins and the
/// custom kinds.
#[derive(Debug, Clone)]
pub struct Schemas {
    builtin: Arc<Compiled>,
    custom: HashMap<Gvk, Schema>,
    /// Increases with every change of the custom kinds.
    generation: u64,
}

impl Schemas {
    /// The schema of a kind: a custom one if a CRD serves it, else the
    /// built-in one, else `None` (such kinds keep every field).
    pub fn of_kind(&self, group: &str, version: &str, kind: &str) -> Option<Schema> {
        if !self.custom.is_empty() {
            if let Some(s) = self.custom.get(&gvk(group, version, kind)) {
                return Some(s.clone());
            }
        }
        let root = self.builtin.kind_node(group, version, kind)?;
        Some(Schema { layer: self.builtin.clone(), root, object_meta: None, rules: None })
    }

    /// The built-in layer; its [`Compiled::source`] is what the OpenAPI
    /// documents serve.
    pub fn builtin(&self) -> &Compiled {
        &self.builtin
    }

    /// The custom kinds, as (group, version, kind).
    pub fn custom_kinds(&self) -> impl Iterator<Item = &(String, String, String)> {
        self.custom.keys()
    }

    /// Increases with every change of the custom kinds (what the OpenAPI
    /// documents are rebuilt on, with the registry's generation).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The built-in definitions and every custom kind's, in one source
    /// (what the OpenAPI documents serve).
    pub fn source(&self) -> std::borrow::Cow<'_, SchemaSource> {
        if self.custom.is_empty() {
            return std::borrow::Cow::Borrowed(self.builtin.source());
        }
        let mut all = self.builtin.source().clone();
        for ((group, version, kind), s) in &self.custom {
            let name = crd_definition_name(group, version, kind);
            let Some(def) = s.layer.source().get(&name) else { continue };
            all.merge(&SchemaSource::crd(group, version, kind, &published(def, group, version, kind)));
        }
        std::borrow::Cow::Owned(all)
    }
}

/// A custom kind's schema as the OpenAPI documents publish it (kube's CRD
/// OpenAPI builder): tagged with its group/version/kind, which clients
/// such as `kubectl explain` look kinds up by, and with `apiVersion`,
/// `kind` and `metadata` declared if the CRD's schema leaves them out.
fn published(def: &Value, group: &str, version: &str, kind: &str) -> Value {
    let mut d = def.clone();
    let Some(o) = d.as_object_mut() else { return d };
    o.insert("x-kubernetes-group-version-kind".into(), serde_json::json!([{"group": group, "version": version, "kind": kind}]));
    let props = o.entry("properties").or_insert_with(|| serde_json::json!({}));
    if let Some(p) = props.as_object_mut() {
        p.entry("apiVersion").or_insert_with(|| serde_json::json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
        p.entry("kind").or_insert_with(|| serde_json::json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
        p.insert("metadata".into(), serde_json::json!({"allOf": [{"$ref": format!("{REF_PREFIX}{OBJECT_META}")}], "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
    }
    d
}

/// The built-in layer, compiled once per process (the definitions are
/// compiled into the binary and never change).
fn builtin_layer() -> Arc<Compiled> {
    static LAYER: OnceLock<Arc<Compiled>> = OnceLock::new();
    LAYER.get_or_init(|| Arc::new(Compiled::compile(SchemaSource::builtin(), Origin::Builtin))).clone()
}

/// Compiles one CRD version's `openAPIV3Schema` into the schema of its
/// kind. It never fails; check the schema with [`validate_crd_schema`]
/// first, as kube refuses non-structural schemas.
pub fn compile_crd(group: &str, version: &str, kind: &str, open_api_v3_schema: &Value) -> Schema {
    let layer = Arc::new(Compiled::compile(SchemaSource::crd(group, version, kind, open_api_v3_schema), Origin::Custom));
    let root = layer.kind_node(group, version, kind).unwrap_or(0);
    let builtin = builtin_layer();
    let object_meta = builtin.def_node(OBJECT_META).map(|id| (builtin.clone(), id));
    let rules = cel_rules::Rules::compile(&layer);
    Schema { layer, root, object_meta, rules }
}

/// The server's shared, swappable set of schemas. Clones share it. Reads
/// are lock-free ([`arc_swap`]); CRD changes swap in a new [`Schemas`].
#[derive(Debug, Clone)]
pub struct SchemaStore(Arc<ArcSwap<Schemas>>);

impl Default for SchemaStore {
    fn default() -> Self {
        SchemaStore::builtin()
    }
}

impl SchemaStore {
    /// A store of the built-in schemas only.
    pub fn builtin() -> Self {
        SchemaStore(Arc::new(ArcSwap::from_pointee(Schemas { builtin: builtin_layer(), custom: HashMap::new(), generation: 0 })))
    }

    /// The current schemas.
    pub fn load(&self) -> Arc<Schemas> {
        self.0.load_full()
    }

    /// The current schema of a kind ([`Schemas::of_kind`]).
    pub fn of_kind(&self, group: &str, version: &str, kind: &str) -> Option<Schema> {
        self.0.load().of_kind(group, version, kind)
    }

    /// The schema of a custom kind whose schema has defaults (what reads
    /// of stored objects fill in); `None` for built-ins and for custom
    /// kinds without defaults. Cheap when no CRD is served.
    pub fn custom_with_defaults(&self, group: &str, version: &str, kind: &str) -> Option<Schema> {
        let cur = self.0.load();
        if cur.custom.is_empty() {
            return None;
        }
        cur.custom.get(&gvk(group, version, kind)).filter(|s| s.has_defaults()).cloned()
    }

    /// Serves `kind` of `group`/`version` with a CRD version's schema,
    /// replacing any before it ([`compile_crd`]).
    pub fn set_crd(&self, group: &str, version: &str, kind: &str, open_api_v3_schema: &Value) {
        let s = compile_crd(group, version, kind, open_api_v3_schema);
        self.0.rcu(|cur| {
            let mut next = Schemas::clone(cur);
            next.custom.insert(gvk(group, version, kind), s.clone());
            next.generation += 1;
            next
        });
    }

    /// Stops serving a custom kind's schema; built-ins stay.
    pub fn remove(&self, group: &str, version: &str, kind: &str) {
        self.0.rcu(|cur| {
            let mut next = Schemas::clone(cur);
            next.custom.remove(&gvk(group, version, kind));
            next.generation += 1;
            next
        });
    }
}

#[cfg(test)]
mod tests;
