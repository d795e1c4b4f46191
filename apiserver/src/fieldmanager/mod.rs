//! `metadata.managedFields` for Update operations (kube
//! `apiserver/pkg/endpoints/handlers/fieldmanager` over
//! structured-merge-diff): which manager set which fields.
//!
//! Every create, update and patch compares the object before and after the
//! request, field by field along the type's OpenAPI schema, and gives the
//! request's manager the fields it added or changed:
//!
//! ```text
//! mine   = (mine ∪ added ∪ modified) − removed
//! others = others − (added ∪ modified ∪ removed)     (dropped when empty)
//! ```
//!
//! A manager is the `fieldManager` query parameter, or else the program
//! name of the `User-Agent` (the part before the first `/`). Entries are
//! keyed by manager, operation (`Update`), apiVersion and subresource, and
//! written in kube's order: by operation, then time, manager, apiVersion,
//! subresource. A request that changes nothing leaves them untouched.
//!
//! Field sets are written as `FieldsV1`: a tree whose keys are `f:<field>`
//! for struct fields and map keys, `k:<json of the key fields>` for items of
//! `x-kubernetes-list-type: map` lists, `v:<json value>` for set items, and
//! `.` when a node that has children is itself in the set. A ConfigMap
//! created with `data: {a: "1"}` and later given label `x` by `kubectl
//! label` carries:
//!
//! ```text
//! - manager: kubectl-create        fieldsV1: {"f:data": {".": {}, "f:a": {}}}
//! - manager: kubectl-label         fieldsV1: {"f:metadata": {"f:labels": {".": {}, "f:x": {}}}}
//! ```
//!
//! The fields every object has (apiVersion, kind, name, namespace, uid,
//! resourceVersion, generation, creationTimestamp, managedFields) are left
//! out, as kube strips them; so is `status` on the main resource of types
//! with a status subresource, and everything but `status` on `/status`.
//!
//! A create is compared against the type's Go zero value, in which by-value
//! structs (`spec.template`, `spec.strategy`) already exist and required
//! lists are null, so only what the client added gets a `.` of its own
//! ([`BY_VALUE`] names the by-value structs, which the schema cannot tell).
//! Server-side apply (operation `Apply`) is [`apply`] (`apply.rs`), over
//! the schema-typed walks of `typed.rs`; both cap Update entries as kube
//! does (`cap.rs`, on Update only).

mod apply;
mod cap;
mod conflict;
mod lastapplied;
mod typed;

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::schema::{ListType, MapType, Schema, SchemaRef};

pub use apply::{apply, ApplyRequest};
pub use conflict::{ApplyError, Conflict};

