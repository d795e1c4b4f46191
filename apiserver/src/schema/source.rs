//! What schemas are compiled from: named OpenAPI v3 definitions and the
//! kinds that name them. The built-ins fill it from
//! `apiserver/openapi/k8s-v1.33.0-definitions.json` (see the README there
//! for its source); a CRD version fills it with its `openAPIV3Schema`
//! ([`SchemaSource::crd`]). The OpenAPI documents are served from it.
//!
//! The built-in file is normalised into the OpenAPI v3 form kube-apiserver
//! serves:
//!
//! - `type: ["integer", "null"]` becomes `type: integer`;
//! - `$ref: "#/$defs/X"` becomes `$ref: "#/components/schemas/X"`, and a
//!   `$ref` with sibling keys (a field's description, patch markers) is
//!   wrapped as `allOf: [{$ref}]` beside them, as kube's v3 spec does;
//! - IntOrString and Quantity stay `oneOf` two scalar types with no `type`
//!   of their own, so `kubectl explain` names them (`<IntOrString>`) as it
//!   does against kube; IntOrString also gets `x-kubernetes-int-or-string`.
//!   The v2 document turns them into `type: string` (`format:
//!   int-or-string`), kube's v2 form;
//! - the `enum` that the JSON Schema conversion put on `apiVersion` and
//!   `kind` is dropped.
//!
//! Definition names are kube's (`io.k8s.api.apps.v1.Deployment`); a CRD's
//! is its group reversed, then version and kind
//! (`com.example.stable.v1.CronTab`), as kube's CRD OpenAPI builder names
//! them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{json, Map, Value};

const RAW: &str = include_str!("../../openapi/k8s-v1.33.0-definitions.json");

/// The prefix of a `$ref` in OpenAPI v3 documents.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// Schemas by definition name (OpenAPI v3 form), and the definition each
/// kind (group, version, kind) names.
#[derive(Debug, Default, Clone)]
pub struct SchemaSource {
    defs: BTreeMap<String, Value>,
    by_gvk: HashMap<(String, String, String), String>,
}

impl SchemaSource {
    /// The built-in definitions, parsed from the file compiled into the
    /// binary (about 1 MiB of JSON: parse it once, see
    /// [`crate::schema::SchemaStore`]). A file that fails to parse (only a
    /// bad edit can cause that) gives empty definitions and a logged
    /// error, never a panic.
    pub fn builtin() -> Self {
        match serde_json::from_str::<Value>(RAW) {
            Ok(v) => SchemaSource::from_json_schema(&v),
            Err(e) => {
                tracing::error!("built-in OpenAPI definitions do not parse: {e}");
                SchemaSource::default()
            }
        }
    }

    /// One CRD version's schema: `open_api_v3_schema` is
    /// `spec.versions[].schema.openAPIV3Schema` as the client sent it (no
    /// `$ref`s: the structural-schema rules forbid them), named
    /// [`crd_definition_name`]. Check it with
    /// [`crate::schema::validate_crd_schema`] first.
    pub fn crd(group: &str, version: &str, kind: &str, open_api_v3_schema: &Value) -> Self {
        let name = crd_definition_name(group, version, kind);
        let mut src = SchemaSource::default();
        src.by_gvk.insert((group.to_string(), version.to_string(), kind.to_string()), name.clone());
        src.defs.insert(name, open_api_v3_schema.clone());
        src
    }

    /// Adds `other`'s definitions and kinds (a CRD's beside the built-ins);
    /// a name already here is replaced.
    pub fn merge(&mut self, other: &SchemaSource) {
        self.defs.extend(other.defs.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.by_gvk.extend(other.by_gvk.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// Every definition, by name.
    pub fn definitions(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.defs.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Every kind, as (group, version, kind) and the name of its definition.
    pub fn kinds(&self) -> impl Iterator<Item = (&(String, String, String), &str)> {
        self.by_gvk.iter().map(|(k, v)| (k, v.as_str()))
    }

    /// Builds definitions from a JSON Schema document with `$defs`.
    pub fn from_json_schema(doc: &Value) -> Self {
        let mut defs = BTreeMap::new();
        let mut by_gvk = HashMap::new();
        if let Some(m) = doc.get("$defs").and_then(Value::as_object) {
            for (name, schema) in m {
                let mut s = normalize(schema);
                if let Some(gvks) = s.get("x-kubernetes-group-version-kind").and_then(Value::as_array) {
                    for g in gvks {
                        let key = (str_of(&g["group"]), str_of(&g["version"]), str_of(&g["kind"]));
                        by_gvk.insert(key, name.clone());
                    }
                    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
                        for f in ["apiVersion", "kind"] {
                            if let Some(p) = props.get_mut(f).and_then(Value::as_object_mut) {
                                p.remove("enum");
                            }
                        }
                    }
                }
                defs.insert(name.clone(), s);
            }
        }
        SchemaSource { defs, by_gvk }
    }

    /// A definition by name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.defs.get(name)
    }

    /// The definition name of a kind (`apps`, `v1`, `Deployment` →
    /// `io.k8s.api.apps.v1.Deployment`).
    pub fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_gvk.get(&(group.to_string(), version.to_string(), kind.to_string())).map(String::as_str)
    }

    /// The schema of a kind.
    pub fn of_kind(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.name_of(group, version, kind).and_then(|n| self.get(n))
    }

    /// Follows `$ref` and a one-element `allOf` to the schema they name.
    /// Unknown names resolve to the schema itself.
    pub fn resolve<'a>(&'a self, s: &'a Value) -> &'a Value {
        self.resolve_named(s).1
    }

    /// [`SchemaSource::resolve`], also giving the name of the last definition
    /// followed (`io.k8s.api.apps.v1.DeploymentSpec`), if any.
    pub fn resolve_named<'a>(&'a self, mut s: &'a Value) -> (Option<&'a str>, &'a Value) {
        let mut name = None;
        for _ in 0..8 {
            if let Some(n) = s.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX)) {
                match self.defs.get_key_value(n) {
                    Some((k, t)) => {
                        name = Some(k.as_str());
                        s = t;
                    }
                    None => return (name, s),
                }
            } else if let Some([only]) = s.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                s = only;
            } else {
                return (name, s);
            }
        }
        (name, s)
    }

    /// The names of `roots` and of every definition they reach through
    /// `$ref`, sorted.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<String> = roots.into_iter().map(str::to_string).collect();
        while let Some(n) = stack.pop() {
            if !self.defs.contains_key(&n) || !seen.insert(n.clone()) {
                continue;
            }
            if let Some(s) = self.defs.get(&n) {
                collect_refs(s, &mut stack);
            }
        }
        seen
    }
}

