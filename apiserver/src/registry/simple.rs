//! A table-driven [`Strategy`] for types whose semantics are a few flags,
//! defaults and table columns, which is most of the API groups beyond core
//! and apps.

use std::sync::Arc;

use serde_json::Value;

use super::strategy::{Column, NameRule, Strategy, AGE_COLUMN, NAME_COLUMN};
use super::{Resource, ResourceDef};
use crate::errors::Cause;

/// The `CREATED AT` column of RBAC and CRDs.
pub const CREATED_AT_COLUMN: Column = Column::new("Created At", "date", "CreationTimestamp is a timestamp representing the server time when this object was created.");

/// A strategy from data. Build one with [`Simple::new`] and the `with_*`
/// methods.
pub struct Simple {
    status: bool,
    generation: bool,
    name_rule: NameRule,
    columns: Option<fn() -> Vec<Column>>,
    cells: Option<fn(&Value) -> Vec<Value>>,
    defaults: Option<fn(&mut Value)>,
    validate: Option<fn(&Value) -> Vec<Cause>>,
    validate_update: Option<fn(&Value, &Value) -> Vec<Cause>>,
    fields: &'static [&'static str],
}

impl Simple {
    /// NAME and AGE columns, no status, no generation, subdomain names.
    pub fn new() -> Self {
        Simple { status: false, generation: false, name_rule: NameRule::Subdomain, columns: None, cells: None, defaults: None, validate: None, validate_update: None, fields: &[] }
    }

    /// A status subresource and a generation bumped on spec changes.
    pub fn with_status(mut self) -> Self {
        self.status = true;
        self.generation = true;
        self
    }

    /// A generation bumped on spec changes, without a status subresource.
    pub fn with_generation(mut self) -> Self {
        self.generation = true;
        self
    }

    /// How names are validated.
    pub fn with_names(mut self, rule: NameRule) -> Self {
        self.name_rule = rule;
        self
    }

    /// Table columns and the cells of one row.
    pub fn with_table(mut self, columns: fn() -> Vec<Column>, cells: fn(&Value) -> Vec<Value>) -> Self {
        self.columns = Some(columns);
        self.cells = Some(cells);
        self
    }

    /// Defaulting.
    pub fn with_defaults(mut self, f: fn(&mut Value)) -> Self {
        self.defaults = Some(f);
        self
    }

    /// Type-specific validation.
    pub fn with_validation(mut self, f: fn(&Value) -> Vec<Cause>) -> Self {
        self.validate = Some(f);
        self
    }

    /// Validation of an update against the stored object, besides
    /// [`Simple::with_validation`]'s (immutable fields).
    pub fn with_update_validation(mut self, f: fn(&Value, &Value) -> Vec<Cause>) -> Self {
        self.validate_update = Some(f);
        self
    }

    /// Extra field-selector fields.
    pub fn with_fields(mut self, fields: &'static [&'static str]) -> Self {
        self.fields = fields;
        self
    }
}

impl Default for Simple {
    fn default() -> Self {
        Simple::new()
    }
}

impl Strategy for Simple {
    fn name_rule(&self) -> NameRule {
        self.name_rule
    }
    fn has_status(&self) -> bool {
        self.status
    }
    fn has_generation(&self) -> bool {
        self.generation
    }
    fn default(&self, obj: &mut Value) {
        if let Some(f) = self.defaults {
            f(obj);
        }
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        self.validate.map(|f| f(obj)).unwrap_or_default()
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        causes.extend(self.validate_update.map(|f| f(new, old)).unwrap_or_default());
        causes
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        self.fields
    }
    fn columns(&self) -> Vec<Column> {
        match self.columns {
            Some(f) => f(),
            None => vec![NAME_COLUMN, AGE_COLUMN],
        }
    }
    fn cells(&self, obj: &Value) -> Vec<Value> {
        match self.cells {
            Some(f) => f(obj),
            None => vec![Value::String(crate::meta::name(obj).to_string()), Value::String(super::printers::age(obj))],
        }
    }
}

/// One row of a group's resource table.
pub struct Def {
    /// Plural.
    pub resource: &'static str,
    /// Singular.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Namespace-scoped?
    pub namespaced: bool,
    /// Short names.
    pub short: &'static [&'static str],
    /// Categories.
    pub categories: &'static [&'static str],
}

impl Def {
    /// A stored resource of `group`/`version` with the generic store's
    /// verbs; a `status` subresource when the strategy has one.
    pub fn build(self, group: &str, version: &str, strategy: Box<dyn Strategy>) -> ResourceDef {
        let subresources = if strategy.has_status() { vec![super::subresources::status()] } else { Vec::new() };
        let resource = Resource::new(group, version, self.resource, self.singular, self.kind, self.namespaced, Arc::from(strategy));
        ResourceDef::stored(resource, subresources).short_names(self.short).categories(self.categories)
    }
}

/// A `Def` in one line: `def("jobs", "job", "Job", true, &[], &["all"])`.
pub const fn def(resource: &'static str, singular: &'static str, kind: &'static str, namespaced: bool, short: &'static [&'static str], categories: &'static [&'static str]) -> Def {
    Def { resource, singular, kind, namespaced, short, categories }
}
