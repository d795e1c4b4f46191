//! OpenAPI v3 documents (kube-openapi `handler3`): the root discovery
//! document listing each group-version, and one document per group-version
//! with its paths and the schemas they reach.
//!
//! kubectl reads, from the group-version document (client-go
//! `openapi3`, cli-runtime `query_param_verifier_v3.go`, kubectl
//! `apply/patcher.go`):
//! - the PATCH operation tagged `x-kubernetes-group-version-kind`, for its
//!   `fieldValidation` query parameter (server-side field validation) and
//!   its `application/strategic-merge-patch+json` request body (listed for
//!   built-in kinds only: without it, client-side apply of a custom
//!   resource sends a JSON merge patch);
//! - `components.schemas` carrying `x-kubernetes-group-version-kind`, for
//!   `explain` and the patch markers of client-side apply.

use serde_json::{json, Map, Value};

use crate::registry::Resource;
use crate::schema::{SchemaSource, REF_PREFIX};

/// Meta types every group-version document carries.
pub const META_TYPES: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
];

/// `Scale` of the scale subresource.
const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("{REF_PREFIX}{name}") })
}

fn query_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": schema})
}

fn s_string() -> Value {
    json!({"type": "string", "uniqueItems": true})
}

fn s_bool() -> Value {
    json!({"type": "boolean", "uniqueItems": true})
}

fn s_int() -> Value {
    json!({"type": "integer", "uniqueItems": true})
}

const DRY_RUN: &str = "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed";
const FIELD_MANAGER: &str = "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.";
const FIELD_VALIDATION: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";

/// The query parameters of a write (dryRun, fieldManager, fieldValidation).
pub fn write_params() -> Vec<Value> {
    vec![query_param("dryRun", DRY_RUN, s_string()), query_param("fieldManager", FIELD_MANAGER, s_string()), query_param("fieldValidation", FIELD_VALIDATION, s_string())]
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type \"BOOKMARK\".", s_bool()),
        ("continue", "The continue option should be set when retrieving more results from the server.", s_string()),
        ("fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything.", s_string()),
        ("labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything.", s_string()),
        ("limit", "limit is a maximum number of responses to return for a list call.", s_int()),
        ("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from.", s_string()),
        ("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls.", s_string()),
        ("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`.", s_bool()),
        ("timeoutSeconds", "Timeout for the list/watch call.", s_int()),
        ("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.", s_bool()),
    ]
    .into_iter()
    .map(|(n, d, s)| query_param(n, d, s))
    .collect()
}

fn content(schema: &Value, yaml: bool) -> Value {
    let mut m = Map::new();
    m.insert("application/json".into(), json!({ "schema": schema }));
    if yaml {
        m.insert("application/yaml".into(), json!({ "schema": schema }));
    }
    Value::Object(m)
}

fn responses(codes: &[(&str, &str)], schema: &Value) -> Value {
    let mut m = Map::new();
    for (code, desc) in codes {
        m.insert((*code).into(), json!({"description": desc, "content": content(schema, true)}));
    }
    m.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(m)
}

/// The group-version-kind extension of an operation.
fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// Builds operations; `op_id` is kube's operationId stem
/// (`AppsV1NamespacedDeployment`).
struct Ops<'a> {
    tag: String,
    op_id: String,
    kind: &'a str,
    gvk: Value,
    /// Whether PATCH takes strategic merge patches: built-in kinds only;
    /// kube refuses them for custom resources (415), and kubectl's
    /// client-side apply sends a JSON merge patch when this body is not
    /// listed.
    strategic: bool,
}

