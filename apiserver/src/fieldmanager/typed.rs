//! Values seen through a kind's schema, as structured-merge-diff's `typed`
//! package sees them: what a node is (scalar, atomic, granular map or
//! struct, set, associative list), the path element of a list item, and
//! the four walks server-side apply needs over them: the field set of a
//! value (`ToFieldSet`), the comparison of two values (`Compare`), the
//! merge of an apply configuration into a live object (`Merge`) and the
//! removal of a field set from a value (`RemoveItems`).
//!
//! Kinds of node, from the schema or, without one, from the value:
//!
//! ```text
//! object, x-kubernetes-map-type: atomic          → Atomic (one leaf)
//! object with properties / additionalProperties  → Granular (a key per `f:`)
//! object, preserve-unknown-fields or no schema   → Granular, keys untyped
//! object without either (RawExtension)           → Atomic
//! array, list-type set                           → Set (`v:<json>` items)
//! array, list-type map + keys                    → Assoc (`k:{…}` items)
//! any other array                                → Atomic
//! ```
//!
//! The root and every `x-kubernetes-embedded-resource` object also declare
//! `apiVersion`, `kind` and `metadata` (typed by ObjectMeta) even when the
//! CRD's schema leaves them out, as kube's CRD schemas gain them.
//!
//! A key field that an associative list's item leaves out takes the
//! item schema's `default` for it (ports' `protocol` is `TCP`); one
//! without a default is left out of the key, and an item that has none of
//! its key fields is an error (structured-merge-diff v4.6).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use super::FieldSet;
use crate::errors::{go_type, go_value};
use crate::schema::{ListType, MapType, Schema, SchemaRef, Type};

/// Key fields whose defaults kube's published OpenAPI carries
/// (`+default="TCP"`) but our built-in definitions do not: (definition,
/// field, default).
const KEY_DEFAULTS: &[(&str, &str, &str)] =
    &[("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"), ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"), ("io.k8s.api.core.v1.EndpointPort", "protocol", "TCP")];

/// What a node is.
#[derive(Clone, Copy)]
pub(crate) enum Kind<'a> {
    /// A scalar (or null): one leaf.
    Scalar,
    /// An atomic map or list: one leaf, replaced whole.
    Atomic,
    /// A struct or granular map: each key its own `f:` element; the schema
    /// of the object, if any.
    Granular(Option<SchemaRef<'a>>),
    /// `x-kubernetes-list-type: set`.
    Set,
    /// `x-kubernetes-list-type: map`: the list's schema.
    Assoc(SchemaRef<'a>),
}

/// A schema-aware view of values: the kind's root schema, ObjectMeta's,
/// and the root's node id.
#[derive(Clone, Copy)]
pub(crate) struct Typer<'a> {
    pub(crate) root: Option<SchemaRef<'a>>,
    meta: Option<SchemaRef<'a>>,
}

/// The schema of a child and whether it is a declared (named) field.
type Child<'a> = (Option<SchemaRef<'a>>, bool);

