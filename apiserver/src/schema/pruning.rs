//! Structural pruning of custom resources (apiextensions-apiserver
//! `schema/pruning`): fields the schema does not specify are dropped, and
//! their paths returned for `fieldValidation` warnings and Strict errors.
//!
//! - The root and every `x-kubernetes-embedded-resource` keep `apiVersion`,
//!   `kind` and `metadata` whatever the schema says; their `metadata` is
//!   cut to ObjectMeta's fields, as kube decodes it into ObjectMeta.
//! - `x-kubernetes-preserve-unknown-fields: true` keeps unknown fields, but
//!   fields and items it does specify are pruned by their own schemas.
//! - A map value with no schema (`additionalProperties: true`, or an object
//!   below a field with no schema) loses every field.
//!
//! Example: schema `spec: {type: object, properties: {replicas: {type:
//! integer}}}` and object `{"spec": {"replicas": 1, "extra": {"a": 1}}}`
//! leave `{"spec": {"replicas": 1}}` and report `spec.extra`.

use serde_json::Value;

use super::compiled::{Additional, SchemaRef};
use super::field::{child, index};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prunes `obj`, a whole object whose schema is `schema`; `object_meta`
/// is ObjectMeta's schema (for `metadata`), if known. Returns the paths of
/// what was dropped, sorted.
pub fn prune(schema: SchemaRef<'_>, obj: &mut Value, object_meta: Option<SchemaRef<'_>>) -> Vec<String> {
    prune_with(schema, obj, true, object_meta)
}

/// [`prune`] of any value: `embedded` when it is a resource (keeps
/// apiVersion, kind and metadata).
pub(crate) fn prune_with(schema: SchemaRef<'_>, obj: &mut Value, embedded: bool, object_meta: Option<SchemaRef<'_>>) -> Vec<String> {
    let mut p = Pruner { meta: object_meta, out: Vec::new() };
    p.value(Some(schema), obj, "", embedded);
    p.out.sort();
    p.out
}

struct Pruner<'a> {
    meta: Option<SchemaRef<'a>>,
    out: Vec<String>,
}

impl<'a> Pruner<'a> {
    /// `embedded`: this value is a resource (the root, or an embedded one).
    fn value(&mut self, s: Option<SchemaRef<'a>>, x: &mut Value, path: &str, embedded: bool) {
        let embedded = embedded || s.is_some_and(|s| s.embedded_resource());
        if let Some(s) = s.filter(|s| s.preserve_unknown_fields()) {
            self.keep_unknown(s, x, path, embedded);
            return;
        }
        match x {
            Value::Object(m) => {
                let Some(s) = s else {
                    let keys: Vec<String> = m.keys().cloned().collect();
                    for k in keys {
                        self.out.push(child(path, &k));
                    }
                    m.clear();
                    return;
                };
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    let Some(v) = m.get_mut(&k) else { continue };
                    if let Some(ps) = s.property(&k) {
                        self.value(Some(ps), v, &child(path, &k), false);
                    } else if s.additional() != Additional::Unset {
                        self.value(s.additional_properties(), v, &child(path, &k), false);
                    } else {
                        m.remove(&k);
                        self.out.push(child(path, &k));
                    }
                }
                if embedded {
                    self.object_meta(m, path);
                }
            }
            Value::Array(items) => {
                let is = s.and_then(|s| s.items());
                for (i, v) in items.iter_mut().enumerate() {
                    self.value(is, v, &index(path, i), false);
                }
            }
            _ => {}
        }
    }

    /// Below `x-kubernetes-preserve-unknown-fields`: unknown keys stay,
    /// specified ones are pruned by their schemas.
    fn keep_unknown(&mut self, s: SchemaRef<'a>, x: &mut Value, path: &str, embedded: bool) {
        match x {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    if let Some(ps) = s.property(k) {
                        self.value(Some(ps), v, &child(path, k), false);
                    } else if s.additional() != Additional::Unset {
                        self.value(s.additional_properties(), v, &child(path, k), false);
                    }
                }
                if embedded {
                    self.object_meta(m, path);
                }
            }
            Value::Array(items) => {
                // Items of a preserved array keep their unknown fields too.
                if let Some(is) = s.items() {
                    for (i, v) in items.iter_mut().enumerate() {
                        self.keep_unknown(is, v, &index(path, i), is.embedded_resource());
                    }
                }
            }
            _ => {}
        }
    }

    /// Cuts a resource's `metadata` to ObjectMeta's fields.
    fn object_meta(&mut self, m: &mut serde_json::Map<String, Value>, path: &str) {
        let (Some(meta), Some(v)) = (self.meta, m.get_mut("metadata")) else { return };
        if v.is_object() {
            super::decode::prune_unknown_at(meta, v, &child(path, "metadata"), &mut self.out);
        }
    }
}

/// Drops `null`s that their schema neither allows (`nullable`) nor
/// defaults (apiextensions `PruneNonNullableNullsWithoutDefaults`); kube
/// does this right after pruning. Nulls in arrays stay (validation
/// reports them).
pub fn prune_nulls(s: Option<SchemaRef<'_>>, x: &mut Value) {
    match x {
        Value::Object(m) => {
            m.retain(|k, v| {
                let fs = s.and_then(|s| s.property(k).or_else(|| s.additional_properties()));
                !(v.is_null() && fs.is_some_and(|fs| !fs.nullable() && fs.default_value().is_none()))
            });
            for (k, v) in m.iter_mut() {
                prune_nulls(s.and_then(|s| s.property(k).or_else(|| s.additional_properties())), v);
            }
        }
        Value::Array(items) => {
            let is = s.and_then(|s| s.items());
            for v in items {
                prune_nulls(is, v);
            }
        }
        _ => {}
    }
}