/// A set of field paths, as a tree of path elements (`f:name`, `k:{..}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    pub(crate) member: bool,
    pub(crate) children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub(crate) fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub(crate) fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, v) in &other.children {
            self.children.entry(k.clone()).or_default().union(v);
        }
    }

    /// Removes the members of `other` (each path exactly, not what is below it).
    pub(crate) fn difference(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (k, v) in &other.children {
            if let Some(c) = self.children.get_mut(k) {
                c.difference(v);
            }
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    /// The members of both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet { member: self.member && other.member, children: BTreeMap::new() };
        for (k, c) in &self.children {
            if let Some(o) = other.children.get(k) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// Every member path, in structured-merge-diff's order: a node's
    /// members first, then what is below its children, each in path
    /// element order ([`element_cmp`]).
    pub(crate) fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut children: Vec<(&String, &FieldSet)> = self.children.iter().collect();
        children.sort_by(|a, b| element_cmp(a.0, b.0));
        for (k, c) in &children {
            if c.member {
                prefix.push((*k).clone());
                out.push(prefix.clone());
                prefix.pop();
            }
        }
        for (k, c) in children {
            prefix.push(k.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Removes a path and everything below it.
    fn remove_tree(&mut self, path: &[&str]) {
        match path.split_first() {
            None => *self = FieldSet::default(),
            Some((first, [])) => {
                self.children.remove(*first);
            }
            Some((first, rest)) => {
                if let Some(c) = self.children.get_mut(*first) {
                    c.remove_tree(rest);
                }
            }
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    /// Removes one path's membership, keeping what is below it.
    fn remove_member(&mut self, path: &[&str]) {
        match path.split_first() {
            None => self.member = false,
            Some((first, rest)) => {
                if let Some(c) = self.children.get_mut(*first) {
                    c.remove_member(rest);
                }
            }
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    /// Keeps only the subtree at `key` (a top-level `f:` element).
    fn only(&self, key: &str) -> FieldSet {
        let mut out = FieldSet::default();
        if let Some(c) = self.children.get(key) {
            out.children.insert(key.to_string(), c.clone());
        }
        out
    }

    /// The `FieldsV1` JSON form.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Parses the `FieldsV1` JSON form; `None` if it is not one: a node
    /// that is not an object, or a key that is not `.` nor a path element
    /// (`f:<name>`, `k:<JSON object>`, `v:<JSON value>`, `i:<index>`), as
    /// structured-merge-diff's `SetFromJSON` refuses them.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let m = v.as_object()?;
        let mut s = FieldSet { member: m.is_empty(), children: BTreeMap::new() };
        for (k, c) in m {
            if k == "." {
                s.member = true;
            } else if path_element_ok(k) {
                s.children.insert(k.clone(), FieldSet::from_fields_v1(c)?);
            } else {
                return None;
            }
        }
        Some(s)
    }
}

/// structured-merge-diff's order of path elements (`PathElement.Compare`):
/// field names, then keys, then values, then indexes; names by their text,
/// keys field by field (name, then value), values by [`value_cmp`], indexes
/// by number. Unparsable elements sort last, by their text.
fn element_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn parse(e: &str) -> (u8, Option<Value>, &str) {
        match e.split_once(':') {
            Some(("f", name)) => (0, None, name),
            Some(("k", key)) => (1, serde_json::from_str(key).ok(), key),
            Some(("v", value)) => (2, serde_json::from_str(value).ok(), value),
            Some(("i", index)) => (3, index.parse::<i64>().ok().map(Value::from), index),
            _ => (4, None, e),
        }
    }
    let ((ra, va, ta), (rb, vb, tb)) = (parse(a), parse(b));
    ra.cmp(&rb).then_with(|| match (ra, va, vb) {
        (1, Some(Value::Object(ka)), Some(Value::Object(kb))) => {
            // Key fields sorted by name, compared pairwise, then by count.
            for ((na, xa), (nb, xb)) in ka.iter().zip(kb.iter()) {
                let c = na.cmp(nb).then_with(|| value_cmp(xa, xb));
                if c != Ordering::Equal {
                    return c;
                }
            }
            ka.len().cmp(&kb.len())
        }
        (2 | 3, Some(x), Some(y)) => value_cmp(&x, &y),
        _ => ta.cmp(tb),
    })
}

/// structured-merge-diff's total order of values (`value.Compare`):
/// numbers (by value) before strings, booleans, lists, maps and null.
fn value_cmp(a: &Value, b: &Value) -> std::cmp::Ordering {
    let rank = |v: &Value| match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    };
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0)),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => x.iter().zip(y).map(|(p, q)| value_cmp(p, q)).find(|c| c.is_ne()).unwrap_or_else(|| x.len().cmp(&y.len())),
        (Value::Object(x), Value::Object(y)) => x.iter().zip(y).map(|((kp, p), (kq, q))| kp.cmp(kq).then_with(|| value_cmp(p, q))).find(|c| c.is_ne()).unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => std::cmp::Ordering::Equal,
    })
}

/// Whether `k` is a `FieldsV1` path element: `f:` with a name, `k:` with
/// a JSON object, `v:` with a JSON value, `i:` with an integer.
fn path_element_ok(k: &str) -> bool {
    let Some((kind, rest)) = k.split_once(':') else { return false };
    match kind {
        "f" => true,
        "k" => serde_json::from_str::<Value>(rest).is_ok_and(|v| v.is_object()),
        "v" => serde_json::from_str::<Value>(rest).is_ok(),
        "i" => rest.parse::<i64>().is_ok(),
        _ => false,
    }
}

/// How a node is compared, from its schema (or, without one, its value).
enum Shape<'a> {
    /// Compared as a whole: scalars, atomic maps and lists.
    Leaf,
    /// Struct fields or map entries, each its own `f:` element; the schema
    /// of a named field, or of every entry.
    Fields(FieldSchemas<'a>),
    /// `x-kubernetes-list-type: set`: items are `v:` elements.
    Set,
    /// `x-kubernetes-list-type: map`: items are `k:` elements with their own
    /// fields.
    KeyedList(&'a [String], Option<SchemaRef<'a>>),
}

enum FieldSchemas<'a> {
    Props(SchemaRef<'a>),
    Each(Option<SchemaRef<'a>>),
}

impl<'a> FieldSchemas<'a> {
    fn get(&self, k: &str) -> Option<SchemaRef<'a>> {
        match self {
            FieldSchemas::Props(p) => p.property(k),
            FieldSchemas::Each(s) => *s,
        }
    }
}

fn shape<'a>(schema: Option<SchemaRef<'a>>, value: &Value) -> Shape<'a> {
    match value {
        Value::Object(_) => {
            let Some(s) = schema else {
                return Shape::Fields(FieldSchemas::Each(None));
            };
            if s.map_type() == Some(MapType::Atomic) {
                return Shape::Leaf;
            }
            if s.has_properties() {
                return Shape::Fields(FieldSchemas::Props(s));
            }
            if let Some(ap) = s.additional_properties() {
                return Shape::Fields(FieldSchemas::Each(Some(ap)));
            }
            // RawExtension, FieldsV1 and the like: opaque.
            if s.ty() == Some(crate::schema::Type::Object) && !s.preserve_unknown_fields() {
                return Shape::Leaf;
            }
            Shape::Fields(FieldSchemas::Each(None))
        }
        Value::Array(_) => {
            let Some(s) = schema else { return Shape::Leaf };
            match s.list_type() {
                Some(ListType::Set) => Shape::Set,
                Some(ListType::Map) if !s.list_map_keys().is_empty() => Shape::KeyedList(s.list_map_keys(), s.items()),
                _ => Shape::Leaf,
            }
        }
        _ => Shape::Leaf,
    }
}

