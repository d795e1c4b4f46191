//! The `ApplyConfiguration` mutation of MutatingAdmissionPolicy: the
//! expression's `Object{…}` is merged into the object as server-side
//! apply merges (kube `policy/mutating/patch/smd.go` over
//! structured-merge-diff), along the kind's schema. Kept simple:
//!
//! - maps and structs merge key by key; a `null` value removes the key;
//! - lists are what the schema says (structured-merge-diff's reading of
//!   OpenAPI): `x-kubernetes-list-type: map` merges items by their
//!   `x-kubernetes-list-map-keys` (an item with new keys is appended),
//!   `set` adds the items not there yet; without a list type, a
//!   `x-kubernetes-patch-strategy: merge` list counts as a map list by its
//!   `x-kubernetes-patch-merge-key` (a set without one);
//! - everything else replaces what was there.
//!
//! As kube does, a configuration that would replace an atomic list, map or
//! struct (list type `atomic` or none, `x-kubernetes-map-type: atomic`) is
//! refused rather than silently wiping the fields it leaves out:
//! `invalid ApplyConfiguration: may not mutate atomic arrays, maps or
//! structs: .spec.template.spec.containers[0].args`. Without a schema (an
//! unknown kind) nothing is atomic and lists are replaced.
//!
//! Example: object `{"spec": {"containers": [{"name": "a", "image": "x"}]}}`
//! and configuration `{"spec": {"containers": [{"name": "a", "image": "y"},
//! {"name": "b"}]}}` with `containers` a map list keyed by `name` give
//! `[{"name": "a", "image": "y"}, {"name": "b"}]`.
//!
//! Unlike server-side apply, nothing is recorded in managedFields (kube's
//! policies do not track ownership either).

use serde_json::{Map, Value};

use crate::schema::{ListType, MapType, SchemaRef};

/// How a list merges.
enum ListKind<'a> {
    Atomic,
    Set,
    Map(Vec<&'a str>),
}

fn list_kind<'a>(s: SchemaRef<'a>) -> ListKind<'a> {
    match s.list_type() {
        Some(ListType::Map) => ListKind::Map(s.list_map_keys().iter().map(String::as_str).collect()),
        Some(ListType::Set) => ListKind::Set,
        Some(ListType::Atomic) => ListKind::Atomic,
        None if s.patch_strategy().is_some_and(|p| p.split(',').any(|x| x.trim() == "merge")) => match s.patch_merge_key() {
            Some(k) => ListKind::Map(vec![k]),
            None => ListKind::Set,
        },
        None => ListKind::Atomic,
    }
}

/// The schema of field or map key `key` of `s`.
fn child<'a>(s: Option<SchemaRef<'a>>, key: &str) -> Option<SchemaRef<'a>> {
    let s = s?;
    s.property(key).or_else(|| s.additional_properties())
}

/// Merges `patch` into `obj`, whose schema is `schema` (`None`: unknown).
///
/// # Errors
/// kube's `invalid ApplyConfiguration: may not mutate atomic arrays, maps
/// or structs: <paths>`; `obj` is then unchanged.
pub fn merge(obj: &mut Value, patch: &Value, schema: Option<SchemaRef<'_>>) -> Result<(), String> {
    if !patch.is_object() {
        return Err(format!("unsupported return type from ApplyConfiguration expression: {}", kind_of(patch)));
    }
    let mut atomics = Vec::new();
    find_atomics(patch, schema, &mut String::new(), &mut atomics, true);
    if !atomics.is_empty() {
        return Err(format!("invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}", atomics.join(", ")));
    }
    merge_value(obj, patch, schema);
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null_type",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// The paths in `v` that are atomic by `schema` (kube's `findAtomics`).
fn find_atomics(v: &Value, schema: Option<SchemaRef<'_>>, path: &mut String, out: &mut Vec<String>, root: bool) {
    let Some(s) = schema else { return };
    match v {
        Value::Object(m) => {
            if !root && s.map_type() == Some(MapType::Atomic) {
                out.push(path.clone());
            }
            for (k, val) in m {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                find_atomics(val, child(Some(s), k), path, out, false);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if matches!(list_kind(s), ListKind::Atomic) {
                out.push(path.clone());
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                find_atomics(item, s.items(), path, out, false);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn merge_value(obj: &mut Value, patch: &Value, schema: Option<SchemaRef<'_>>) {
    match patch {
        Value::Object(pm) => {
            if !obj.is_object() {
                *obj = Value::Object(Map::new());
            }
            let Some(om) = obj.as_object_mut() else { return };
            for (k, v) in pm {
                if v.is_null() {
                    om.remove(k);
                    continue;
                }
                let slot = om.entry(k.clone()).or_insert(Value::Null);
                merge_value(slot, v, child(schema, k));
            }
        }
        Value::Array(items) => {
            let kind = schema.map_or(ListKind::Atomic, list_kind);
            let Some(list) = obj.as_array_mut().filter(|_| !matches!(kind, ListKind::Atomic)) else {
                *obj = patch.clone();
                return;
            };
            let item_schema = schema.and_then(|s| s.items());
            for item in items {
                match &kind {
                    ListKind::Map(keys) => {
                        let same = |x: &Value| keys.iter().all(|k| x.get(*k).unwrap_or(&Value::Null) == item.get(*k).unwrap_or(&Value::Null));
                        match list.iter_mut().find(|x| same(x)) {
                            Some(existing) => merge_value(existing, item, item_schema),
                            None => list.push(item.clone()),
                        }
                    }
                    _ => {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                }
            }
        }
        other => *obj = other.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Option<crate::schema::Schema> {
        crate::schema::SchemaStore::builtin().of_kind("apps", "v1", "Deployment")
    }

    #[test]
    fn maps_merge_and_map_lists_merge_by_key() {
        let schema = deployment();
        let mut obj = json!({
            "metadata": {"name": "web", "annotations": {"a": "1"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}
        });
        let patch = json!({
            "metadata": {"annotations": {"b": "2"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "y"}, {"name": "b", "image": "z"}]}}}
        });
        assert_eq!(merge(&mut obj, &patch, schema.as_ref().map(|s| s.root())), Ok(()));
        assert_eq!(obj["metadata"]["annotations"], json!({"a": "1", "b": "2"}));
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(obj["spec"]["template"]["spec"]["containers"], json!([{"name": "a", "image": "y"}, {"name": "b", "image": "z"}]));
    }

    #[test]
    fn atomic_lists_are_refused_and_unknown_kinds_replace() {
        let schema = deployment();
        let mut obj = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["x"]}]}}}});
        let before = obj.clone();
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["y"]}]}}}});
        let err = merge(&mut obj, &patch, schema.as_ref().map(|s| s.root())).unwrap_err();
        assert_eq!(err, "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.template.spec.containers[0].args");
        assert_eq!(obj, before);
        assert_eq!(merge(&mut obj, &patch, None), Ok(()));
        assert_eq!(obj["spec"]["template"]["spec"]["containers"], json!([{"name": "a", "args": ["y"]}]));
        assert!(merge(&mut obj, &json!([1]), None).is_err());
    }

    #[test]
    fn null_removes_and_sets_add_once() {
        let schema = deployment();
        let mut obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]}});
        let patch = json!({"metadata": {"labels": {"a": null}, "finalizers": ["x", "y"]}});
        assert_eq!(merge(&mut obj, &patch, schema.as_ref().map(|s| s.root())), Ok(()));
        assert_eq!(obj["metadata"], json!({"labels": {"b": "2"}, "finalizers": ["x", "y"]}));
    }
}
