//! Unknown-field detection against a type's schema, for
//! `fieldValidation=Strict|Warn|Ignore` (KEP-2885). kube-apiserver finds
//! them while decoding into Go structs, which drop what they do not know;
//! here the walk reports each one's path and removes it.
//!
//! Paths are written as kube's strict decoder writes them:
//! `spec.template.spec.containers[0].imagePullPolcy`, `metadata.foo`, `bar`.

use serde_json::Value;

use super::definitions::Definitions;

/// What the client asked to happen to unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Reject the request (400).
    Strict,
    /// Drop them and warn (the server default).
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter; unset is `Warn`.
    ///
    /// # Errors
    /// The value, when it is not one of the three.
    pub fn parse(v: Option<&str>) -> Result<Self, String> {
        match v {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(other.to_string()),
        }
    }
}

/// Removes the fields of `obj` that `schema` does not declare, and returns
/// their paths, sorted. Maps (`additionalProperties`) and
/// `x-kubernetes-preserve-unknown-fields` keep any key; object schemas with
/// neither properties nor additionalProperties (RawExtension, FieldsV1)
/// keep anything.
pub fn prune_unknown(defs: &Definitions, schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(defs, schema, obj, "", &mut out);
    out.sort();
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(defs: &Definitions, schema: &Value, obj: &mut Value, path: &str, out: &mut Vec<String>) {
    let s = defs.resolve(schema);
    if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
        return;
    }
    match obj {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                let mut unknown = Vec::new();
                for (k, v) in m.iter_mut() {
                    match props.get(k) {
                        Some(ps) => walk(defs, ps, v, &join(path, k), out),
                        None => unknown.push(k.clone()),
                    }
                }
                for k in unknown {
                    m.remove(&k);
                    out.push(join(path, &k));
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, v) in m.iter_mut() {
                    walk(defs, ap, v, &join(path, k), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    walk(defs, is, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_and_drops_unknown_fields() {
        let d = super::super::definitions::builtin();
        let schema = d.of_kind("apps", "v1", "Deployment").cloned().unwrap_or_default();
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "bogus": 1,
            "metadata": {"name": "x", "labels": {"a": "b"}, "nope": true},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "x", "resources": {"limits": {"cpu": "1"}}}]}},
                     "strategy": {"rollingUpdate": {"maxSurge": "25%"}}},
        });
        let unknown = prune_unknown(d, &schema, &mut obj);
        assert_eq!(unknown, ["bogus", "metadata.nope", "spec.template.spec.containers[0].imagePullPolcy"]);
        assert!(obj.get("bogus").is_none());
        assert_eq!(obj["spec"]["template"]["spec"]["containers"][0], json!({"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}));
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert!(FieldValidation::parse(Some("strict")).is_err());
    }
}