/// What a request did to an object, as field sets.
#[derive(Debug, Default)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

/// `k:{"name":"x"}` for a keyed list item (key fields in name order), or
/// `None` when a key field is missing.
fn item_key(keys: &[String], item: &Value) -> Option<String> {
    let mut m = Map::new();
    for k in keys {
        let v = item.get(k).filter(|v| !v.is_null())?;
        m.insert(k.to_string(), v.clone());
    }
    Some(format!("k:{}", Value::Object(m)))
}

fn compare(schema: Option<SchemaRef<'_>>, lhs: Option<&Value>, rhs: Option<&Value>, path: &mut Vec<String>, out: &mut Comparison) {
    // A null on the left is a field the old object had without a value (a
    // Go zero value): a value there is a change to it, not an addition.
    let lhs_null = lhs.is_some_and(Value::is_null);
    let lhs = lhs.filter(|v| !v.is_null());
    let rhs = rhs.filter(|v| !v.is_null());
    let (probe, other) = match (lhs, rhs) {
        (None, None) => return,
        (Some(l), r) => (l, r),
        (None, Some(r)) => (r, None),
    };
    // Values of different JSON types are compared whole.
    let same_type = other.is_none_or(|o| std::mem::discriminant(o) == std::mem::discriminant(probe));
    let sh = if same_type { shape(schema, probe) } else { Shape::Leaf };
    match (lhs, rhs) {
        (None, Some(_)) if lhs_null => {
            if matches!(sh, Shape::Leaf) {
                out.modified.insert(path);
            }
        }
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(l), Some(r)) => {
            if matches!(sh, Shape::Leaf) && l != r {
                out.modified.insert(path);
            }
        }
        (None, None) => {}
    }
    let empty = Map::new();
    match sh {
        Shape::Leaf => {}
        Shape::Fields(fields) => {
            let lm = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let rm = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let keys: std::collections::BTreeSet<&String> = lm.keys().chain(rm.keys()).collect();
            for k in keys {
                path.push(format!("f:{k}"));
                compare(fields.get(k), lm.get(k), rm.get(k), path, out);
                path.pop();
            }
        }
        Shape::Set => {
            let items = |v: Option<&Value>| -> Vec<String> { v.and_then(Value::as_array).into_iter().flatten().map(|i| format!("v:{i}")).collect() };
            let (li, ri) = (items(lhs), items(rhs));
            for i in ri.iter().filter(|i| !li.contains(i)) {
                path.push(i.clone());
                out.added.insert(path);
                path.pop();
            }
            for i in li.iter().filter(|i| !ri.contains(i)) {
                path.push(i.clone());
                out.removed.insert(path);
                path.pop();
            }
        }
        Shape::KeyedList(keys, item_schema) => {
            let keyed = |v: Option<&Value>| -> Option<BTreeMap<String, Value>> { v.and_then(Value::as_array).into_iter().flatten().map(|i| item_key(keys, i).map(|k| (k, i.clone()))).collect() };
            match (keyed(lhs), keyed(rhs)) {
                (Some(lk), Some(rk)) => {
                    let all: std::collections::BTreeSet<&String> = lk.keys().chain(rk.keys()).collect();
                    for k in all {
                        path.push(k.clone());
                        compare(item_schema, lk.get(k), rk.get(k), path, out);
                        path.pop();
                    }
                }
                // Items without their keys: compared whole.
                _ => {
                    if lhs.is_some() && rhs.is_some() && lhs != rhs {
                        out.modified.insert(path);
                    }
                }
            }
        }
    }
}