impl Ops<'_> {
    fn op(&self, verb: &str, action: &str, description: String, params: Vec<Value>, body: Option<Value>, resp: Value) -> Value {
        let mut o = json!({
            "tags": [self.tag],
            "description": description,
            "operationId": format!("{verb}{}", self.op_id),
            "responses": resp,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": self.gvk,
        });
        if !params.is_empty() {
            o["parameters"] = Value::Array(params);
        }
        if let Some(b) = body {
            o["requestBody"] = b;
        }
        o
    }

    fn patch(&self, obj: &Value, what: &str) -> Value {
        let patch = schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
        let mut content = json!({
            "application/json-patch+json": {"schema": patch},
            "application/merge-patch+json": {"schema": patch},
        });
        if self.strategic {
            content["application/strategic-merge-patch+json"] = json!({"schema": patch});
        }
        content["application/apply-patch+yaml"] = json!({"schema": patch});
        let body = json!({"content": content, "required": true});
        let mut params = write_params();
        params.push(query_param("force", "Force is going to \"force\" Apply requests.", s_bool()));
        self.op("patch", "patch", format!("partially update {what} of the specified {}", self.kind), params, Some(body), responses(&[("200", "OK"), ("201", "Created")], obj))
    }

    fn put(&self, obj: &Value, what: &str) -> Value {
        let body = json!({"content": content(obj, true), "required": true});
        self.op("replace", "put", format!("replace {what} of the specified {}", self.kind), write_params(), Some(body), responses(&[("200", "OK"), ("201", "Created")], obj))
    }

    fn get(&self, obj: &Value, what: &str) -> Value {
        self.op("read", "get", format!("read {what} of the specified {}", self.kind), Vec::new(), None, responses(&[("200", "OK")], obj))
    }
}

