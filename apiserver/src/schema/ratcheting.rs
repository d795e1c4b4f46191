//! Validation ratcheting of custom resources (kube's
//! `CRDValidationRatcheting`, on by default since Kubernetes 1.30): an
//! update may keep a part of the object that fails the schema as long as
//! that part did not change, so a CRD author can tighten a schema without
//! breaking updates of objects stored before.
//!
//! An error is dropped when the value at its field path is the same in the
//! old and the new object. Kube correlates old and new values node by node
//! and correlates list items only inside `x-kubernetes-list-type: map`
//! lists; here a path that crosses a list compares the whole list, which
//! ratchets the same errors for atomic and set lists and fewer (never
//! more) inside map lists. As in kube, `required` errors and duplicate
//! items of set and map lists are never ratcheted.

use serde_json::Value;

use super::field::{ErrorType, FieldError};

/// One step of a field path: `.name` or `[key]` (a map key or a list
/// index).
#[derive(Debug, PartialEq)]
enum Step<'a> {
    Field(&'a str),
    Key(&'a str),
}

/// Splits `spec.items[0].name` or `metadata.labels[a.b/c]` into steps.
/// `None` for what is not a path (`<nil>`, an unclosed bracket).
fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    if path.is_empty() || path == "<nil>" {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            out.push(Step::Key(&r[..end]));
            rest = &r[end + 1..];
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            out.push(Step::Field(&r[..end]));
            rest = &r[end..];
        }
    }
    Some(out)
}

/// Whether the part of the object an error at `path` is about is the same
/// in `new` and `old`: the values at the path, or the whole list where the
/// path enters one. A path that is absent from both is unchanged.
fn unchanged(path: &str, new: &Value, old: &Value) -> bool {
    let Some(steps) = steps(path) else { return false };
    let (mut n, mut o) = (Some(new), Some(old));
    for step in steps {
        if n.is_some_and(Value::is_array) || o.is_some_and(Value::is_array) {
            break;
        }
        let name = match step {
            Step::Field(s) | Step::Key(s) => s,
        };
        n = n.and_then(|v| v.get(name));
        o = o.and_then(|v| v.get(name));
        if n.is_none() && o.is_none() {
            return true;
        }
    }
    n == o
}

/// Drops the errors of an update from `old` to `new` that are about parts
/// the update did not change (see the module's description).
pub fn ratchet(errors: Vec<FieldError>, new: &Value, old: &Value) -> Vec<FieldError> {
    errors.into_iter().filter(|e| matches!(e.kind, ErrorType::Required | ErrorType::Duplicate) || !unchanged(&e.field, new, old)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_split_into_steps() {
        assert_eq!(steps("spec.items[0].name"), Some(vec![Step::Field("spec"), Step::Field("items"), Step::Key("0"), Step::Field("name")]));
        assert_eq!(steps("metadata.labels[a.b/c]"), Some(vec![Step::Field("metadata"), Step::Field("labels"), Step::Key("a.b/c")]));
        assert_eq!(steps("<nil>"), None);
        assert_eq!(steps("spec.x[0"), None);
        assert_eq!(steps("spec..x"), None);
    }

    fn err(kind: ErrorType, field: &str) -> FieldError {
        FieldError { kind, field: field.into(), value: super::super::field::BadValue::Omit, detail: String::new() }
    }

    #[test]
    fn unchanged_invalid_values_are_ratcheted() {
        let old = json!({"spec": {"replicas": -1, "name": "x", "items": [{"n": -1}], "m": {"k": -1}}});
        let mut new = old.clone();
        new["spec"]["name"] = json!("y");
        let errs = vec![err(ErrorType::Invalid, "spec.replicas"), err(ErrorType::Invalid, "spec.items[0].n"), err(ErrorType::Invalid, "spec.m[k]")];
        assert!(ratchet(errs, &new, &old).is_empty());
    }

    #[test]
    fn changed_values_and_lists_are_checked() {
        let old = json!({"spec": {"replicas": -1, "items": [{"n": -1}, {"n": 1}]}});
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(-2);
        // Another item of the list changed: the list is compared whole.
        new["spec"]["items"][1]["n"] = json!(2);
        let errs = vec![err(ErrorType::Invalid, "spec.replicas"), err(ErrorType::Invalid, "spec.items[0].n")];
        let kept: Vec<String> = ratchet(errs, &new, &old).into_iter().map(|e| e.field).collect();
        assert_eq!(kept, ["spec.replicas", "spec.items[0].n"]);
    }

    #[test]
    fn new_fields_required_and_duplicates_are_never_ratcheted() {
        let old = json!({"spec": {"tags": ["a", "a"]}});
        let new = json!({"spec": {"tags": ["a", "a"], "size": -1}});
        let errs = vec![err(ErrorType::Invalid, "spec.size"), err(ErrorType::Required, "spec.name"), err(ErrorType::Duplicate, "spec.tags[1]"), err(ErrorType::Invalid, "<nil>")];
        let kept: Vec<String> = ratchet(errs, &new, &old).into_iter().map(|e| e.field).collect();
        assert_eq!(kept, ["spec.size", "spec.name", "spec.tags[1]", "<nil>"]);
    }
}