/// Struct-typed fields that Go declares by value, not by pointer, so that
/// they exist (as `{}`) in a type's zero value: besides every `metadata`,
/// `spec` and `status`, these (definition short name, field).
const BY_VALUE: &[(&str, &str)] = &[
    ("DeploymentSpec", "template"),
    ("DeploymentSpec", "strategy"),
    ("StatefulSetSpec", "template"),
    ("StatefulSetSpec", "updateStrategy"),
    ("DaemonSetSpec", "template"),
    ("DaemonSetSpec", "updateStrategy"),
    ("ReplicaSetSpec", "template"),
    ("JobSpec", "template"),
    ("CronJobSpec", "jobTemplate"),
    ("Container", "resources"),
    ("EphemeralContainer", "resources"),
    ("PersistentVolumeClaimSpec", "resources"),
    ("HorizontalPodAutoscalerSpec", "scaleTargetRef"),
];

/// The JSON of a type's Go zero value, as far as field tracking needs it:
/// by-value structs as objects ([`BY_VALUE`]) and the other fields Go
/// always writes (the schema's `required` ones that are not scalars) as
/// null. kube compares a create against this, so a struct that exists in
/// it gets no `.` of its own.
fn zero_value(s: SchemaRef<'_>, depth: usize) -> Value {
    let short = s.definition_name().and_then(|n| n.rsplit('.').next()).unwrap_or("");
    let mut out = Map::new();
    if !s.has_properties() {
        return Value::Object(out);
    }
    let required = s.required();
    for (k, p) in s.properties() {
        let is_struct = p.has_properties();
        let by_value = matches!(k, "metadata" | "spec" | "status") || BY_VALUE.contains(&(short, k));
        if is_struct && by_value && depth < 8 {
            out.insert(k.to_string(), zero_value(p, depth + 1));
        } else if required.iter().any(|r| r == k) && (is_struct || p.items().is_some() || p.has_additional_properties()) {
            out.insert(k.to_string(), Value::Null);
        }
    }
    Value::Object(out)
}

/// Fields kube never records (`fieldmanager` stripmeta), as paths whose
/// membership is removed.
pub(crate) const STRIPPED: &[&[&str]] = &[
    &["f:apiVersion"],
    &["f:kind"],
    &["f:metadata"],
    &["f:metadata", "f:name"],
    &["f:metadata", "f:namespace"],
    &["f:metadata", "f:creationTimestamp"],
    &["f:metadata", "f:selfLink"],
    &["f:metadata", "f:uid"],
    &["f:metadata", "f:clusterName"],
    &["f:metadata", "f:generation"],
    &["f:metadata", "f:resourceVersion"],
];

/// Which part of the object a request may own fields in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole object.
    All,
    /// The main resource of a type with a status subresource: not `status`.
    NoStatus,
    /// The `status` subresource: only `status`.
    StatusOnly,
}

pub(crate) fn restrict(s: &mut FieldSet, scope: Scope) {
    for p in STRIPPED {
        s.remove_member(p);
    }
    match scope {
        Scope::All => {}
        Scope::NoStatus => s.remove_tree(&["f:status"]),
        Scope::StatusOnly => *s = s.only("f:status"),
    }
}

/// One `ManagedFieldsEntry`.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) subresource: String,
    pub(crate) set: FieldSet,
}

impl Entry {
    /// One entry as kube's `DecodeManagedFields` reads it: operation
    /// `Apply` or `Update`, an apiVersion, fieldsType `FieldsV1` and a
    /// well-formed `fieldsV1` (absent: no fields); `None` otherwise.
    fn decode(v: &Value) -> Option<Entry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let e = Entry { manager: s("manager"), operation: s("operation"), api_version: s("apiVersion"), time: s("time"), subresource: s("subresource"), set: FieldSet::default() };
        if !matches!(e.operation.as_str(), "Apply" | "Update") || e.api_version.is_empty() || s("fieldsType") != "FieldsV1" {
            return None;
        }
        let mut set = match v.get("fieldsV1").filter(|f| !f.is_null()) {
            Some(f) => FieldSet::from_fields_v1(f)?,
            None => FieldSet::default(),
        };
        // The object itself is never owned (`{}` or `{".": {}}` at the top
        // is an empty set), as structured-merge-diff does not track it.
        set.member = false;
        Some(Entry { set, ..e })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if !self.time.is_empty() {
            m.insert("time".into(), json!(self.time));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn same_key(&self, other: &Entry) -> bool {
        self.manager == other.manager && self.operation == other.operation && self.api_version == other.api_version && self.subresource == other.subresource
    }

    /// Whether two entries have one manager identifier (kube's
    /// `BuildManagerIdentifier`): manager, operation and subresource, and
    /// for Update entries the apiVersion (an applier is one manager
    /// whatever version it applies in).
    pub(crate) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager && self.operation == other.operation && self.subresource == other.subresource && (self.operation == "Apply" || self.api_version == other.api_version)
    }
}

pub(crate) fn managed_fields(obj: Option<&Value>) -> Option<&Value> {
    obj.and_then(|o| o.get("metadata")).and_then(|m| m.get("managedFields"))
}