fn path_params(namespaced: bool, named: bool) -> Vec<Value> {
    let mut p = Vec::new();
    if named {
        p.push(json!({"name": "name", "in": "path", "description": "name of the resource", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
    }
    if namespaced {
        p.push(json!({"name": "namespace", "in": "path", "description": "object name and auth scope, such as for teams and projects", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
    }
    p.push(query_param("pretty", "If 'true', then the output is pretty printed.", s_string()));
    p
}

fn camel(s: &str) -> String {
    // `coordination.k8s.io` → `Coordination`, `apps` → `Apps`, `v1` → `V1`.
    let first = s.split('.').next().unwrap_or("");
    let mut c = first.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The paths of one resource, added to `paths`, and the definitions they
/// name, added to `roots`.
fn resource_paths(defs: &SchemaSource, r: &Resource, paths: &mut Map<String, Value>, roots: &mut Vec<String>) {
    let Some(obj_name) = defs.name_of(&r.group, &r.version, &r.kind) else { return };
    roots.push(obj_name.to_string());
    let obj = schema_ref(obj_name);
    let list_name = defs.name_of(&r.group, &r.version, &format!("{}List", r.kind)).map(str::to_string);
    if let Some(l) = &list_name {
        roots.push(l.clone());
    }
    let base = if r.group.is_empty() { format!("/api/{}", r.version) } else { format!("/apis/{}/{}", r.group, r.version) };
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let gv_id = format!("{}{}", camel(if r.group.is_empty() { "core" } else { &r.group }), camel(&r.version));
    let tag = format!("{}_{}", if r.group.is_empty() { "core" } else { r.group.split('.').next().unwrap_or(&r.group) }, r.version);
    // A custom kind's definition carries the CRD name, a built-in's its Go
    // package path.
    let strategic = obj_name != crate::schema::source::crd_definition_name(&r.group, &r.version, &r.kind);
    let ops = Ops { tag, op_id: format!("{gv_id}{scope}{}", r.kind), kind: &r.kind, gvk: gvk(&r.group, &r.version, &r.kind), strategic };
    let collection = if r.namespaced { format!("{base}/namespaces/{{namespace}}/{}", r.resource) } else { format!("{base}/{}", r.resource) };
    let item = format!("{collection}/{{name}}");
    let has = |v: &str| r.verbs.iter().any(|x| x == v);

    let mut coll = Map::new();
    if has("list") {
        let list = list_name.as_deref().map(schema_ref).unwrap_or_else(|| json!({"type": "object"}));
        let mut o = ops.op("list", "list", format!("list or watch objects of kind {}", r.kind), list_params(), None, responses(&[("200", "OK")], &list));
        o["operationId"] = json!(format!("list{}", ops.op_id));
        coll.insert("get".into(), o);
    }
    if has("create") {
        let body = json!({"content": content(&obj, true), "required": true});
        coll.insert("post".into(), ops.op("create", "post", format!("create a {}", r.kind), write_params(), Some(body), responses(&[("200", "OK"), ("201", "Created"), ("202", "Accepted")], &obj)));
    }
    if has("deletecollection") {
        let status = schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.Status");
        let mut o = ops.op("deletecollection", "deletecollection", format!("delete collection of {}", r.kind), list_params(), None, responses(&[("200", "OK")], &status));
        o["operationId"] = json!(format!("deleteCollection{}", ops.op_id));
        coll.insert("delete".into(), o);
    }
    if !coll.is_empty() {
        coll.insert("parameters".into(), Value::Array(path_params(r.namespaced, false)));
        paths.insert(collection.clone(), Value::Object(coll));
    }

    let mut one = Map::new();
    if has("get") {
        one.insert("get".into(), ops.get(&obj, ""));
    }
    if has("update") {
        one.insert("put".into(), ops.put(&obj, ""));
    }
    if has("patch") {
        one.insert("patch".into(), ops.patch(&obj, ""));
    }
    if has("delete") {
        let status = schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.Status");
        let body = json!({"content": content(&schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"), true)});
        let params = vec![query_param("dryRun", DRY_RUN, s_string()), query_param("propagationPolicy", "Whether and how garbage collection will be performed.", s_string())];
        one.insert("delete".into(), ops.op("delete", "delete", format!("delete a {}", r.kind), params, Some(body), responses(&[("200", "OK"), ("202", "Accepted")], &status)));
    }
    if !one.is_empty() {
        one.insert("parameters".into(), Value::Array(path_params(r.namespaced, true)));
        paths.insert(item.clone(), Value::Object(one));
    }

    for sub in &r.subresources {
        let (schema, sub_ops) = match sub.as_str() {
            "scale" => {
                roots.push(SCALE.to_string());
                let o = Ops { tag: ops.tag.clone(), op_id: format!("{}Scale", ops.op_id), kind: &r.kind, gvk: gvk("autoscaling", "v1", "Scale"), strategic: ops.strategic };
                (schema_ref(SCALE), o)
            }
            "status" => (obj.clone(), Ops { tag: ops.tag.clone(), op_id: format!("{}Status", ops.op_id), kind: &r.kind, gvk: ops.gvk.clone(), strategic: ops.strategic }),
            _ => continue,
        };
        let what = sub.to_string();
        let mut m = Map::new();
        m.insert("get".into(), sub_ops.get(&schema, &what));
        m.insert("put".into(), sub_ops.put(&schema, &what));
        m.insert("patch".into(), sub_ops.patch(&schema, &what));
        m.insert("parameters".into(), Value::Array(path_params(r.namespaced, true)));
        paths.insert(format!("{item}/{sub}"), Value::Object(m));
    }
}

/// The OpenAPI v3 document of one group-version (`""` is core).
pub fn group_version_document(defs: &SchemaSource, resources: &[std::sync::Arc<Resource>]) -> Value {
    let mut paths = Map::new();
    let mut roots: Vec<String> = META_TYPES.iter().map(|s| s.to_string()).collect();
    for r in resources {
        resource_paths(defs, r, &mut paths, &mut roots);
    }
    let mut schemas = Map::new();
    for name in defs.closure(roots.iter().map(String::as_str)) {
        if let Some(s) = defs.get(&name) {
            schemas.insert(name, s.clone());
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The root document: each group-version's URL with its document's hash.
pub fn root_document(entries: &[(String, String)]) -> Value {
    let mut paths = Map::new();
    for (path, hash) in entries {
        paths.insert(path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}));
    }
    json!({ "paths": paths })
}
