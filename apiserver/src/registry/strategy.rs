//! The per-type semantics of a resource (kube's `RESTCreateStrategy`,
//! `RESTUpdateStrategy` and table convertor), as one trait with defaults.

use serde::Serialize;
use serde_json::Value;

use super::printers;
use super::validation;
pub use super::validation::NameRule;
use crate::errors::Cause;

/// A Table column (`metav1.TableColumnDefinition`).
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    /// Header.
    pub name: &'static str,
    /// `string`, `integer`, `date`...
    #[serde(rename = "type")]
    pub type_: &'static str,
    /// `name` for the name column, else empty.
    pub format: &'static str,
    /// Description.
    pub description: &'static str,
    /// 0 = always shown, 1 = `-o wide` only.
    pub priority: i32,
}

impl Column {
    /// A priority-0 column.
    pub const fn new(name: &'static str, type_: &'static str, description: &'static str) -> Self {
        Column { name, type_, format: "", description, priority: 0 }
    }

    /// A `-o wide` column.
    pub const fn wide(name: &'static str, type_: &'static str, description: &'static str) -> Self {
        Column { name, type_, format: "", description, priority: 1 }
    }
}

/// The `NAME` column.
pub const NAME_COLUMN: Column = Column {
    name: "Name",
    type_: "string",
    format: "name",
    description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    priority: 0,
};

/// The `AGE` column.
pub const AGE_COLUMN: Column = Column::new(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
);

/// The semantics of one type. Every method has a default that suits a
/// plain object like a ConfigMap.
pub trait Strategy: Send + Sync {
    /// How `metadata.name` is validated.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether a status subresource exists: the main resource then ignores
    /// status changes, and `/status` only changes status.
    fn has_status(&self) -> bool {
        false
    }

    /// Whether `metadata.generation` is kept and bumped on spec changes.
    fn has_generation(&self) -> bool {
        false
    }

    /// Whether an update from `old` to `new` changes `metadata.generation`
    /// (for types with [`Strategy::has_generation`]): by default, when
    /// `spec` changed.
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        new.get("spec") != old.get("spec")
    }

    /// Why a create is refused at the moment, if it is: the message of a
    /// 405 MethodNotAllowed (a custom resource whose CRD is being deleted).
    fn create_refused(&self) -> Option<String> {
        None
    }

    /// Whether PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Fills defaults (kube's defaulting functions).
    fn default(&self, _obj: &mut Value) {}

    /// Clears what a client may not set on create.
    fn prepare_for_create(&self, obj: &mut Value) {
        if self.has_status() {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
    }

    /// Carries over what a client may not change on update.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.has_status() {
            keep_status(new, old);
        }
    }

    /// Type-specific validation of a new object.
    fn validate(&self, _obj: &Value) -> Vec<Cause> {
        Vec::new()
    }

    /// Type-specific validation of an update.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<Cause> {
        self.validate(new)
    }

    /// Fields usable in field selectors besides `metadata.name` and
    /// `metadata.namespace`.
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// The value of a selectable field.
    fn field_value(&self, obj: &Value, field: &str) -> String {
        validation::field_string(obj, field)
    }

    /// Whether DELETECOLLECTION is served (namespaces have none).
    fn collection_delete(&self) -> bool {
        true
    }

    /// Whether a delete of `obj` only marks it (sets `deletionTimestamp`)
    /// and leaves it for its finalizers to release, and whether an object
    /// being deleted stays after an update. By default: while
    /// `metadata.finalizers` is not empty.
    fn held_by_finalizers(&self, obj: &Value) -> bool {
        crate::meta::has_finalizers(obj)
    }

    /// What a delete that leaves the object to its finalizers changes
    /// besides `deletionTimestamp` (a namespace turns `Terminating`).
    fn prepare_for_delete(&self, _obj: &mut Value) {}

    /// For a served version that is not the storage version: the group and
    /// version its objects are stored as (under that version's key
    /// prefix). They are converted through the hub on every read and write.
    /// `None` (the default): stored as served.
    fn storage_version(&self) -> Option<(&str, &str)> {
        None
    }

    /// Converts an object of this version to the hub (internal) version.
    /// Identity by default.
    fn convert_to_hub(&self, obj: Value) -> Value {
        obj
    }

    /// Converts a hub object to this version, setting `apiVersion`.
    /// Identity by default.
    fn convert_from_hub(&self, obj: Value) -> Value {
        obj
    }

    /// Table columns, Name first (`kubectl get`).
    fn columns(&self) -> Vec<Column> {
        vec![NAME_COLUMN, AGE_COLUMN]
    }

    /// One Table row's cells, matching [`Strategy::columns`].
    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![Value::String(crate::meta::name(obj).to_string()), Value::String(printers::age(obj))]
    }
}

/// Gives `new` the status of `old` (none if `old` has none): what the main
/// resource of a type with a status subresource does on update.
pub fn keep_status(new: &mut Value, old: &Value) {
    let Some(o) = new.as_object_mut() else { return };
    match old.get("status") {
        Some(s) => o.insert("status".into(), s.clone()),
        None => o.remove("status"),
    };
}

/// A plain type with no special semantics.
pub struct DefaultStrategy;

impl Strategy for DefaultStrategy {}