/// A `metadata.managedFields` list as kube's `DecodeManagedFields` reads
/// it: `None` when any entry is malformed ([`Entry::decode`]); absent or
/// null is no entries. Of two entries of one manager ([`Entry::same_manager`])
/// the later is kept.
pub(crate) fn decode_entries(v: Option<&Value>) -> Option<Vec<Entry>> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Some(Vec::new()) };
    let mut out: Vec<Entry> = Vec::new();
    for e in v.as_array()? {
        let e = Entry::decode(e)?;
        out.retain(|o| !o.same_manager(&e));
        out.push(e);
    }
    Some(out)
}

/// Whether a client's `metadata.managedFields` asks to reset tracking
/// (kube's `isResetManagedFields`): an empty list, or a list of one entry
/// whose every field is empty.
fn is_reset(v: Option<&Value>) -> bool {
    match v.and_then(Value::as_array).map(Vec::as_slice) {
        Some([]) => true,
        Some([Value::Object(e)]) => e.values().all(|f| f.is_null() || f.as_str() == Some("")),
        _ => false,
    }
}

pub(crate) fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// The manager of a request: `fieldManager`, else the program name of the
/// User-Agent (`kubectl.1.33/v1.33.0 (linux/amd64) …` → `kubectl.1.33`),
/// cut to 128 characters, as kube's `prefixFromUserAgent`.
pub fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    user_agent.unwrap_or("").split('/').next().unwrap_or("").chars().take(128).collect()
}

/// The other served versions of a request's resource, for tracking the
/// managers whose entries were recorded in another apiVersion (kube's
/// structured-merge-diff `Updater` with the resource's converter): such a
/// manager's conflicts and removed fields are computed on the objects
/// converted to its apiVersion, with that version's schema, since its
/// field paths are that version's (autoscaling/v1
/// `.spec.targetCPUUtilizationPercentage` is autoscaling/v2
/// `.spec.metrics[…]`).
///
/// Without it, or when a conversion fails (`None`: an unknown version, or
/// a converter that needs a webhook), the entry is compared with the
/// request's version's paths, as if they were the same.
#[derive(Clone, Copy)]
pub struct Versions<'a> {
    /// Converts an object of the request's version (without
    /// `metadata.managedFields`) to the given apiVersion (`autoscaling/v1`).
    pub convert: &'a dyn Fn(&Value, &str) -> Option<Value>,
    /// Converts an object of the given apiVersion back to the request's.
    pub convert_back: &'a dyn Fn(&Value, &str) -> Option<Value>,
    /// The kind's schema in the given apiVersion, if it has one.
    pub schema_of: &'a dyn Fn(&str) -> Option<Schema>,
}

impl std::fmt::Debug for Versions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Versions")
    }
}

/// `[added, modified, removed]` from one object to another, with a schema.
pub(crate) type CompareFn = fn(Option<&Schema>, Option<&Value>, &Value) -> [FieldSet; 3];

/// A request's change (`lhs` to `rhs`) as seen from other apiVersions:
/// the objects converted to each and compared there, once per version.
pub(crate) struct InVersions<'a> {
    versions: Option<Versions<'a>>,
    own: &'a str,
    lhs: Option<&'a Value>,
    rhs: &'a Value,
    scope: Scope,
    compare: CompareFn,
    cache: BTreeMap<String, Option<[FieldSet; 3]>>,
}

impl<'a> InVersions<'a> {
    pub(crate) fn new(versions: Option<Versions<'a>>, own: &'a str, lhs: Option<&'a Value>, rhs: &'a Value, scope: Scope, compare: CompareFn) -> Self {
        InVersions { versions, own, lhs, rhs, scope, compare, cache: BTreeMap::new() }
    }

    /// `[added, modified, removed]` in `api_version` (restricted to the
    /// scope), or `None` when it is the request's own version or the
    /// objects do not convert: the caller uses its own comparison.
    pub(crate) fn of(&mut self, api_version: &str) -> Option<&[FieldSet; 3]> {
        if api_version == self.own || api_version.is_empty() {
            return None;
        }
        let v = self.versions?;
        let (lhs, rhs, scope, compare) = (self.lhs, self.rhs, self.scope, self.compare);
        self.cache
            .entry(api_version.to_string())
            .or_insert_with(|| {
                let rhs = (v.convert)(rhs, api_version)?;
                let lhs = match lhs {
                    Some(l) => Some((v.convert)(l, api_version)?),
                    None => None,
                };
                let schema = (v.schema_of)(api_version);
                let mut sets = compare(schema.as_ref(), lhs.as_ref(), &rhs);
                for s in &mut sets {
                    restrict(s, scope);
                }
                Some(sets)
            })
            .as_ref()
    }
}