/// The OpenAPI definition name of a CRD's kind: the group's labels
/// reversed, then version and kind (`stable.example.com`, `v1`, `CronTab` →
/// `com.example.stable.v1.CronTab`).
pub fn crd_definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').filter(|p| !p.is_empty()).collect();
    parts.reverse();
    parts.push(version);
    parts.push(kind);
    parts.join(".")
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(n) = m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX)) {
                out.push(n.to_string());
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// The one non-null type of a `type` array, or the type itself.
fn single_type(t: &Value) -> Option<Value> {
    match t {
        Value::Array(ts) => ts.iter().find(|x| x.as_str() != Some("null")).cloned(),
        other => Some(other.clone()),
    }
}

fn normalize(v: &Value) -> Value {
    let Value::Object(m) = v else {
        return match v {
            Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
            other => other.clone(),
        };
    };
    let mut out = Map::new();
    for (k, x) in m {
        match k.as_str() {
            "type" => {
                if let Some(t) = single_type(x) {
                    out.insert(k.clone(), t);
                }
            }
            "$ref" => {
                let name = x.as_str().unwrap_or("").rsplit('/').next().unwrap_or("");
                out.insert(k.clone(), Value::String(format!("{REF_PREFIX}{name}")));
            }
            // Map keys, not schemas: never rewrite them as schemas.
            "properties" => {
                let props = x.as_object().map(|p| p.iter().map(|(n, s)| (n.clone(), normalize(s))).collect()).unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            _ => {
                out.insert(k.clone(), normalize(x));
            }
        }
    }
    if let Some(alts) = out.get("oneOf").and_then(Value::as_array) {
        let int_or_string = alts.iter().any(|a| a["type"] == "integer") && alts.iter().any(|a| a["type"] == "string");
        if int_or_string {
            out.insert("x-kubernetes-int-or-string".into(), json!(true));
        }
    }
    if out.contains_key("$ref") && out.len() > 1 {
        if let Some(r) = out.remove("$ref") {
            out.insert("allOf".into(), json!([{ "$ref": r }]));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_definitions_normalised() {
        let d = &SchemaSource::builtin();
        let name = d.name_of("apps", "v1", "Deployment").unwrap_or_default();
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let dep = d.get(name).cloned().unwrap_or_default();
        assert_eq!(dep["type"], "object");
        assert!(dep["properties"]["kind"].get("enum").is_none());
        assert_eq!(dep["properties"]["spec"]["allOf"][0]["$ref"], "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec");
        let spec = d.resolve(&dep["properties"]["spec"]);
        assert_eq!(spec["properties"]["replicas"]["type"], "integer");
        let ios = d.get("io.k8s.apimachinery.pkg.util.intstr.IntOrString").cloned().unwrap_or_default();
        assert_eq!(ios["oneOf"], json!([{"type": "string"}, {"type": "integer"}]));
        assert_eq!(ios["x-kubernetes-int-or-string"], true);
        let pod = d.of_kind("", "v1", "Pod").cloned().unwrap_or_default();
        let ps = d.resolve(&pod["properties"]["spec"]);
        assert_eq!(ps["properties"]["containers"]["x-kubernetes-patch-merge-key"], "name");
        let c = d.closure(["io.k8s.api.core.v1.ConfigMap"]);
        assert!(c.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), "{c:?}");
        assert_eq!(crd_definition_name("stable.example.com", "v1", "CronTab"), "com.example.stable.v1.CronTab");
        let crd = SchemaSource::crd("stable.example.com", "v1", "CronTab", &json!({"type": "object"}));
        assert_eq!(crd.of_kind("stable.example.com", "v1", "CronTab"), Some(&json!({"type": "object"})));
    }
}
