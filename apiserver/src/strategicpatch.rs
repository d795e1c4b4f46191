//! Strategic merge patch for the built-in types
//! (apimachinery `pkg/util/strategicpatch`), on JSON values.
//!
//! Maps merge recursively and `null` deletes a key, as in a JSON merge
//! patch. Lists whose field has a patch merge key (e.g. `containers` by
//! `name`) merge item by item; other lists are replaced. Directives:
//! `$patch: replace|delete` on maps and list items, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` is
//! accepted and ignored (items keep their original order, new ones are
//! appended).
//!
//! Example: original `{"containers":[{"name":"a","image":"x"},{"name":"b"}]}`,
//! patch `{"containers":[{"name":"a","image":"y"}]}` → `a` gets image `y`,
//! `b` stays.

use serde_json::{Map, Value};

/// The merge key of a list field of the built-in types
/// (`x-kubernetes-patch-merge-key`), given the field and its parent field.
fn merge_key(field: &str, parent: &str) -> Option<&'static str> {
    Some(match field {
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "imagePullSecrets" | "env" | "resourceClaims" | "schedulingGates" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "topologySpreadConstraints" => "topologyKey",
        "ports" if matches!(parent, "containers" | "initContainers" | "ephemeralContainers") => "containerPort",
        "ports" => "port",
        _ => return None,
    })
}

/// Primitive lists that merge as sets (`patchStrategy: merge`).
fn is_merge_primitive_list(field: &str) -> bool {
    matches!(field, "finalizers")
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip_directives(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Applies `patch` to `original`.
///
/// # Errors
/// A message for a 422 when the patch is not a JSON object or misuses a
/// directive.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, String> {
    if !patch.is_object() {
        return Err("strategic merge patch must be a JSON object".into());
    }
    let mut out = original.clone();
    merge_map(&mut out, patch, "")?;
    Ok(out)
}

fn merge_map(orig: &mut Value, patch: &Value, field: &str) -> Result<(), String> {
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
        match v {
            Value::Null => {
                om.remove(k);
            }
            Value::Object(_) => {
                let entry = om.entry(k.clone()).or_insert(Value::Null);
                if entry.is_object() {
                    merge_map(entry, v, k)?;
                } else {
                    let mut fresh = Value::Object(Map::new());
                    merge_map(&mut fresh, v, k)?;
                    *entry = fresh;
                }
            }
            Value::Array(items) => {
                let cur = om.get_mut(k);
                match (cur, merge_key(k, field)) {
                    (Some(Value::Array(list)), Some(mk)) => merge_keyed_list(list, items, mk, k)?,
                    (Some(Value::Array(list)), None) if is_merge_primitive_list(k) => {
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
    if let Some(retain) = pm.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        om.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

fn merge_keyed_list(list: &mut Vec<Value>, items: &[Value], mk: &str, field: &str) -> Result<(), String> {
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
            (Some(p), false) => merge_map(&mut list[p], item, field)?,
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
        let cases = [
            (json!({"a": 1, "b": {"c": 1}}), json!({"b": {"d": 2}, "a": null}), json!({"b": {"c": 1, "d": 2}})),
            (
                json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "z"}], "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "z"}, {"name": "b", "image": "y"}]}}),
            ),
            (
                json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}),
                json!({"spec": {"containers": [{"name": "a"}]}}),
            ),
            (json!({"args": ["a", "b"]}), json!({"args": ["c"]}), json!({"args": ["c"]})),
            (json!({"metadata": {"finalizers": ["a"]}}), json!({"metadata": {"finalizers": ["b"]}}), json!({"metadata": {"finalizers": ["a", "b"]}})),
            (json!({"metadata": {"finalizers": ["a", "b"]}}), json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}), json!({"metadata": {"finalizers": ["b"]}})),
            (json!({"x": {"a": 1, "b": 2}}), json!({"x": {"$patch": "replace", "c": 3}}), json!({"x": {"c": 3}})),
            (
                json!({"c": [{"name": "n", "ports": [{"containerPort": 80, "name": "h"}]}]}),
                json!({"containers": [{"name": "n", "ports": [{"containerPort": 81}]}]}),
                json!({"c": [{"name": "n", "ports": [{"containerPort": 80, "name": "h"}]}], "containers": [{"name": "n", "ports": [{"containerPort": 81}]}]}),
            ),
        ];
        for (orig, patch, want) in cases {
            assert_eq!(apply(&orig, &patch).unwrap_or_default(), want, "{patch}");
        }
        assert!(apply(&json!({}), &json!([1])).is_err());
    }
}