/// What one request is, for [`update`].
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The manager ([`manager_name`]).
    pub manager: &'a str,
    /// The served apiVersion (`apps/v1`).
    pub api_version: &'a str,
    /// `status`, or empty.
    pub subresource: &'a str,
    /// The part of the object the request may own.
    pub scope: Scope,
    /// The time to record (RFC 3339).
    pub now: &'a str,
    /// The resource's other versions, for entries recorded in them.
    pub versions: Option<Versions<'a>>,
}

/// Writes `new`'s `metadata.managedFields` for an Update operation that
/// turned `old` (`None` for a create) into `new`; `schema` is the kind's
/// ([`crate::schema::SchemaStore::of_kind`]), if it has one.
///
/// The starting entries are, as kube's field manager picks them:
///
/// - on a subresource, `old`'s, whatever the client sent;
/// - none, when the client sent `[]` or `[{}]` (a reset);
/// - the client's own when it sent a well-formed, non-empty list
///   (clients may rewrite them: kubectl's migration from client-side
///   apply does);
/// - else `old`'s, so a client unaware of the field cannot drop it by
///   leaving it out or sending a malformed list.
///
/// An update that starts from no entries is not tracked (kube's
/// `skipNonAppliedManager`): the object is written without managedFields,
/// and stays so until a server-side apply. A create always is.
pub fn update(schema: Option<&Schema>, old: Option<&Value>, new: &mut Value, req: &Request<'_>) {
    let root = schema.map(Schema::root);
    let sent = managed_fields(Some(new));
    let olds = || decode_entries(managed_fields(old)).unwrap_or_default();
    let mut entries = if !req.subresource.is_empty() {
        olds()
    } else if is_reset(sent) {
        Vec::new()
    } else {
        match decode_entries(sent) {
            Some(e) if !e.is_empty() => e,
            _ => olds(),
        }
    };
    if entries.is_empty() && old.is_some() {
        write_entries(new, entries);
        return;
    }

    let lhs = old.map(without_managed_fields);
    let rhs = without_managed_fields(new);
    let mut cmp = Comparison::default();
    let zero = root.map_or_else(|| json!({}), |r| zero_value(r, 0));
    let lhs_or_zero = lhs.unwrap_or(zero);
    compare(root, Some(&lhs_or_zero), Some(&rhs), &mut Vec::new(), &mut cmp);
    for s in [&mut cmp.added, &mut cmp.modified, &mut cmp.removed] {
        restrict(s, req.scope);
    }
    let mut changed = cmp.added.clone();
    changed.union(&cmp.modified);
    changed.union(&cmp.removed);

    if !changed.is_empty() {
        let me = Entry {
            manager: req.manager.to_string(),
            operation: "Update".into(),
            api_version: req.api_version.to_string(),
            time: req.now.to_string(),
            subresource: req.subresource.to_string(),
            set: FieldSet::default(),
        };
        let mut mine = entries.iter().position(|e| e.same_key(&me)).map(|i| entries.remove(i)).unwrap_or(me);
        let mut elsewhere = InVersions::new(req.versions, req.api_version, old.map(|_| &lhs_or_zero), &rhs, req.scope, compare_from_zero);
        for e in &mut entries {
            match elsewhere.of(&e.api_version) {
                Some([added, modified, removed]) => {
                    e.set.difference(added);
                    e.set.difference(modified);
                    e.set.difference(removed);
                }
                None => e.set.difference(&changed),
            }
        }
        mine.set.union(&cmp.added);
        mine.set.union(&cmp.modified);
        mine.set.difference(&cmp.removed);
        restrict(&mut mine.set, req.scope);
        mine.time = req.now.to_string();
        if !mine.set.is_empty() {
            entries.push(mine);
        }
    }
    // Managers left with no field go, whether or not this request changed
    // anything (structured-merge-diff drops empty sets on every write).
    entries.retain(|e| !e.set.is_empty());
    cap::cap_update_managers(&mut entries, cap::MAX_UPDATE_MANAGERS);
    write_entries(new, entries);
}

/// [`compare`] for [`InVersions`]: `lhs` `None` is a create, compared
/// against the type's zero value.
fn compare_from_zero(schema: Option<&Schema>, lhs: Option<&Value>, rhs: &Value) -> [FieldSet; 3] {
    let root = schema.map(Schema::root);
    let zero = root.map_or_else(|| json!({}), |r| zero_value(r, 0));
    let mut cmp = Comparison::default();
    compare(root, Some(lhs.unwrap_or(&zero)), Some(rhs), &mut Vec::new(), &mut cmp);
    [cmp.added, cmp.modified, cmp.removed]
}

