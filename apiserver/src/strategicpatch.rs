//! Strategic merge patch for the built-in types
//! (apimachinery `pkg/util/strategicpatch`), on JSON values.
//!
//! Maps merge recursively and `null` deletes a key, as in a JSON merge
//! patch. Lists are driven by the type's schema ([`PatchMeta`]): a field
//! with `x-kubernetes-patch-strategy: merge` and a
//! `x-kubernetes-patch-merge-key` (e.g. `containers` by `name`) merges item
//! by item, a primitive list with `merge` merges as a set (`finalizers`),
//! and every other list is replaced. Directives:
//! `$patch: replace|delete` on maps and list items, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`, and `$setElementOrder/<field>`:
//! the items it names come first, in its order, then the rest in their
//! previous order (kube interleaves server-only items by position; here
//! they follow).
//!
//! Example: original `{"containers":[{"name":"a","image":"x"},{"name":"b"}]}`,
//! patch `{"containers":[{"name":"a","image":"y"}]}` → `a` gets image `y`,
//! `b` stays.

use serde_json::{Map, Value};

use crate::schema::{Schema, SchemaRef};

/// Where in a type's schema a patch is being applied: the source of each
/// field's `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`
/// (kube's `PatchMetaFromOpenAPI`). Without a schema every list is
/// replaced and every map merged, as in a JSON merge patch.
#[derive(Clone, Copy)]
pub struct PatchMeta<'a> {
    schema: Option<SchemaRef<'a>>,
}

/// A field's patch markers.
#[derive(Debug, Clone, Copy, Default)]
struct FieldMeta<'a> {
    /// `x-kubernetes-patch-strategy` contains `merge`.
    merge: bool,
    /// `x-kubernetes-patch-merge-key`.
    merge_key: Option<&'a str>,
}

impl<'a> PatchMeta<'a> {
    /// The schema of a kind (from [`crate::schema::SchemaStore::of_kind`]);
    /// none for kinds without one.
    pub fn of(schema: Option<&'a Schema>) -> PatchMeta<'a> {
        PatchMeta { schema: schema.map(Schema::root) }
    }

    /// No schema: JSON merge patch semantics for lists.
    pub fn none() -> PatchMeta<'static> {
        PatchMeta { schema: None }
    }

    /// The meta of field `key` of this (object or map) schema.
    fn field(&self, key: &str) -> (PatchMeta<'a>, FieldMeta<'a>) {
        let Some(s) = self.schema else { return (*self, FieldMeta::default()) };
        let Some(raw) = s.property(key).or_else(|| s.additional_properties()) else { return (PatchMeta { schema: None }, FieldMeta::default()) };
        let strategy = raw.patch_strategy().unwrap_or("");
        let fm = FieldMeta { merge: strategy.split(',').any(|x| x.trim() == "merge"), merge_key: raw.patch_merge_key() };
        (PatchMeta { schema: Some(raw) }, fm)
    }

    /// The meta of this (array) schema's items.
    fn items(&self) -> PatchMeta<'a> {
        PatchMeta { schema: self.schema.and_then(|s| s.items()) }
    }
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip_directives(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Applies `patch` to `original`, whose schema is `meta`.
///
/// # Errors
/// A message for a 422 when the patch is not a JSON object or misuses a
/// directive.
pub fn apply(original: &Value, patch: &Value, meta: PatchMeta<'_>) -> Result<Value, String> {
    if !patch.is_object() {
        return Err("strategic merge patch must be a JSON object".into());
    }
    let mut out = original.clone();
    merge_map(&mut out, patch, meta)?;
    Ok(out)
}

fn merge_map(orig: &mut Value, patch: &Value, meta: PatchMeta<'_>) -> Result<(), String> {
    let Some(pm) = patch.as_object() else { return Err("expected a map".into()) };
    match pm.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *orig = strip_directives(patch);
            return Ok(());
        }
        Some("delete") => {
            *orig = Value::Object(Map::new());
            return Ok(());
        }
        Some(other) if other != "merge" => return Err(format!("unknown patch type: {other:?}")),
        _ => {}
    }
    if !orig.is_object() {
        *orig = Value::Object(Map::new());
    }
    let Some(om) = orig.as_object_mut() else { return Ok(()) };
    for (k, v) in pm {
        if let Some(f) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(del)) = (om.get_mut(f).and_then(Value::as_array_mut), v.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let (child, fm) = meta.field(k);
        match v {
            Value::Null => {
                om.remove(k);
            }
            Value::Object(_) => {
                let entry = om.entry(k.clone()).or_insert(Value::Null);
                if entry.is_object() {
                    merge_map(entry, v, child)?;
                } else {
                    let mut fresh = Value::Object(Map::new());
                    merge_map(&mut fresh, v, child)?;
                    *entry = fresh;
                }
            }
            Value::Array(items) => {
                let cur = om.get_mut(k);
                match (cur, fm.merge_key.filter(|_| fm.merge)) {
                    (Some(Value::Array(list)), Some(mk)) => merge_keyed_list(list, items, mk, child.items())?,
                    (Some(Value::Array(list)), None) if fm.merge => {
                        for i in items {
                            if !list.contains(i) {
                                list.push(i.clone());
                            }
                        }
                    }
                    _ => {
                        let cleaned: Vec<Value> = items.iter().filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete")).map(strip_directives).collect();
                        om.insert(k.clone(), Value::Array(cleaned));
                    }
                }
            }
            other => {
                om.insert(k.clone(), other.clone());
            }
        }
    }
    for (k, order) in pm {
        let (Some(f), Some(order)) = (k.strip_prefix("$setElementOrder/"), order.as_array()) else { continue };
        let (_, fm) = meta.field(f);
        if let Some(list) = om.get_mut(f).and_then(Value::as_array_mut) {
            set_element_order(list, order, fm.merge_key);
        }
    }
    if let Some(retain) = pm.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        om.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