impl<'a> Typer<'a> {
    pub(crate) fn new(schema: Option<&'a Schema>) -> Typer<'a> {
        Typer { root: schema.map(Schema::root), meta: schema.and_then(Schema::metadata_schema) }
    }

    fn is_resource(&self, s: Option<SchemaRef<'a>>, depth: usize) -> bool {
        depth == 0 || s.is_some_and(|s| s.embedded_resource())
    }

    /// The kind of `v` under schema `s`.
    pub(crate) fn kind(&self, s: Option<SchemaRef<'a>>, v: &Value) -> Kind<'a> {
        match v {
            Value::Object(_) => {
                let Some(s) = s else { return Kind::Granular(None) };
                if s.map_type() == Some(MapType::Atomic) {
                    return Kind::Atomic;
                }
                if s.has_properties() || s.has_additional_properties() || s.preserve_unknown_fields() || s.embedded_resource() {
                    return Kind::Granular(Some(s));
                }
                if s.ty() == Some(Type::Object) {
                    return Kind::Atomic;
                }
                Kind::Granular(None)
            }
            Value::Array(_) => {
                let Some(s) = s else { return Kind::Atomic };
                match s.list_type() {
                    Some(ListType::Set) => Kind::Set,
                    Some(ListType::Map) if !s.list_map_keys().is_empty() => Kind::Assoc(s),
                    _ => Kind::Atomic,
                }
            }
            _ => Kind::Scalar,
        }
    }

    /// The schema of key `k` of a granular object with schema `s` (at
    /// `depth` from the root) and whether it is a declared field.
    pub(crate) fn field(&self, s: Option<SchemaRef<'a>>, depth: usize, k: &str) -> Child<'a> {
        if let Some(p) = s.and_then(|s| s.property(k)) {
            return (Some(p), true);
        }
        if self.is_resource(s, depth) {
            match k {
                "apiVersion" | "kind" => return (None, true),
                "metadata" => return (self.meta, true),
                _ => {}
            }
        }
        (s.and_then(|s| s.additional_properties()), false)
    }

    /// Whether an undeclared key `k` is allowed in a granular object with
    /// schema `s`.
    fn allows_unknown(&self, s: Option<SchemaRef<'a>>, k: &str, depth: usize) -> bool {
        match s {
            None => true,
            Some(s) => s.preserve_unknown_fields() || s.has_additional_properties() || !s.has_properties() || (self.is_resource(Some(s), depth) && matches!(k, "apiVersion" | "kind" | "metadata")),
        }
    }

    /// The path element (`k:{…}` or `v:<json>`) of an item of a set or
    /// associative list `list`.
    pub(crate) fn item_pe(&self, kind: Kind<'a>, item: &Value) -> Result<String, String> {
        match kind {
            Kind::Assoc(list) => {
                if item.is_null() {
                    return Err("associative list with keys may not have a null element".into());
                }
                let Some(m) = item.as_object() else {
                    return Err("associative list with keys may not have non-map elements".into());
                };
                let keys = list.list_map_keys();
                let items = list.items();
                let mut key = Map::new();
                for k in keys {
                    if let Some(v) = m.get(k) {
                        key.insert(k.clone(), v.clone());
                    } else if let Some(d) = key_default(items, k) {
                        key.insert(k.clone(), d);
                    }
                }
                if key.is_empty() {
                    let quoted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
                    return Err(format!("associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)", quoted.join(" ")));
                }
                Ok(format!("k:{}", Value::Object(key)))
            }
            _ => Ok(format!("v:{item}")),
        }
    }

    /// The schema of a list's items.
    fn items(kind: Kind<'a>, s: Option<SchemaRef<'a>>) -> Option<SchemaRef<'a>> {
        match kind {
            Kind::Assoc(l) => l.items(),
            _ => s.and_then(|s| s.items()),
        }
    }

    // ---- ToFieldSet -------------------------------------------------------

    /// The field set of an apply configuration, checking it against the
    /// schema on the way (`ToFieldSet` over a value built by
    /// `FromUnstructured`). Errors are structured-merge-diff's, prefixed
    /// with the path: `.spec.replicas: expected numeric (int or float), got
    /// string`.
    pub(crate) fn field_set_of(&self, v: &Value) -> Result<FieldSet, String> {
        let mut out = FieldSet::default();
        let mut path = Vec::new();
        let mut errs = Vec::new();
        self.fs(self.root, v, 0, &mut path, &mut out, &mut errs);
        match errs.is_empty() {
            true => Ok(out),
            false => Err(errs.join(", ")),
        }
    }

    fn fs(&self, s: Option<SchemaRef<'a>>, v: &Value, depth: usize, path: &mut Vec<String>, out: &mut FieldSet, errs: &mut Vec<String>) {
        if let Some(e) = type_error(s, v) {
            errs.push(format!("{}: {e}", print_path(path)));
            return;
        }
        let kind = self.kind(s, v);
        match kind {
            Kind::Scalar | Kind::Atomic => out.insert(path),
            Kind::Granular(gs) => {
                let Some(m) = v.as_object() else { return };
                for (k, c) in m {
                    let (cs, named) = self.field(gs, depth, k);
                    path.push(format!("f:{k}"));
                    if !named && !self.allows_unknown(gs, k, depth) {
                        errs.push(format!("{}: field not declared in schema", print_path(path)));
                        path.pop();
                        continue;
                    }
                    self.fs(cs, c, depth + 1, path, out, errs);
                    if c.is_null() || c.as_object().is_some_and(Map::is_empty) || !named {
                        out.insert(path);
                    }
                    path.pop();
                }
            }
            Kind::Set | Kind::Assoc(_) => {
                let Some(items) = v.as_array() else { return };
                let is = Self::items(kind, s);
                let mut seen = HashSet::new();
                let mut dup = HashSet::new();
                let mut pes = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match self.item_pe(kind, item) {
                        Ok(pe) => {
                            if !seen.insert(pe.clone()) {
                                dup.insert(pe.clone());
                            }
                            pes.push(Some(pe));
                        }
                        Err(e) => {
                            errs.push(format!("{}: element {i}: {e}", print_path(path)));
                            pes.push(None);
                        }
                    }
                }
                for (item, pe) in items.iter().zip(pes) {
                    let Some(pe) = pe else { continue };
                    path.push(pe.clone());
                    if !dup.contains(&pe) {
                        self.fs(is, item, depth + 1, path, out, errs);
                    }
                    out.insert(path);
                    path.pop();
                }
            }
        }
    }

    // ---- Compare ----------------------------------------------------------

    /// What changed from `lhs` to `rhs` (`Compare`): leaves whose value
    /// changed are modified; every node present on one side only is added
    /// or removed, with what is below it.
    pub(crate) fn compare(&self, lhs: &Value, rhs: &Value) -> Comparison {
        let mut out = Comparison::default();
        self.cmp(self.root, Some(lhs), Some(rhs), 0, &mut Vec::new(), &mut out);
        out
    }

    fn cmp(&self, s: Option<SchemaRef<'a>>, lhs: Option<&Value>, rhs: Option<&Value>, depth: usize, path: &mut Vec<String>, out: &mut Comparison) {
        let (probe, other) = match (lhs, rhs) {
            (None, None) => return,
            (Some(l), r) => (l, r),
            (None, Some(r)) => (r, None),
        };
        let same_type = other.is_none_or(|o| std::mem::discriminant(o) == std::mem::discriminant(probe));
        let kind = if same_type { self.kind(s, probe) } else { Kind::Scalar };
        let empty = |v: Option<&Value>| match v {
            None | Some(Value::Null) => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        let leaf = match kind {
            Kind::Scalar | Kind::Atomic => true,
            _ => empty(lhs) && empty(rhs),
        };
        if leaf {
            match (lhs, rhs) {
                (None, Some(_)) => out.added.insert(path),
                (Some(_), None) => out.removed.insert(path),
                (Some(l), Some(r)) if l != r => out.modified.insert(path),
                _ => {}
            }
            return;
        }
        match kind {
            Kind::Granular(gs) => {
                let e = Map::new();
                let lm = lhs.and_then(Value::as_object).unwrap_or(&e);
                let rm = rhs.and_then(Value::as_object).unwrap_or(&e);
                for k in lm.keys().chain(rm.keys().filter(|k| !lm.contains_key(*k))) {
                    let (cs, _) = self.field(gs, depth, k);
                    path.push(format!("f:{k}"));
                    self.cmp(cs, lm.get(k), rm.get(k), depth + 1, path, out);
                    path.pop();
                }
            }
            Kind::Set | Kind::Assoc(_) => {
                let is = Self::items(kind, s);
                let index = |v: Option<&'_ Value>| -> BTreeMap<String, Vec<Value>> {
                    let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
                    for item in v.and_then(Value::as_array).into_iter().flatten() {
                        if let Ok(pe) = self.item_pe(kind, item) {
                            m.entry(pe).or_default().push(item.clone());
                        }
                    }
                    m
                };
                let (li, ri) = (index(lhs), index(rhs));
                let all: std::collections::BTreeSet<&String> = li.keys().chain(ri.keys()).collect();
                for pe in all {
                    let l = li.get(pe).map(Vec::as_slice).unwrap_or(&[]);
                    let r = ri.get(pe).map(Vec::as_slice).unwrap_or(&[]);
                    path.push(pe.clone());
                    match (l.len(), r.len()) {
                        (0..=1, 0..=1) => self.cmp(is, l.first(), r.first(), depth + 1, path, out),
                        (2.., 2..) => {
                            if l != r {
                                out.modified.insert(path);
                            }
                        }
                        (2.., _) => {
                            if let Some(r0) = r.first() {
                                self.cmp(is, None, Some(r0), depth + 1, path, out);
                            }
                            out.removed.insert(path);
                        }
                        (_, _) => {
                            if let Some(l0) = l.first() {
                                self.cmp(is, Some(l0), None, depth + 1, path, out);
                            }
                            out.added.insert(path);
                        }
                    }
                    path.pop();
                }
            }
            Kind::Scalar | Kind::Atomic => {}
        }
        match (lhs, rhs) {
            (None, Some(_)) => out.added.insert(path),
            (Some(_), None) => out.removed.insert(path),
            _ => {}
        }
    }

    // ---- Merge ------------------------------------------------------------

    /// Merges the apply configuration `rhs` into `lhs` (`Merge`): leaves
    /// from `rhs` where it has them; granular objects key by key; sets and
    /// associative lists item by item, in structured-merge-diff's order
    /// (items only in `lhs` keep their place, shared items follow `rhs`'s
    /// order, new items come in `rhs`'s order).
    pub(crate) fn merge(&self, lhs: &Value, rhs: &Value) -> Result<Value, String> {
        let mut path = Vec::new();
        self.mrg(self.root, Some(lhs), Some(rhs), 0, &mut path).map(|v| v.unwrap_or(Value::Null))
    }

    fn mrg(&self, s: Option<SchemaRef<'a>>, lhs: Option<&Value>, rhs: Option<&Value>, depth: usize, path: &mut Vec<String>) -> Result<Option<Value>, String> {
        let Some(r) = rhs else { return Ok(lhs.cloned()) };
        // A value only in the config is still walked (against an empty
        // one), so its lists are checked for duplicate keys.
        let empty;
        let l = match lhs {
            Some(l) => l,
            None => match r {
                Value::Object(_) => {
                    empty = Value::Object(Map::new());
                    &empty
                }
                Value::Array(_) => {
                    empty = Value::Array(Vec::new());
                    &empty
                }
                _ => return Ok(Some(r.clone())),
            },
        };
        if std::mem::discriminant(l) != std::mem::discriminant(r) {
            return Ok(Some(r.clone()));
        }
        match self.kind(s, r) {
            Kind::Scalar | Kind::Atomic => Ok(Some(r.clone())),
            Kind::Granular(gs) => {
                let (Some(lm), Some(rm)) = (l.as_object(), r.as_object()) else { return Ok(Some(r.clone())) };
                let mut out = lm.clone();
                for (k, rv) in rm {
                    let (cs, _) = self.field(gs, depth, k);
                    path.push(format!("f:{k}"));
                    let merged = self.mrg(cs, lm.get(k), Some(rv), depth + 1, path)?;
                    path.pop();
                    if let Some(m) = merged {
                        out.insert(k.clone(), m);
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            kind @ (Kind::Set | Kind::Assoc(_)) => {
                let (Some(la), Some(ra)) = (l.as_array(), r.as_array()) else { return Ok(Some(r.clone())) };
                self.merge_items(kind, Self::items(kind, s), la, ra, depth, path).map(Some)
            }
        }
    }

    fn merge_items(&self, kind: Kind<'a>, is: Option<SchemaRef<'a>>, la: &[Value], ra: &[Value], depth: usize, path: &mut Vec<String>) -> Result<Value, String> {
        let mut rpes = Vec::with_capacity(ra.len());
        let mut rmap: HashMap<String, &Value> = HashMap::with_capacity(ra.len());
        for (i, item) in ra.iter().enumerate() {
            let pe = self.item_pe(kind, item).map_err(|e| format!("{}: element {i}: {e}", print_path(path)))?;
            if rmap.insert(pe.clone(), item).is_some() {
                return Err(format!("{}: duplicate entries for key {}", print_path(path), print_element(&pe)));
            }
            rpes.push(pe);
        }
        // Items of the live list without a key (left by an older writer)
        // are kept where they are.
        let lpes: Vec<Option<String>> = la.iter().map(|i| self.item_pe(kind, i).ok()).collect();
        let mut lcount: HashMap<&str, usize> = HashMap::new();
        for pe in lpes.iter().flatten() {
            *lcount.entry(pe.as_str()).or_default() += 1;
        }
        let lone = |pe: &str| lcount.get(pe) == Some(&1);
        let lfirst: HashMap<&str, &Value> = lpes.iter().zip(la).filter_map(|(pe, v)| pe.as_deref().filter(|p| lone(p)).map(|p| (p, v))).collect();
        let shared: Vec<&String> = rpes.iter().filter(|pe| lcount.contains_key(pe.as_str())).collect();
        let mut next_shared = 0usize;
        let mut done: HashSet<&str> = HashSet::new();
        let mut out = Vec::with_capacity(la.len().max(ra.len()));
        let (mut li, mut ri) = (0usize, 0usize);
        let merge_one = |this: &Self, pe: &String, path: &mut Vec<String>| -> Result<Option<Value>, String> {
            path.push(pe.clone());
            let m = this.mrg(is, lfirst.get(pe.as_str()).copied(), rmap.get(pe).copied(), depth + 1, path);
            path.pop();
            m
        };
        while li < la.len() || ri < ra.len() {
            if li < la.len() && ri < ra.len() {
                if lpes[li].as_ref() == Some(&rpes[ri]) {
                    let pe = &rpes[ri];
                    done.insert(pe.as_str());
                    if let Some(v) = merge_one(self, pe, path)? {
                        out.push(v);
                    }
                    li += 1;
                    ri += 1;
                    next_shared += 1;
                    continue;
                }
                // A shared item that is not the next one in the config's
                // order: it is written when the config reaches it.
                if let Some(pe) = &lpes[li] {
                    if rmap.contains_key(pe) && shared.get(next_shared).is_some_and(|n| *n != pe) {
                        li += 1;
                        continue;
                    }
                }
            }
            if li < la.len() {
                match &lpes[li] {
                    Some(pe) if rmap.contains_key(pe) => {
                        if done.contains(pe.as_str()) {
                            li += 1;
                        }
                    }
                    _ => {
                        out.push(la[li].clone());
                        li += 1;
                        continue;
                    }
                }
            }
            if ri < ra.len() {
                let pe = &rpes[ri];
                done.insert(pe.as_str());
                if let Some(v) = merge_one(self, pe, path)? {
                    out.push(v);
                }
                ri += 1;
                if shared.get(next_shared).is_some_and(|n| *n == pe) {
                    next_shared += 1;
                }
            }
        }
        Ok(Value::Array(out))
    }

    // ---- RemoveItems ------------------------------------------------------

    /// `v` without the members of `set` (each with everything below it);
    /// objects and lists left empty by the removal are dropped.
    pub(crate) fn remove(&self, v: &Value, set: &FieldSet) -> Value {
        self.rm(self.root, v, set, 0).unwrap_or_else(|| Value::Object(Map::new()))
    }

    fn rm(&self, s: Option<SchemaRef<'a>>, v: &Value, set: &FieldSet, depth: usize) -> Option<Value> {
        let kind = self.kind(s, v);
        match kind {
            Kind::Scalar | Kind::Atomic => Some(v.clone()),
            Kind::Granular(gs) => {
                let m = v.as_object()?;
                if m.is_empty() {
                    return Some(v.clone());
                }
                let mut out = Map::new();
                for (k, c) in m {
                    let key = format!("f:{k}");
                    match set.children.get(&key) {
                        Some(sub) if sub.member => {}
                        Some(sub) => {
                            let (cs, _) = self.field(gs, depth, k);
                            if let Some(r) = self.rm(cs, c, sub, depth + 1) {
                                out.insert(k.clone(), r);
                            }
                        }
                        None => {
                            out.insert(k.clone(), c.clone());
                        }
                    }
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            Kind::Set | Kind::Assoc(_) => {
                let a = v.as_array()?;
                if a.is_empty() {
                    return Some(v.clone());
                }
                let is = Self::items(kind, s);
                let mut out = Vec::with_capacity(a.len());
                for item in a {
                    let Ok(pe) = self.item_pe(kind, item) else {
                        out.push(item.clone());
                        continue;
                    };
                    match set.children.get(&pe) {
                        Some(sub) if sub.member => {}
                        Some(sub) => {
                            if let Some(r) = self.rm(is, item, sub, depth + 1) {
                                out.push(r);
                            }
                        }
                        None => out.push(item.clone()),
                    }
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
        }
    }

    // ---- EnsureNamedFieldsAreMembers --------------------------------------

    /// `set` with every declared struct field that has members below it a
    /// member itself (what removal compares sets by).
    pub(crate) fn ensure_named(&self, set: &FieldSet) -> FieldSet {
        self.ens(self.root, set, 0)
    }

    fn ens(&self, s: Option<SchemaRef<'a>>, set: &FieldSet, depth: usize) -> FieldSet {
        let mut out = FieldSet { member: set.member, children: BTreeMap::new() };
        for (k, c) in &set.children {
            let (cs, named) = match k.strip_prefix("f:") {
                Some(name) => self.field(s, depth, name),
                // An item of a list: typed by the list's items.
                None => (s.and_then(|s| s.items()), false),
            };
            let mut n = self.ens(cs, c, depth + 1);
            if named && !c.children.is_empty() {
                n.member = true;
            }
            out.children.insert(k.clone(), n);
        }
        out
    }
}

/// The default of key field `k` of an associative list's items.
fn key_default(items: Option<SchemaRef<'_>>, k: &str) -> Option<Value> {
    let items = items?;
    if let Some(d) = items.property(k).and_then(|p| p.default_value()) {
        return Some(d.clone());
    }
    let def = items.definition_name()?;
    KEY_DEFAULTS.iter().find(|(d, f, _)| *d == def && *f == k).map(|(_, _, v)| Value::String((*v).to_string()))
}

/// A value that does not fit its schema's type, in structured-merge-diff's
/// words; `None` when it fits or the schema says nothing.
fn type_error(s: Option<SchemaRef<'_>>, v: &Value) -> Option<String> {
    let s = s?;
    if v.is_null() || s.int_or_string() || s.one_of().next().is_some() {
        return None;
    }
    match s.ty()? {
        Type::Object => (!v.is_object()).then(|| format!("expected map, got {}", go_value(v))),
        Type::Array => (!v.is_array()).then(|| format!("expected list, got {}", go_value(v))),
        Type::String => (!v.is_string()).then(|| format!("expected string, got {}", go_value_sharp(v))),
        Type::Integer | Type::Number => (!v.is_number()).then(|| format!("expected numeric (int or float), got {}", go_type(v))),
        Type::Boolean => (!v.is_boolean()).then(|| format!("expected boolean, got {}", go_value(v))),
    }
}

/// Roughly Go's `%#v` of a structured-merge-diff value.
fn go_value_sharp(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Object(_) => go_value(v),
        other => other.to_string(),
    }
}

/// What a change did, as field sets (structured-merge-diff's
/// `Comparison`).
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

/// One path element as structured-merge-diff prints it: `.name`,
/// `[name="c"]`, `[containerPort=80,protocol="TCP"]`, `[="a"]`, `[3]`.
pub(crate) fn print_element(pe: &str) -> String {
    if let Some(f) = pe.strip_prefix("f:") {
        return format!(".{f}");
    }
    if let Some(k) = pe.strip_prefix("k:") {
        if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(k) {
            let parts: Vec<String> = m.iter().map(|(n, v)| format!("{n}={}", print_value(v))).collect();
            return format!("[{}]", parts.join(","));
        }
    }
    if let Some(v) = pe.strip_prefix("v:") {
        if let Ok(v) = serde_json::from_str::<Value>(v) {
            return format!("[={}]", print_value(&v));
        }
    }
    if let Some(i) = pe.strip_prefix("i:") {
        return format!("[{i}]");
    }
    pe.to_string()
}

/// A path as structured-merge-diff prints it:
/// `.spec.template.spec.containers[name="nginx"].image`.
pub(crate) fn print_path(path: &[String]) -> String {
    path.iter().map(|p| print_element(p)).collect()
}

/// A value in a path: strings quoted as Go's `%q`, the rest as JSON.
fn print_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