/// Sorts `entries` in kube's order (operation, time, manager, apiVersion,
/// subresource) and writes them as `obj`'s `metadata.managedFields`
/// (removed when there are none).
pub(crate) fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.sort_by(|p, q| {
        let secs = |t: &str| crate::meta::parse_time(t).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs());
        (p.operation.as_str(), secs(&p.time), p.manager.as_str(), p.api_version.as_str(), p.subresource.as_str()).cmp(&(
            q.operation.as_str(),
            secs(&q.time),
            q.manager.as_str(),
            q.api_version.as_str(),
            q.subresource.as_str(),
        ))
    });
    let Some(m) = crate::meta::meta_mut(obj) else {
        return;
    };
    if entries.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(entries.iter().map(Entry::to_value).collect()));
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod update_tests {
    use super::*;

    fn req<'a>(manager: &'a str, now: &'a str) -> Request<'a> {
        Request { manager, api_version: "v1", subresource: "", scope: Scope::All, now, versions: None }
    }

    #[test]
    fn configmap_managers() {
        let store = crate::schema::SchemaStore::builtin();
        let cm_schema = store.of_kind("", "v1", "ConfigMap");
        let schema = cm_schema.as_ref();
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "uid": "u"}, "data": {"a": "1"}});
        update(schema, None, &mut cm, &req("kubectl-create", "2026-01-01T00:00:00Z"));
        let mf = cm["metadata"]["managedFields"].clone();
        assert_eq!(
            mf,
            json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}])
        );

        // Labels by another manager: a second entry.
        let old = cm.clone();
        cm["metadata"]["labels"] = json!({"x": "y"});
        update(schema, Some(&old), &mut cm, &req("kubectl-label", "2026-01-01T00:00:01Z"));
        let mf = cm["metadata"]["managedFields"].as_array().unwrap().clone();
        assert_eq!(mf.len(), 2);
        assert_eq!(mf[1]["manager"], "kubectl-label");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}}}));

        // Changing a field moves it; a manager left with nothing goes.
        let old = cm.clone();
        cm["data"]["a"] = json!("2");
        update(schema, Some(&old), &mut cm, &req("kubectl-patch", "2026-01-01T00:00:02Z"));
        let mf = cm["metadata"]["managedFields"].as_array().unwrap().clone();
        let managers: Vec<&str> = mf.iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(managers, ["kubectl-create", "kubectl-label", "kubectl-patch"]);
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {}}));
        assert_eq!(mf[2]["fieldsV1"], json!({"f:data": {"f:a": {}}}));

        // A no-op keeps everything, times included.
        let old = cm.clone();
        update(schema, Some(&old), &mut cm, &req("other", "2026-01-01T00:00:09Z"));
        assert_eq!(cm, old);
    }

    /// kube's `isResetManagedFields` and `skipNonAppliedManager`: `[]` or
    /// `[{}]` resets tracking on an update, and an untracked object stays
    /// untracked through later updates; a create is always tracked.
    #[test]
    fn reset_lists_stop_tracking_until_an_apply() {
        let store = crate::schema::SchemaStore::builtin();
        let schema = store.of_kind("", "v1", "ConfigMap");
        let base = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "uid": "u"}, "data": {"a": "1"}});
        let mut tracked = base.clone();
        update(schema.as_ref(), None, &mut tracked, &req("kubectl-create", "2026-01-01T00:00:00Z"));
        assert!(tracked["metadata"]["managedFields"].is_array());
        for reset in [json!([]), json!([{}]), json!([{"manager": "", "operation": "", "fieldsV1": null}])] {
            let mut new = tracked.clone();
            new["metadata"]["managedFields"] = reset.clone();
            new["metadata"]["labels"] = json!({"x": "y"});
            update(schema.as_ref(), Some(&tracked), &mut new, &req("kubectl-label", "2026-01-01T00:00:01Z"));
            assert!(new["metadata"].get("managedFields").is_none(), "{reset}: {new}");
            // A later update of the untracked object records nothing.
            let old = new.clone();
            new["data"]["a"] = json!("2");
            update(schema.as_ref(), Some(&old), &mut new, &req("kubectl-edit", "2026-01-01T00:00:02Z"));
            assert!(new["metadata"].get("managedFields").is_none(), "{reset}: {new}");
        }
        // On a subresource the client's list is ignored: no reset.
        let mut on_status = tracked.clone();
        on_status["metadata"]["managedFields"] = json!([]);
        on_status["data"]["a"] = json!("3");
        let status_req = Request { subresource: "status", ..req("m", "2026-01-01T00:00:03Z") };
        update(schema.as_ref(), Some(&tracked), &mut on_status, &status_req);
        let managers: Vec<&str> = on_status["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(managers, ["kubectl-create", "m"]);
        // A create with `[]` is tracked.
        let mut created = base.clone();
        created["metadata"]["managedFields"] = json!([]);
        update(schema.as_ref(), None, &mut created, &req("kubectl-create", "2026-01-01T00:00:00Z"));
        assert_eq!(created["metadata"]["managedFields"], tracked["metadata"]["managedFields"]);
    }

    /// A client's list is used when every entry decodes; one bad entry
    /// (operation, fieldsType, apiVersion, a path element) makes the whole
    /// list fall back to the stored one, as kube's `DecodeManagedFields`.
    #[test]
    fn clients_lists_are_honoured_only_when_they_decode() {
        let store = crate::schema::SchemaStore::builtin();
        let schema = store.of_kind("", "v1", "ConfigMap");
        let mut old = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "uid": "u"}, "data": {"a": "1"}});
        update(schema.as_ref(), None, &mut old, &req("kubectl-create", "2026-01-01T00:00:00Z"));
        let good = json!({"manager": "mine", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}});
        let mut new = old.clone();
        new["metadata"]["managedFields"] = json!([good.clone()]);
        update(schema.as_ref(), Some(&old), &mut new, &req("x", "2026-01-01T00:00:01Z"));
        assert_eq!(new["metadata"]["managedFields"], json!([good.clone()]), "rewritten by the client");
        let bad = [
            ("operation", json!("Patch")),
            ("fieldsType", json!("FieldsV2")),
            ("fieldsType", Value::Null),
            ("apiVersion", json!("")),
            ("fieldsV1", json!({"x:a": {}})),
            ("fieldsV1", json!({"k:nope": {}})),
        ];
        for (field, value) in bad {
            let mut entry = good.clone();
            entry[field] = value.clone();
            let mut new = old.clone();
            new["metadata"]["managedFields"] = json!([good.clone(), entry]);
            update(schema.as_ref(), Some(&old), &mut new, &req("x", "2026-01-01T00:00:01Z"));
            assert_eq!(new["metadata"]["managedFields"], old["metadata"]["managedFields"], "{field}: {value}");
        }
        // An entry that owns nothing is dropped by the same write.
        let mut new = old.clone();
        let empty = json!({"manager": "empty", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}});
        let dot = json!({"manager": "dot", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {".": {}}});
        new["metadata"]["managedFields"] = json!([good.clone(), empty, dot]);
        update(schema.as_ref(), Some(&old), &mut new, &req("x", "2026-01-01T00:00:01Z"));
        assert_eq!(new["metadata"]["managedFields"], json!([good.clone()]));
        // Two entries of one manager: the later is kept.
        let mut later = good.clone();
        later["fieldsV1"] = json!({"f:data": {}});
        let mut new = old.clone();
        new["metadata"]["managedFields"] = json!([good, later.clone()]);
        update(schema.as_ref(), Some(&old), &mut new, &req("x", "2026-01-01T00:00:01Z"));
        assert_eq!(new["metadata"]["managedFields"], json!([later]));
    }

    #[test]
    fn keyed_lists_sets_and_atomic_maps() {
        let store = crate::schema::SchemaStore::builtin();
        let dep = store.of_kind("apps", "v1", "Deployment");
        let schema = dep.as_ref();
        let mut d = json!({"metadata": {"name": "w"}, "spec": {
            "selector": {"matchLabels": {"app": "w"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}},
        }, "status": {"replicas": 0}});
        let r = Request { scope: Scope::NoStatus, api_version: "apps/v1", ..req("m", "2026-01-01T00:00:00Z") };
        update(schema, None, &mut d, &r);
        let f = &d["metadata"]["managedFields"][0]["fieldsV1"];
        assert_eq!(f["f:spec"]["f:selector"], json!({}), "LabelSelector is atomic: {f}");
        let c = &f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
        assert_eq!(c["f:image"], json!({}));
        assert_eq!(c["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"]["f:containerPort"], json!({}));
        assert!(f.get("f:status").is_none(), "{f}");
        // By-value structs and required lists exist in the zero value: no `.`.
        let spec = &f["f:spec"];
        assert!(spec.get(".").is_none() && spec["f:template"].get(".").is_none() && spec["f:template"]["f:spec"].get(".").is_none(), "{f}");
        assert!(spec["f:template"]["f:spec"]["f:containers"].get(".").is_none(), "{f}");
        assert_eq!(c["."], json!({}));
        assert_eq!(c["f:ports"]["."], json!({}), "ports are optional, so added: {f}");
        assert_eq!(FieldSet::from_fields_v1(f).unwrap().to_fields_v1(), *f);
    }

    #[test]
    fn manager_names() {
        assert_eq!(manager_name(Some("kubectl-create"), Some("kubectl/v1.33.0")), "kubectl-create");
        assert_eq!(manager_name(None, Some("kubectl.1.33/v1.33.0 (linux/amd64) kubernetes/abc")), "kubectl.1.33");
        assert_eq!(manager_name(Some(""), Some("OpenAPI-Generator/37.0.2/python")), "OpenAPI-Generator");
        assert_eq!(manager_name(None, None), "");
    }
}