/// Puts the items named by `order` (by merge key, or by value for
/// primitive lists) first, in that order; the others keep their order after.
fn set_element_order(list: &mut [Value], order: &[Value], mk: Option<&str>) {
    let key_of = |v: &Value| -> Value {
        match mk {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let wanted: Vec<Value> = order.iter().map(key_of).collect();
    let pos = |v: &Value| wanted.iter().position(|w| *w == key_of(v)).unwrap_or(usize::MAX);
    // A stable sort keeps the unnamed items (all usize::MAX) in their order.
    list.sort_by_key(pos);
}

fn merge_keyed_list(list: &mut Vec<Value>, items: &[Value], mk: &str, meta: PatchMeta<'_>) -> Result<(), String> {
    if items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace")) {
        *list = items.iter().filter(|i| i.get("$patch").is_none()).map(strip_directives).collect();
        return Ok(());
    }
    for item in items {
        let key = item.get(mk).cloned();
        let pos = key.as_ref().and_then(|k| list.iter().position(|x| x.get(mk) == Some(k)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                list.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => merge_map(&mut list[p], item, meta)?,
            (None, false) => list.push(strip_directives(item)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_cases() {
        let store = crate::schema::SchemaStore::builtin();
        let pod_schema = store.of_kind("", "v1", "Pod");
        let pod = || PatchMeta::of(pod_schema.as_ref());
        let cases = [
            (json!({"a": 1, "b": {"c": 1}}), json!({"b": {"d": 2}, "a": null}), json!({"b": {"c": 1, "d": 2}}), PatchMeta::none()),
            (
                json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "z"}], "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "z"}, {"name": "b", "image": "y"}]}}),
                pod(),
            ),
            (
                json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}),
                json!({"spec": {"containers": [{"name": "a"}]}}),
                pod(),
            ),
            (
                json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}),
                json!({"spec": {"containers": [{"name": "d"}], "$setElementOrder/containers": [{"name": "d"}, {"name": "b"}, {"name": "a"}]}}),
                json!({"spec": {"containers": [{"name": "d"}, {"name": "b"}, {"name": "a"}, {"name": "c"}]}}),
                pod(),
            ),
            (
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"finalizers": ["c"], "$setElementOrder/finalizers": ["c", "b", "a"]}}),
                json!({"metadata": {"finalizers": ["c", "b", "a"]}}),
                pod(),
            ),
            // Without a schema, lists are replaced.
            (json!({"spec": {"containers": [{"name": "a"}]}}), json!({"spec": {"containers": [{"name": "b"}]}}), json!({"spec": {"containers": [{"name": "b"}]}}), PatchMeta::none()),
            (
                json!({"spec": {"containers": [{"name": "a", "args": ["a", "b"]}]}}),
                json!({"spec": {"containers": [{"name": "a", "args": ["c"]}]}}),
                json!({"spec": {"containers": [{"name": "a", "args": ["c"]}]}}),
                pod(),
            ),
            (json!({"metadata": {"finalizers": ["a"]}}), json!({"metadata": {"finalizers": ["b"]}}), json!({"metadata": {"finalizers": ["a", "b"]}}), pod()),
            (json!({"metadata": {"finalizers": ["a", "b"]}}), json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}), json!({"metadata": {"finalizers": ["b"]}}), pod()),
            (json!({"metadata": {"labels": {"a": "1", "b": "2"}}}), json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}), json!({"metadata": {"labels": {"c": "3"}}}), pod()),
            // Container ports merge by containerPort, env by name.
            (
                json!({"spec": {"containers": [{"name": "n", "ports": [{"containerPort": 80, "name": "h"}], "env": [{"name": "A", "value": "1"}]}]}}),
                json!({"spec": {"containers": [{"name": "n", "ports": [{"containerPort": 81}], "env": [{"name": "B", "value": "2"}]}]}}),
                json!({"spec": {"containers": [{"name": "n", "ports": [{"containerPort": 80, "name": "h"}, {"containerPort": 81}], "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}),
                pod(),
            ),
        ];
        for (orig, patch, want, meta) in cases {
            assert_eq!(apply(&orig, &patch, meta).unwrap_or_default(), want, "{patch}");
        }
        // Deployments reach the pod template through the schema.
        let dep_schema = store.of_kind("apps", "v1", "Deployment");
        let d = PatchMeta::of(dep_schema.as_ref());
        let orig = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "z"}]}}}});
        let want = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "z"}]}}}});
        assert_eq!(apply(&orig, &patch, d).unwrap_or_default(), want);
        assert!(apply(&json!({}), &json!([1]), PatchMeta::none()).is_err());
    }
}
