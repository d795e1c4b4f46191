//! Table-driven tests of server-side apply. Expected objects, field sets
//! and messages are written from Kubernetes' documented behaviour (the
//! server-side apply page: merge strategies, conflicts, field removal,
//! client-side apply upgrade) and structured-merge-diff's semantics
//! (ToFieldSet members, associative-list keys with defaults, item order),
//! never from running this code.

#![allow(clippy::unwrap_used)]

use serde_json::{json, Value};

use super::*;
use crate::schema::{compile_crd, SchemaStore};

const T0: &str = "2025-01-01T00:00:00Z";
const NOW: &str = "2026-01-01T00:00:00Z";

/// A managedFields entry written at T0.
fn e(manager: &str, op: &str, api: &str, fields: Value) -> Value {
    json!({"manager": manager, "operation": op, "apiVersion": api, "time": T0, "fieldsType": "FieldsV1", "fieldsV1": fields})
}

fn with_mf(mut obj: Value, entries: Vec<Value>) -> Value {
    obj["metadata"]["managedFields"] = Value::Array(entries);
    obj
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data})
}

fn dep(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "spec": spec})
}

fn containers(cs: Value) -> Value {
    dep(json!({"template": {"spec": {"containers": cs}}}))
}

fn cfields(items: Value) -> Value {
    json!({"f:spec": {"f:template": {"f:spec": {"f:containers": items}}}})
}

fn cr(spec: Value) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "d"}, "spec": spec})
}

fn crd_schema() -> Schema {
    compile_crd(
        "stable.example.com",
        "v1",
        "Widget",
        &json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer", "default": 80}, "host": {"type": "string"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "sel": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                "nested": {"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}}}}
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }}),
    )
}

#[derive(Clone, Copy)]
enum K {
    ConfigMap,
    Deployment,
    Service,
    Widget,
}

enum Exp {
    /// The object (managedFields left out) and the entries as (manager,
    /// operation, fieldsV1), in order.
    Ok(Value, Vec<(&'static str, &'static str, Value)>),
    /// The live object back, unchanged.
    Noop,
    /// A failure: code and message.
    Err(u16, &'static str),
    /// A failure: code and the start of the message.
    ErrPrefix(u16, &'static str),
}

struct Case {
    name: &'static str,
    kind: K,
    live: Option<Value>,
    config: Value,
    manager: &'static str,
    force: bool,
    status: bool,
    exp: Exp,
}

fn case(name: &'static str, kind: K, live: Option<Value>, config: Value, manager: &'static str, exp: Exp) -> Case {
    Case { name, kind, live, config, manager, force: false, status: false, exp }
}

fn forced(mut c: Case) -> Case {
    c.force = true;
    c
}

fn on_status(mut c: Case) -> Case {
    c.status = true;
    c
}

fn run(c: &Case) {
    let store = SchemaStore::builtin();
    let crd = crd_schema();
    let (schema, api, kind, has_status) = match c.kind {
        K::ConfigMap => (store.of_kind("", "v1", "ConfigMap"), "v1", "ConfigMap", false),
        K::Deployment => (store.of_kind("apps", "v1", "Deployment"), "apps/v1", "Deployment", true),
        K::Service => (store.of_kind("", "v1", "Service"), "v1", "Service", true),
        K::Widget => (Some(crd), "stable.example.com/v1", "Widget", true),
    };
    let scope = match (has_status, c.status) {
        (_, true) => Scope::StatusOnly,
        (true, false) => Scope::NoStatus,
        (false, false) => Scope::All,
    };
    let req = ApplyRequest { manager: c.manager, api_version: api, kind, subresource: if c.status { "status" } else { "" }, scope, force: c.force, now: NOW, versions: None };
    let got = apply(schema.as_ref(), c.live.as_ref(), &c.config, &req);
    match (&c.exp, got) {
        (Exp::Noop, Ok(v)) => assert_eq!(Some(&v), c.live.as_ref(), "{}: not a no-op", c.name),
        (Exp::Ok(obj, entries), Ok(v)) => {
            let mf = v["metadata"].get("managedFields").cloned();
            assert_eq!(without_managed_fields(&v), *obj, "{}: object", c.name);
            let got: Vec<(String, String, Value)> = mf
                .as_ref()
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|e| (e["manager"].as_str().unwrap().to_string(), e["operation"].as_str().unwrap().to_string(), e["fieldsV1"].clone()))
                .collect();
            let want: Vec<(String, String, Value)> = entries.iter().map(|(m, o, f)| (m.to_string(), o.to_string(), f.clone())).collect();
            assert_eq!(got, want, "{}: managedFields {}", c.name, mf.unwrap_or_default());
            // The applier's time is now when the object changed; an apply
            // that only changes ownership keeps its entry's (none if new).
            let changed = c.live.as_ref().is_none_or(|l| without_managed_fields(l) != without_managed_fields(&v));
            let former = c.live.as_ref().and_then(|l| l["metadata"]["managedFields"].as_array()).into_iter().flatten().find(|e| e["operation"] == "Apply" && e["manager"] == c.manager);
            let want_time = if changed { json!(NOW) } else { former.map_or(Value::Null, |e| e["time"].clone()) };
            for e in mf.as_ref().and_then(Value::as_array).into_iter().flatten() {
                if e["operation"] == "Apply" && e["manager"] == c.manager {
                    assert_eq!(e.get("time").cloned().unwrap_or_default(), want_time, "{}: the applier's time", c.name);
                    assert_eq!(e["apiVersion"], api, "{}", c.name);
                    assert_eq!(e.get("subresource").and_then(Value::as_str).unwrap_or(""), req.subresource, "{}", c.name);
                }
            }
        }
        (Exp::Err(code, msg), Err(err)) => {
            let st = err.into_status("g", "r", "n");
            assert_eq!((st.code, st.message.as_str()), (*code, *msg), "{}", c.name);
        }
        (Exp::ErrPrefix(code, msg), Err(err)) => {
            let st = err.into_status("g", "r", "n");
            assert_eq!(st.code, *code, "{}: {}", c.name, st.message);
            assert!(st.message.starts_with(msg), "{}: {}", c.name, st.message);
        }
        (_, Ok(v)) => panic!("{}: unexpected success {v}", c.name),
        (_, Err(e)) => panic!("{}: unexpected failure {e}", c.name),
    }
}

fn fa(keys: &[&str]) -> Value {
    let m: serde_json::Map<String, Value> = keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
    json!({"f:data": m})
}

fn configmap_cases() -> Vec<Case> {
    use K::ConfigMap as C;
    let edit = |keys: &[&str]| e("kubectl-edit", "Update", "v1", fa(keys));
    vec![
        case("create", C, None, cm(json!({"a": "1"})), "a", Exp::Ok(cm(json!({"a": "1"})), vec![("a", "Apply", fa(&["a"]))])),
        case(
            "create with labels",
            C,
            None,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"x": "y"}}}),
            "a",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"x": "y"}}}),
                vec![("a", "Apply", json!({"f:metadata": {"f:labels": {"f:x": {}}}}))],
            ),
        ),
        case("empty map is a member", C, None, cm(json!({})), "a", Exp::Ok(cm(json!({})), vec![("a", "Apply", json!({"f:data": {}}))])),
        case("re-apply is a no-op", C, Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"]))])), cm(json!({"a": "1"})), "a", Exp::Noop),
        case(
            "change a value",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"]))])),
            cm(json!({"a": "2"})),
            "a",
            Exp::Ok(cm(json!({"a": "2"})), vec![("a", "Apply", fa(&["a"]))]),
        ),
        case(
            "add a key",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"]))])),
            cm(json!({"a": "1", "b": "2"})),
            "a",
            Exp::Ok(cm(json!({"a": "1", "b": "2"})), vec![("a", "Apply", fa(&["a", "b"]))]),
        ),
        case(
            "drop an owned key",
            C,
            Some(with_mf(cm(json!({"a": "1", "b": "2"})), vec![e("a", "Apply", "v1", fa(&["a", "b"]))])),
            cm(json!({"b": "2"})),
            "a",
            Exp::Ok(cm(json!({"b": "2"})), vec![("a", "Apply", fa(&["b"]))]),
        ),
        case(
            "drop every field: the map and the entry go",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"]))])),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}}),
            "a",
            Exp::Ok(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}}), vec![]),
        ),
        case(
            "a dropped key another applier owns stays",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"])), e("b", "Apply", "v1", fa(&["a"]))])),
            cm(json!({"c": "3"})),
            "a",
            Exp::Ok(cm(json!({"a": "1", "c": "3"})), vec![("b", "Apply", fa(&["a"])), ("a", "Apply", fa(&["c"]))]),
        ),
        case(
            "a dropped key an Update manager owns stays",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"])), edit(&["a"])])),
            cm(json!({"c": "3"})),
            "a",
            Exp::Ok(cm(json!({"a": "1", "c": "3"})), vec![("a", "Apply", fa(&["c"])), ("kubectl-edit", "Update", fa(&["a"]))]),
        ),
        case(
            "a key never owned by the applier is kept",
            C,
            Some(with_mf(cm(json!({"a": "1", "z": "9"})), vec![e("a", "Apply", "v1", fa(&["a"]))])),
            cm(json!({"a": "1", "b": "2"})),
            "a",
            Exp::Ok(cm(json!({"a": "1", "b": "2", "z": "9"})), vec![("a", "Apply", fa(&["a", "b"]))]),
        ),
        case(
            "conflict with an Update manager",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![edit(&["a"])])),
            cm(json!({"a": "2"})),
            "b",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"),
        ),
        case(
            "the same value is shared, not a conflict",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![edit(&["a"])])),
            cm(json!({"a": "1"})),
            "b",
            Exp::Ok(cm(json!({"a": "1"})), vec![("b", "Apply", fa(&["a"])), ("kubectl-edit", "Update", fa(&["a"]))]),
        ),
        forced(case(
            "force takes the field",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![edit(&["a"])])),
            cm(json!({"a": "2"})),
            "b",
            Exp::Ok(cm(json!({"a": "2"})), vec![("b", "Apply", fa(&["a"]))]),
        )),
        forced(case(
            "force takes only the conflicting fields",
            C,
            Some(with_mf(cm(json!({"a": "1", "c": "3"})), vec![edit(&["a", "c"])])),
            cm(json!({"a": "2"})),
            "b",
            Exp::Ok(cm(json!({"a": "2", "c": "3"})), vec![("b", "Apply", fa(&["a"])), ("kubectl-edit", "Update", fa(&["c"]))]),
        )),
        case(
            "conflict with an Apply manager",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"]))])),
            cm(json!({"a": "2"})),
            "b",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"a\": .data.a"),
        ),
        case(
            "two conflicts with one manager",
            C,
            Some(with_mf(cm(json!({"a": "1", "b": "1"})), vec![e("a", "Apply", "v1", fa(&["a", "b"]))])),
            cm(json!({"a": "2", "b": "2"})),
            "b",
            Exp::Err(409, "Apply failed with 2 conflicts: conflicts with \"a\":\n- .data.a\n- .data.b"),
        ),
        case(
            "conflicts with two managers, sorted",
            C,
            Some(with_mf(cm(json!({"a": "1", "b": "1"})), vec![e("y", "Update", "v1", fa(&["a"])), e("x", "Update", "v1", fa(&["b"]))])),
            cm(json!({"a": "2", "b": "2"})),
            "m",
            Exp::Err(409, "Apply failed with 2 conflicts: conflicts with \"x\" using v1:\n- .data.b\nconflicts with \"y\" using v1:\n- .data.a"),
        ),
        case(
            "a new key beside another manager's",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![edit(&["a"])])),
            cm(json!({"c": "3"})),
            "b",
            Exp::Ok(cm(json!({"a": "1", "c": "3"})), vec![("b", "Apply", fa(&["c"])), ("kubectl-edit", "Update", fa(&["a"]))]),
        ),
        case(
            "the resourceVersion precondition survives",
            C,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "resourceVersion": "5"}, "data": {"a": "1"}}),
                vec![e("a", "Apply", "v1", fa(&["a"]))],
            )),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "resourceVersion": "4"}, "data": {"a": "1"}}),
            "a",
            Exp::Ok(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "resourceVersion": "4"}, "data": {"a": "1"}}), vec![("a", "Apply", fa(&["a"]))]),
        ),
        case("managedFields in the config", C, None, with_mf(cm(json!({"a": "1"})), vec![e("a", "Apply", "v1", fa(&["a"]))]), "a", Exp::Err(400, "metadata.managedFields must be nil")),
        case("another kind", C, None, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}), "a", Exp::Err(400, "invalid object type: /v1, Kind=Secret")),
        case("another version", C, None, json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "c"}}), "a", Exp::Err(400, "invalid object type: /v2, Kind=ConfigMap")),
        case(
            "a number where a string is declared",
            C,
            None,
            cm(json!({"a": 5})),
            "a",
            Exp::ErrPrefix(500, "failed to create typed patch object (d/c; /v1, Kind=ConfigMap): .data.a: expected string, got"),
        ),
        case(
            "an undeclared field",
            C,
            None,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "spec": {"x": 1}}),
            "a",
            Exp::Err(500, "failed to create typed patch object (d/c; /v1, Kind=ConfigMap): .spec: field not declared in schema"),
        ),
        case(
            "a list where a map is declared",
            C,
            None,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": ["a"]}),
            "a",
            Exp::Err(500, "failed to create typed patch object (d/c; /v1, Kind=ConfigMap): .data: expected map, got [a]"),
        ),
        case(
            "annotation conflict",
            C,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "annotations": {"k": "1"}}}),
                vec![e("x", "Update", "v1", json!({"f:metadata": {"f:annotations": {".": {}, "f:k": {}}}}))],
            )),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "annotations": {"k": "2"}}}),
            "a",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using v1: .metadata.annotations.k"),
        ),
        case(
            "labels of two managers merge",
            C,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"a": "1"}}}),
                vec![e("x", "Update", "v1", json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}))],
            )),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"b": "2"}}}),
            "a",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"a": "1", "b": "2"}}}),
                vec![("a", "Apply", json!({"f:metadata": {"f:labels": {"f:b": {}}}})), ("x", "Update", json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}))],
            ),
        ),
        case(
            "a subresource manager is named with it",
            C,
            Some(with_mf(
                cm(json!({"a": "1"})),
                vec![json!({"manager": "m", "operation": "Update", "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1", "fieldsV1": fa(&["a"]), "subresource": "status"})],
            )),
            cm(json!({"a": "2"})),
            "b",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"m\" with subresource \"status\" using v1: .data.a"),
        ),
        case(
            "finalizers are a set: union",
            C,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a"]}}),
                vec![e("x", "Update", "v1", json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}}}}))],
            )),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["b"]}}),
            "m",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a", "b"]}}),
                vec![("m", "Apply", json!({"f:metadata": {"f:finalizers": {"v:\"b\"": {}}}})), ("x", "Update", json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}}}}))],
            ),
        ),
        case(
            "a set item the applier dropped goes",
            C,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a", "b"]}}),
                vec![e("m", "Apply", "v1", json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}}))],
            )),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a"]}}),
            "m",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a"]}}),
                vec![("m", "Apply", json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}}}))],
            ),
        ),
        case(
            "a shared set item is no conflict",
            C,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a"]}}),
                vec![e("x", "Update", "v1", json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}}}))],
            )),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a"]}}),
            "m",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "finalizers": ["a"]}}),
                vec![("m", "Apply", json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}}})), ("x", "Update", json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}}}))],
            ),
        ),
        case(
            "an untracked object's fields go to before-first-apply",
            C,
            Some(cm(json!({"a": "1", "b": "2"}))),
            cm(json!({"a": "1"})),
            "m",
            Exp::Ok(cm(json!({"a": "1", "b": "2"})), vec![("m", "Apply", fa(&["a"])), ("before-first-apply", "Update", json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}))]),
        ),
        case(
            "changing an untracked object's field conflicts with before-first-apply",
            C,
            Some(cm(json!({"a": "1", "b": "2"}))),
            cm(json!({"a": "2"})),
            "m",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"),
        ),
        forced(case(
            "forcing on an untracked object takes the field from before-first-apply",
            C,
            Some(cm(json!({"a": "1", "b": "2"}))),
            cm(json!({"a": "2"})),
            "m",
            Exp::Ok(cm(json!({"a": "2", "b": "2"})), vec![("m", "Apply", fa(&["a"])), ("before-first-apply", "Update", json!({"f:data": {".": {}, "f:b": {}}}))]),
        )),
        case(
            "reset managedFields (an empty list) count as untracked",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![])),
            cm(json!({"a": "2"})),
            "m",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"),
        ),
        case(
            "an apply that only takes ownership keeps the applier's time",
            C,
            Some(with_mf(cm(json!({"a": "1", "b": "2"})), vec![e("m", "Apply", "v1", fa(&["a"])), edit(&["b"])])),
            cm(json!({"a": "1", "b": "2"})),
            "m",
            Exp::Ok(cm(json!({"a": "1", "b": "2"})), vec![("m", "Apply", fa(&["a", "b"])), ("kubectl-edit", "Update", fa(&["b"]))]),
        ),
        case(
            "an object that does not change gives a new applier no time",
            C,
            Some(with_mf(cm(json!({"a": "1"})), vec![edit(&["a"])])),
            cm(json!({"a": "1"})),
            "m",
            Exp::Ok(cm(json!({"a": "1"})), vec![("m", "Apply", fa(&["a"])), ("kubectl-edit", "Update", fa(&["a"]))]),
        ),
    ]
}

fn nginx_fields() -> Value {
    json!({"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}})
}

fn deployment_cases() -> Vec<Case> {
    use K::Deployment as D;
    let full =
        dep(json!({"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}}));
    let full_fields = json!({"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:containers": nginx_fields()}}}});
    let mut full_fields_no_replicas = full_fields.clone();
    full_fields_no_replicas["f:spec"].as_object_mut().unwrap().remove("f:replicas");
    let two = containers(json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]));
    let own = |n: &str| cfields(json!({format!("k:{{\"name\":\"{n}\"}}"): {".": {}, "f:image": {}, "f:name": {}}}));
    vec![
        case("create a Deployment", D, None, full.clone(), "a", Exp::Ok(full.clone(), vec![("a", "Apply", full_fields.clone())])),
        case(
            "replicas owned by kubectl scale",
            D,
            Some(with_mf(full.clone(), vec![e("a", "Apply", "apps/v1", full_fields_no_replicas.clone()), e("kubectl-scale", "Update", "apps/v1", json!({"f:spec": {"f:replicas": {}}}))])),
            {
                let mut c = full.clone();
                c["spec"]["replicas"] = json!(3);
                c
            },
            "a",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1: .spec.replicas"),
        ),
        case(
            "an image owned by another manager",
            D,
            Some(with_mf(containers(json!([{"name": "nginx", "image": "nginx:1"}])), vec![e("x", "Update", "apps/v1", cfields(json!({"k:{\"name\":\"nginx\"}": {"f:image": {}}})))])),
            containers(json!([{"name": "nginx", "image": "nginx:2"}])),
            "b",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using apps/v1: .spec.template.spec.containers[name=\"nginx\"].image"),
        ),
        case(
            "a port keyed with the default protocol",
            D,
            None,
            containers(json!([{"name": "nginx", "ports": [{"containerPort": 80}]}])),
            "a",
            Exp::Ok(
                containers(json!([{"name": "nginx", "ports": [{"containerPort": 80}]}])),
                vec![("a", "Apply", cfields(json!({"k:{\"name\":\"nginx\"}": {".": {}, "f:name": {}, "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}})))],
            ),
        ),
        case(
            "a port field owned by another manager",
            D,
            Some(with_mf(
                containers(json!([{"name": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "web"}]}])),
                vec![e("x", "Update", "apps/v1", cfields(json!({"k:{\"name\":\"nginx\"}": {"f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {"f:name": {}}}}})))],
            )),
            containers(json!([{"name": "nginx", "ports": [{"containerPort": 80, "name": "web2"}]}])),
            "b",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using apps/v1: .spec.template.spec.containers[name=\"nginx\"].ports[containerPort=80,protocol=\"TCP\"].name"),
        ),
        case(
            "two managers each own one container",
            D,
            Some(with_mf(two.clone(), vec![e("A", "Apply", "apps/v1", own("a")), e("B", "Apply", "apps/v1", own("b"))])),
            containers(json!([{"name": "a", "image": "a:2"}])),
            "A",
            // Entries sort by operation, then time: B (older) first.
            Exp::Ok(containers(json!([{"name": "a", "image": "a:2"}, {"name": "b", "image": "b:1"}])), vec![("B", "Apply", own("b")), ("A", "Apply", own("a"))]),
        ),
        case(
            "a second manager adds its container after the first's",
            D,
            Some(with_mf(containers(json!([{"name": "a", "image": "a:1"}])), vec![e("A", "Apply", "apps/v1", own("a"))])),
            containers(json!([{"name": "b", "image": "b:1"}])),
            "B",
            Exp::Ok(two.clone(), vec![("A", "Apply", own("a")), ("B", "Apply", own("b"))]),
        ),
        case(
            "a container the applier dropped goes",
            D,
            Some(with_mf(two.clone(), vec![e("A", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}})))])),
            containers(json!([{"name": "a", "image": "a:1"}])),
            "A",
            Exp::Ok(containers(json!([{"name": "a", "image": "a:1"}])), vec![("A", "Apply", own("a"))]),
        ),
        case(
            "a dropped container another applier declares stays",
            D,
            Some(with_mf(two.clone(), vec![e("A", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}}))), e("B", "Apply", "apps/v1", own("b"))])),
            containers(json!([{"name": "a", "image": "a:1"}])),
            "A",
            // Nothing changed, so A keeps its time and the entries their
            // order (by time, then manager).
            Exp::Ok(two.clone(), vec![("A", "Apply", own("a")), ("B", "Apply", own("b"))]),
        ),
        case(
            "a dropped container goes even with a field another manager set in it",
            D,
            Some(with_mf(
                containers(json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:9"}])),
                vec![e("A", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}))), e("x", "Update", "apps/v1", cfields(json!({"k:{\"name\":\"b\"}": {"f:image": {}}})))],
            )),
            containers(json!([{"name": "a", "image": "a:1"}])),
            "A",
            Exp::Ok(containers(json!([{"name": "a", "image": "a:1"}])), vec![("A", "Apply", own("a"))]),
        ),
        case(
            "shared items follow the config's order, live-only items keep their place",
            D,
            Some(with_mf(
                containers(json!([{"name": "x"}, {"name": "a"}, {"name": "b"}])),
                vec![
                    e("A", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}))),
                    e("X", "Update", "apps/v1", cfields(json!({"k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}))),
                ],
            )),
            containers(json!([{"name": "b"}, {"name": "a"}])),
            "A",
            Exp::Ok(
                containers(json!([{"name": "x"}, {"name": "b"}, {"name": "a"}])),
                vec![
                    ("A", "Apply", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}))),
                    ("X", "Update", cfields(json!({"k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}))),
                ],
            ),
        ),
        case(
            "new items come after the live ones, in config order",
            D,
            Some(with_mf(containers(json!([{"name": "a"}])), vec![e("A", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}})))])),
            containers(json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])),
            "A",
            Exp::Ok(
                containers(json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])),
                vec![("A", "Apply", cfields(json!({"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"c\"}": {".": {}, "f:name": {}}})))],
            ),
        ),
        case(
            "env is keyed by name",
            D,
            None,
            containers(json!([{"name": "n", "env": [{"name": "A", "value": "1"}]}])),
            "a",
            Exp::Ok(
                containers(json!([{"name": "n", "env": [{"name": "A", "value": "1"}]}])),
                vec![("a", "Apply", cfields(json!({"k:{\"name\":\"n\"}": {".": {}, "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}}, "f:name": {}}})))],
            ),
        ),
        case(
            "args are atomic: one member",
            D,
            None,
            containers(json!([{"name": "n", "args": ["a", "b"]}])),
            "a",
            Exp::Ok(containers(json!([{"name": "n", "args": ["a", "b"]}])), vec![("a", "Apply", cfields(json!({"k:{\"name\":\"n\"}": {".": {}, "f:args": {}, "f:name": {}}})))]),
        ),
        case(
            "atomic args are replaced whole",
            D,
            Some(with_mf(containers(json!([{"name": "n", "args": ["a", "b"]}])), vec![e("a", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"n\"}": {".": {}, "f:args": {}, "f:name": {}}})))])),
            containers(json!([{"name": "n", "args": ["c"]}])),
            "a",
            Exp::Ok(containers(json!([{"name": "n", "args": ["c"]}])), vec![("a", "Apply", cfields(json!({"k:{\"name\":\"n\"}": {".": {}, "f:args": {}, "f:name": {}}})))]),
        ),
        case(
            "atomic args of another manager conflict as a whole",
            D,
            Some(with_mf(containers(json!([{"name": "n", "args": ["a"]}])), vec![e("x", "Update", "apps/v1", cfields(json!({"k:{\"name\":\"n\"}": {"f:args": {}}})))])),
            containers(json!([{"name": "n", "args": ["a", "b"]}])),
            "b",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using apps/v1: .spec.template.spec.containers[name=\"n\"].args"),
        ),
        forced(case(
            "the atomic selector is replaced whole",
            D,
            Some(with_mf(
                dep(json!({"selector": {"matchLabels": {"app": "w"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]}})),
                vec![e("x", "Update", "apps/v1", json!({"f:spec": {"f:selector": {}}}))],
            )),
            dep(json!({"selector": {"matchLabels": {"app": "w"}}})),
            "a",
            Exp::Ok(dep(json!({"selector": {"matchLabels": {"app": "w"}}})), vec![("a", "Apply", json!({"f:spec": {"f:selector": {}}}))]),
        )),
        case(
            "a container item without its key",
            D,
            None,
            containers(json!([{"image": "i"}])),
            "a",
            Exp::Err(
                500,
                "failed to create typed patch object (d/w; apps/v1, Kind=Deployment): .spec.template.spec.containers: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)",
            ),
        ),
        case("two containers of one name", D, None, containers(json!([{"name": "a"}, {"name": "a"}])), "a", Exp::ErrPrefix(500, "failed to merge config: .spec.template.spec.containers: duplicate entries for key [name=\"a\"]")),
        case(
            "status on the main resource is ignored",
            D,
            Some(with_mf(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "spec": {"replicas": 1}, "status": {"replicas": 1}}), vec![e("a", "Apply", "apps/v1", json!({"f:spec": {"f:replicas": {}}}))])),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "spec": {"replicas": 1}, "status": {"replicas": 5}}),
            "a",
            Exp::Noop,
        ),
        on_status(case(
            "apply to status owns only status",
            D,
            Some(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "spec": {"replicas": 1}})),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "spec": {"replicas": 9}, "status": {"observedGeneration": 3}}),
            "ctl",
            Exp::Ok(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "spec": {"replicas": 1}, "status": {"observedGeneration": 3}}),
                vec![("ctl", "Apply", json!({"f:status": {"f:observedGeneration": {}}}))],
            ),
        )),
        on_status(case(
            "status conflict with a status Update manager",
            D,
            Some(with_mf(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "status": {"replicas": 1}}),
                vec![json!({"manager": "x", "operation": "Update", "apiVersion": "apps/v1", "time": T0, "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}, "subresource": "status"})],
            )),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "d"}, "status": {"replicas": 4}}),
            "ctl",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" with subresource \"status\" using apps/v1: .status.replicas"),
        )),
        case(
            "unowned defaulted fields do not break a no-op",
            D,
            Some(with_mf(
                containers(json!([{"name": "nginx", "image": "nginx:1", "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"}])),
                vec![e("a", "Apply", "apps/v1", cfields(nginx_fields()))],
            )),
            containers(json!([{"name": "nginx", "image": "nginx:1"}])),
            "a",
            Exp::Noop,
        ),
        case(
            "a defaulted field stays when a sibling the applier owned goes",
            D,
            Some(with_mf(
                containers(json!([{"name": "nginx", "image": "nginx:1", "command": ["x"], "terminationMessagePath": "/dev/termination-log"}])),
                vec![e("a", "Apply", "apps/v1", cfields(json!({"k:{\"name\":\"nginx\"}": {".": {}, "f:command": {}, "f:image": {}, "f:name": {}}})))],
            )),
            containers(json!([{"name": "nginx", "image": "nginx:1"}])),
            "a",
            Exp::Ok(containers(json!([{"name": "nginx", "image": "nginx:1", "terminationMessagePath": "/dev/termination-log"}])), vec![("a", "Apply", cfields(nginx_fields()))]),
        ),
        case(
            "Service ports are keyed by port and the default protocol",
            K::Service,
            None,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": {"ports": [{"port": 80}]}}),
            "a",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": {"ports": [{"port": 80}]}}),
                vec![("a", "Apply", json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}}}))],
            ),
        ),
        case(
            "a UDP port is another item than the TCP one",
            K::Service,
            Some(with_mf(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": {"ports": [{"port": 53, "protocol": "TCP"}]}}),
                vec![e("x", "Update", "v1", json!({"f:spec": {"f:ports": {".": {}, "k:{\"port\":53,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:protocol": {}}}}}))],
            )),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": {"ports": [{"port": 53, "protocol": "UDP"}]}}),
            "a",
            Exp::Ok(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": {"ports": [{"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}),
                vec![
                    ("a", "Apply", json!({"f:spec": {"f:ports": {"k:{\"port\":53,\"protocol\":\"UDP\"}": {".": {}, "f:port": {}, "f:protocol": {}}}}})),
                    ("x", "Update", json!({"f:spec": {"f:ports": {".": {}, "k:{\"port\":53,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:protocol": {}}}}})),
                ],
            ),
        ),
    ]
}

fn crd_cases() -> Vec<Case> {
    use K::Widget as W;
    let sf = |v: Value| json!({"f:spec": v});
    vec![
        case(
            "custom resource with a keyed list",
            W,
            None,
            cr(json!({"replicas": 1, "items": [{"name": "a", "value": "x"}]})),
            "a",
            Exp::Ok(
                cr(json!({"replicas": 1, "items": [{"name": "a", "value": "x"}]})),
                vec![("a", "Apply", sf(json!({"f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:value": {}}}, "f:replicas": {}})))],
            ),
        ),
        case(
            "two appliers of one keyed list",
            W,
            Some(with_mf(
                cr(json!({"items": [{"name": "a", "value": "x"}]})),
                vec![e("A", "Apply", "stable.example.com/v1", sf(json!({"f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:value": {}}}})))],
            )),
            cr(json!({"items": [{"name": "b", "value": "y"}]})),
            "B",
            Exp::Ok(
                cr(json!({"items": [{"name": "a", "value": "x"}, {"name": "b", "value": "y"}]})),
                vec![
                    ("A", "Apply", sf(json!({"f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:value": {}}}}))),
                    ("B", "Apply", sf(json!({"f:items": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}, "f:value": {}}}}))),
                ],
            ),
        ),
        case(
            "a key field's schema default",
            W,
            None,
            cr(json!({"ports": [{"name": "p"}]})),
            "a",
            Exp::Ok(cr(json!({"ports": [{"name": "p"}]})), vec![("a", "Apply", sf(json!({"f:ports": {"k:{\"name\":\"p\",\"port\":80}": {".": {}, "f:name": {}}}})))]),
        ),
        case(
            "a conflict inside a custom keyed list",
            W,
            Some(with_mf(
                cr(json!({"ports": [{"name": "p", "port": 81, "host": "h"}]})),
                vec![e("x", "Update", "stable.example.com/v1", sf(json!({"f:ports": {"k:{\"name\":\"p\",\"port\":81}": {"f:host": {}}}})))],
            )),
            cr(json!({"ports": [{"name": "p", "port": 81, "host": "g"}]})),
            "a",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using stable.example.com/v1: .spec.ports[name=\"p\",port=81].host"),
        ),
        case(
            "custom set union",
            W,
            Some(with_mf(cr(json!({"tags": ["a"]})), vec![e("x", "Update", "stable.example.com/v1", sf(json!({"f:tags": {".": {}, "v:\"a\"": {}}})))])),
            cr(json!({"tags": ["b", "a"]})),
            "m",
            Exp::Ok(cr(json!({"tags": ["b", "a"]})), vec![("m", "Apply", sf(json!({"f:tags": {"v:\"a\"": {}, "v:\"b\"": {}}}))), ("x", "Update", sf(json!({"f:tags": {".": {}, "v:\"a\"": {}}})))]),
        ),
        case(
            "a list without a list type is atomic",
            W,
            Some(with_mf(cr(json!({"args": ["a", "b"]})), vec![e("m", "Apply", "stable.example.com/v1", sf(json!({"f:args": {}})))])),
            cr(json!({"args": ["c"]})),
            "m",
            Exp::Ok(cr(json!({"args": ["c"]})), vec![("m", "Apply", sf(json!({"f:args": {}})))]),
        ),
        case(
            "an atomic map is replaced whole",
            W,
            Some(with_mf(cr(json!({"sel": {"a": "1", "b": "2"}})), vec![e("m", "Apply", "stable.example.com/v1", sf(json!({"f:sel": {}})))])),
            cr(json!({"sel": {"a": "1"}})),
            "m",
            Exp::Ok(cr(json!({"sel": {"a": "1"}})), vec![("m", "Apply", sf(json!({"f:sel": {}})))]),
        ),
        case(
            "a granular map merges by key",
            W,
            Some(with_mf(cr(json!({"labels": {"a": "1"}})), vec![e("x", "Update", "stable.example.com/v1", sf(json!({"f:labels": {".": {}, "f:a": {}}})))])),
            cr(json!({"labels": {"b": "2"}})),
            "m",
            Exp::Ok(cr(json!({"labels": {"a": "1", "b": "2"}})), vec![("m", "Apply", sf(json!({"f:labels": {"f:b": {}}}))), ("x", "Update", sf(json!({"f:labels": {".": {}, "f:a": {}}})))]),
        ),
        case(
            "preserve-unknown-fields: keys are members, maps granular",
            W,
            None,
            cr(json!({"free": {"x": {"y": 1}}})),
            "m",
            Exp::Ok(cr(json!({"free": {"x": {"y": 1}}})), vec![("m", "Apply", sf(json!({"f:free": {"f:x": {".": {}, "f:y": {}}}})))]),
        ),
        case(
            "preserve-unknown-fields: lists atomic",
            W,
            Some(with_mf(cr(json!({"free": {"l": [1, 2]}})), vec![e("m", "Apply", "stable.example.com/v1", sf(json!({"f:free": {"f:l": {}}})))])),
            cr(json!({"free": {"l": [3]}})),
            "m",
            Exp::Ok(cr(json!({"free": {"l": [3]}})), vec![("m", "Apply", sf(json!({"f:free": {"f:l": {}}})))]),
        ),
        case(
            "preserve-unknown-fields merge with another manager",
            W,
            Some(with_mf(cr(json!({"free": {"a": 1}})), vec![e("x", "Update", "stable.example.com/v1", sf(json!({"f:free": {".": {}, "f:a": {}}})))])),
            cr(json!({"free": {"b": 2}})),
            "m",
            Exp::Ok(cr(json!({"free": {"a": 1, "b": 2}})), vec![("m", "Apply", sf(json!({"f:free": {"f:b": {}}}))), ("x", "Update", sf(json!({"f:free": {".": {}, "f:a": {}}})))]),
        ),
        case(
            "preserve-unknown-fields conflict",
            W,
            Some(with_mf(cr(json!({"free": {"a": {"b": 1}}})), vec![e("x", "Update", "stable.example.com/v1", sf(json!({"f:free": {"f:a": {"f:b": {}}}})))])),
            cr(json!({"free": {"a": {"b": 2}}})),
            "m",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using stable.example.com/v1: .spec.free.a.b"),
        ),
        case(
            "an embedded resource is a granular struct with ObjectMeta",
            W,
            None,
            cr(json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": 1}}})),
            "m",
            Exp::Ok(
                cr(json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": 1}}})),
                vec![("m", "Apply", sf(json!({"f:template": {"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:labels": {"f:a": {}}, "f:name": {}}, "f:spec": {".": {}, "f:x": {}}}})))],
            ),
        ),
        case(
            "an embedded resource merges field by field",
            W,
            Some(with_mf(
                cr(json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}}}})),
                vec![e("x", "Update", "stable.example.com/v1", sf(json!({"f:template": {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}})))],
            )),
            cr(json!({"template": {"metadata": {"labels": {"c": "d"}}}})),
            "m",
            Exp::Ok(
                cr(json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b", "c": "d"}}}})),
                vec![
                    ("m", "Apply", sf(json!({"f:template": {"f:metadata": {"f:labels": {"f:c": {}}}}}))),
                    ("x", "Update", sf(json!({"f:template": {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}}))),
                ],
            ),
        ),
        case(
            "a nested field the applier dropped goes, its struct stays",
            W,
            Some(with_mf(cr(json!({"nested": {"inner": {"x": "1", "y": "2"}}})), vec![e("m", "Apply", "stable.example.com/v1", sf(json!({"f:nested": {"f:inner": {"f:x": {}, "f:y": {}}}})))])),
            cr(json!({"nested": {"inner": {"x": "1"}}})),
            "m",
            Exp::Ok(cr(json!({"nested": {"inner": {"x": "1"}}})), vec![("m", "Apply", sf(json!({"f:nested": {"f:inner": {"f:x": {}}}})))]),
        ),
        case(
            "a dropped struct keeps another manager's field in it",
            W,
            Some(with_mf(
                cr(json!({"replicas": 1, "nested": {"inner": {"x": "1", "y": "2"}}})),
                vec![
                    e("m", "Apply", "stable.example.com/v1", sf(json!({"f:nested": {"f:inner": {"f:x": {}}}, "f:replicas": {}}))),
                    e("u", "Update", "stable.example.com/v1", sf(json!({"f:nested": {"f:inner": {"f:y": {}}}}))),
                ],
            )),
            cr(json!({"replicas": 1})),
            "m",
            Exp::Ok(
                cr(json!({"replicas": 1, "nested": {"inner": {"y": "2"}}})),
                vec![("m", "Apply", sf(json!({"f:replicas": {}}))), ("u", "Update", sf(json!({"f:nested": {"f:inner": {"f:y": {}}}})))],
            ),
        ),
        case(
            "an undeclared custom field",
            W,
            None,
            cr(json!({"bogus": 1})),
            "m",
            Exp::Err(500, "failed to create typed patch object (d/x; stable.example.com/v1, Kind=Widget): .spec.bogus: field not declared in schema"),
        ),
        case(
            "a string where an integer is declared",
            W,
            None,
            cr(json!({"replicas": "three"})),
            "m",
            Exp::Err(500, "failed to create typed patch object (d/x; stable.example.com/v1, Kind=Widget): .spec.replicas: expected numeric (int or float), got string"),
        ),
        case(
            "a string where a map is declared",
            W,
            None,
            cr(json!({"nested": "str"})),
            "m",
            Exp::Err(500, "failed to create typed patch object (d/x; stable.example.com/v1, Kind=Widget): .spec.nested: expected map, got str"),
        ),
        case(
            "a string where a list is declared",
            W,
            None,
            cr(json!({"tags": "a"})),
            "m",
            Exp::Err(500, "failed to create typed patch object (d/x; stable.example.com/v1, Kind=Widget): .spec.tags: expected list, got a"),
        ),
        case(
            "custom metadata is typed by ObjectMeta",
            W,
            None,
            json!({"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "d", "labels": {"a": "b"}}}),
            "m",
            Exp::Ok(
                json!({"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "d", "labels": {"a": "b"}}}),
                vec![("m", "Apply", json!({"f:metadata": {"f:labels": {"f:a": {}}}}))],
            ),
        ),
        case(
            "custom status is not applied on the main resource",
            W,
            None,
            json!({"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "d"}, "spec": {"replicas": 1}, "status": {"phase": "Up"}}),
            "m",
            Exp::Ok(cr(json!({"replicas": 1})), vec![("m", "Apply", sf(json!({"f:replicas": {}})))]),
        ),
        on_status(case(
            "custom status through /status",
            W,
            Some(cr(json!({"replicas": 1}))),
            json!({"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "d"}, "status": {"phase": "Up"}}),
            "m",
            Exp::Ok(
                json!({"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "d"}, "spec": {"replicas": 1}, "status": {"phase": "Up"}}),
                vec![("m", "Apply", json!({"f:status": {"f:phase": {}}}))],
            ),
        )),
    ]
}

fn last_applied(data: Value) -> String {
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data});
    format!("{cfg}\n")
}

fn csa_live(data: Value, annotation_data: Value, owner: &str) -> Value {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "annotations": {lastapplied::ANNOTATION: last_applied(annotation_data)}}, "data": data});
    let keys: Vec<String> = obj["data"].as_object().unwrap().keys().cloned().collect();
    let mut fields = fa(&keys.iter().map(String::as_str).collect::<Vec<_>>());
    fields["f:metadata"] = json!({"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}});
    with_mf(obj, vec![e(owner, "Update", "v1", fields)])
}

fn annotated(data: Value, annotation_data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "annotations": {lastapplied::ANNOTATION: last_applied(annotation_data)}}, "data": data})
}

fn last_applied_cases() -> Vec<Case> {
    use K::ConfigMap as C;
    let ann_only = json!({"f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}});
    vec![
        case(
            "kubectl takes over client-side applied fields and rewrites the annotation",
            C,
            Some(csa_live(json!({"a": "1"}), json!({"a": "1"}), "kubectl-client-side-apply")),
            cm(json!({"a": "2"})),
            "kubectl",
            Exp::Ok(annotated(json!({"a": "2"}), json!({"a": "2"})), vec![("kubectl", "Apply", fa(&["a"])), ("kubectl-client-side-apply", "Update", ann_only.clone())]),
        ),
        case(
            "a field changed since the client-side apply still conflicts",
            C,
            Some(csa_live(json!({"a": "5"}), json!({"a": "1"}), "kubectl-edit")),
            cm(json!({"a": "2"})),
            "kubectl",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"),
        ),
        case(
            "other managers get no upgrade",
            C,
            Some(csa_live(json!({"a": "1"}), json!({"a": "1"}), "kubectl-client-side-apply")),
            cm(json!({"a": "2"})),
            "other",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.a"),
        ),
        case(
            "only conflicts outside the annotation are reported",
            C,
            Some(csa_live(json!({"a": "1", "b": "1"}), json!({"a": "1"}), "x")),
            cm(json!({"a": "2", "b": "2"})),
            "kubectl",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"x\" using v1: .data.b"),
        ),
        case(
            "the annotation is rewritten without conflicts",
            C,
            Some(csa_live(json!({"a": "1"}), json!({"a": "1"}), "kubectl-client-side-apply")),
            cm(json!({"a": "1", "b": "<&>"})),
            "kubectl",
            Exp::Ok(
                {
                    let mut o = annotated(json!({"a": "1", "b": "<&>"}), json!({}));
                    o["metadata"]["annotations"][lastapplied::ANNOTATION] =
                        json!("{\"apiVersion\":\"v1\",\"data\":{\"a\":\"1\",\"b\":\"\\u003c\\u0026\\u003e\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"d\"}}\n");
                    o
                },
                vec![
                    ("kubectl", "Apply", fa(&["a", "b"])),
                    ("kubectl-client-side-apply", "Update", json!({"f:data": {"f:a": {}}, "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}})),
                ],
            ),
        ),
        case(
            "an annotation of another apiVersion allows nothing",
            C,
            Some({
                let mut o = csa_live(json!({"a": "1"}), json!({"a": "1"}), "kubectl-client-side-apply");
                o["metadata"]["annotations"][lastapplied::ANNOTATION] = json!("{\"apiVersion\":\"v2\",\"kind\":\"ConfigMap\",\"data\":{\"a\":\"1\"}}");
                o
            }),
            cm(json!({"a": "2"})),
            "kubectl",
            Exp::Err(409, "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.a"),
        ),
    ]
}

#[test]
fn apply_table() {
    let mut all = configmap_cases();
    all.extend(deployment_cases());
    all.extend(crd_cases());
    all.extend(last_applied_cases());
    let mut failures = Vec::new();
    for c in &all {
        if let Err(p) = std::panic::catch_unwind(|| run(c)) {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            failures.push(msg);
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), all.len(), failures.join("\n\n"));
    assert!(all.len() >= 80, "{} cases", all.len());
}

fn entry(manager: &str, api: &str, secs: u64, key: &str) -> Value {
    json!({"manager": manager, "operation": "Update", "apiVersion": api, "time": format!("2025-01-01T00:00:{secs:02}Z"), "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {format!("f:{key}"): {}}}})
}

/// (manager, apiVersion, time, fieldsV1) of every entry.
fn summary(obj: &Value) -> Vec<(String, String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["manager"].as_str().unwrap().into(), e["apiVersion"].as_str().unwrap().into(), e["time"].as_str().unwrap().into(), e["fieldsV1"].clone()))
        .collect()
}

#[test]
fn update_caps_managers_into_ancient_changes() {
    let store = SchemaStore::builtin();
    let schema = store.of_kind("", "v1", "ConfigMap");
    // Ten Update entries m0..m9 (m_i set key k_i at second i); m10 adds k10.
    let keys: serde_json::Map<String, Value> = (0..10).map(|i| (format!("k{i}"), json!("v"))).collect();
    let old = with_mf(cm(Value::Object(keys)), (0..10).map(|i| entry(&format!("m{i}"), "v1", i, &format!("k{i}"))).collect());
    let mut new = old.clone();
    new["data"]["k10"] = json!("v");
    update(schema.as_ref(), Some(&old), &mut new, &Request { manager: "m10", api_version: "v1", subresource: "", scope: Scope::All, now: "2025-01-01T00:00:30Z", versions: None });
    let got = summary(&new);
    assert_eq!(got.len(), 10, "{got:?}");
    // m0 and m1 (the two oldest of v1) fold into the bucket, which takes m1's time.
    assert_eq!(got[0], ("ancient-changes".into(), "v1".into(), "2025-01-01T00:00:01Z".into(), json!({"f:data": {"f:k0": {}, "f:k1": {}}})));
    let managers: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
    assert_eq!(managers, ["ancient-changes", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"]);
}

#[test]
fn cap_keeps_ten_and_buckets_per_version() {
    let store = SchemaStore::builtin();
    let schema = store.of_kind("", "v1", "ConfigMap");
    // Exactly ten after the update: nothing folds.
    let keys: serde_json::Map<String, Value> = (0..9).map(|i| (format!("k{i}"), json!("v"))).collect();
    let old = with_mf(cm(Value::Object(keys)), (0..9).map(|i| entry(&format!("m{i}"), "v1", i, &format!("k{i}"))).collect());
    let mut new = old.clone();
    new["data"]["k9"] = json!("v");
    update(schema.as_ref(), Some(&old), &mut new, &Request { manager: "m9", api_version: "v1", subresource: "", scope: Scope::All, now: "2025-01-01T00:00:30Z", versions: None });
    assert_eq!(summary(&new).len(), 10);
    assert!(summary(&new).iter().all(|g| g.0 != "ancient-changes"));

    // The oldest is v2, alone of its version: it stays; m1 and m2 (v1) fold.
    let keys: serde_json::Map<String, Value> = (0..10).map(|i| (format!("k{i}"), json!("v"))).collect();
    let mut entries: Vec<Value> = (0..10).map(|i| entry(&format!("m{i}"), "v1", i, &format!("k{i}"))).collect();
    entries[0] = entry("m0", "v2", 0, "k0");
    let old = with_mf(cm(Value::Object(keys)), entries);
    let mut new = old.clone();
    new["data"]["k10"] = json!("v");
    update(schema.as_ref(), Some(&old), &mut new, &Request { manager: "m10", api_version: "v1", subresource: "", scope: Scope::All, now: "2025-01-01T00:00:30Z", versions: None });
    let got = summary(&new);
    let managers: Vec<(&str, &str)> = got.iter().map(|g| (g.0.as_str(), g.1.as_str())).collect();
    assert_eq!(managers, [("m0", "v2"), ("ancient-changes", "v1"), ("m3", "v1"), ("m4", "v1"), ("m5", "v1"), ("m6", "v1"), ("m7", "v1"), ("m8", "v1"), ("m9", "v1"), ("m10", "v1")]);
    assert_eq!(got[1].3, json!({"f:data": {"f:k1": {}, "f:k2": {}}}));
}

#[test]
fn conflict_status_and_paths() {
    let err = ApplyError::Conflicts(vec![Conflict { manager: "\"m\" using apps/v1".into(), path: ".spec.replicas".into() }]);
    let st = err.into_status("apps", "deployments", "w");
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    let d = st.details.unwrap();
    assert_eq!(d.causes, vec![crate::errors::Cause { reason: "FieldManagerConflict".into(), message: "conflict with \"m\" using apps/v1".into(), field: ".spec.replicas".into() }]);
    assert!(d.name.is_empty() && d.kind.is_empty(), "kube names no object in apply conflicts");
    assert_eq!(typed::print_element("v:\"a\""), "[=\"a\"]");
    assert_eq!(typed::print_element("i:3"), "[3]");
    assert_eq!(typed::print_element("k:{\"containerPort\":80,\"protocol\":\"TCP\"}"), "[containerPort=80,protocol=\"TCP\"]");
    assert_eq!(conflict::print_manager("a", "Apply", "v1", ""), "\"a\"");
    assert_eq!(conflict::print_manager("a", "Apply", "v1", "status"), "\"a\" with subresource \"status\"");
}

/// Paths come in structured-merge-diff's element order: field names, then
/// keys (numbers by value), then set values, then indexes.
#[test]
fn paths_in_path_element_order() {
    let set = FieldSet::from_fields_v1(&json!({
        "i:2": {}, "v:\"b\"": {}, "v:10": {}, "v:9": {}, "f:z": {}, "f:a": {},
        "k:{\"containerPort\":10,\"protocol\":\"TCP\"}": {}, "k:{\"containerPort\":9,\"protocol\":\"UDP\"}": {}, "k:{\"containerPort\":9,\"protocol\":\"TCP\"}": {},
    }))
    .unwrap();
    let got: Vec<String> = set.paths().iter().map(|p| typed::print_path(p)).collect();
    assert_eq!(got, [".a", ".z", "[containerPort=9,protocol=\"TCP\"]", "[containerPort=9,protocol=\"UDP\"]", "[containerPort=10,protocol=\"TCP\"]", "[=9]", "[=10]", "[=\"b\"]", "[2]"]);
}

/// Two versions of one kind that name one field differently: x.io/v1
/// `spec.size` is x.io/v2 `spec.replicas`.
fn rename_versions(obj: &Value, api_version: &str) -> Option<Value> {
    let (from, to) = match api_version {
        "x.io/v1" => ("replicas", "size"),
        "x.io/v2" => ("size", "replicas"),
        _ => return None,
    };
    let mut o = obj.clone();
    o["apiVersion"] = json!(api_version);
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(v) = spec.remove(from) {
            spec.insert(to.into(), v);
        }
    }
    Some(o)
}

fn thing(api: &str, spec: Value) -> Value {
    json!({"apiVersion": api, "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})
}

fn no_schema(_: &str) -> Option<Schema> {
    None
}

/// A manager that applied `spec.size` through v1 owns what v2 calls
/// `spec.replicas`: a v2 apply changing it conflicts with that manager,
/// named with its version and its path; forced, the field moves.
#[test]
fn conflict_found_through_conversion() {
    let versions = Versions { convert: &rename_versions, schema_of: &no_schema };
    let live = with_mf(thing("x.io/v2", json!({"replicas": 3})), vec![e("a", "Apply", "x.io/v1", json!({"f:spec": {"f:size": {}}}))]);
    let config = thing("x.io/v2", json!({"replicas": 5}));
    let req = ApplyRequest { manager: "b", api_version: "x.io/v2", kind: "Thing", subresource: "", scope: Scope::All, force: false, now: NOW, versions: Some(versions) };
    match apply(None, Some(&live), &config, &req) {
        Err(ApplyError::Conflicts(c)) => {
            assert_eq!(c.len(), 1, "{c:?}");
            assert_eq!(c[0].path, ".spec.size");
            // An Apply manager is named alone (an Update one `using` its version).
            assert_eq!(c[0].manager, "\"a\"");
        }
        other => panic!("expected a conflict with a, got {other:?}"),
    }
    // Without the converter the v1 path is compared as a v2 one: no conflict.
    assert!(apply(None, Some(&live), &config, &ApplyRequest { versions: None, ..req.clone() }).is_ok());

    let forced = apply(None, Some(&live), &config, &ApplyRequest { force: true, ..req }).unwrap();
    assert_eq!(forced["spec"]["replicas"], json!(5));
    let mf = forced["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1, "a lost its only field: {mf:?}");
    assert_eq!(mf[0]["manager"], "b");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:spec": {".": {}, "f:replicas": {}}}));
}

/// A v2 write that removes `spec.replicas` takes `spec.size` out of the v1
/// manager's entry.
#[test]
fn removal_applied_through_conversion() {
    let versions = Versions { convert: &rename_versions, schema_of: &no_schema };
    let a = e("a", "Update", "x.io/v1", json!({"f:spec": {"f:size": {}, "f:color": {}}}));
    let old = with_mf(thing("x.io/v2", json!({"replicas": 3, "color": "red"})), vec![a.clone()]);
    let mut new = thing("x.io/v2", json!({"color": "red"}));
    new["metadata"]["managedFields"] = old["metadata"]["managedFields"].clone();
    let req = Request { manager: "c", api_version: "x.io/v2", subresource: "", scope: Scope::All, now: NOW, versions: Some(versions) };
    update(None, Some(&old), &mut new, &req);
    let mf = new["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1, "{mf:?}");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:spec": {"f:color": {}}}));

    // Without the converter the v1 path survives the removal.
    let mut new = thing("x.io/v2", json!({"color": "red"}));
    new["metadata"]["managedFields"] = old["metadata"]["managedFields"].clone();
    update(None, Some(&old), &mut new, &Request { versions: None, ..req });
    assert_eq!(new["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:spec": {"f:size": {}, "f:color": {}}}));
}

/// A v2 applier that stops declaring `spec.replicas` leaves it when a v1
/// manager owns it as `spec.size`; without that manager it goes.
#[test]
fn removal_kept_for_an_owner_in_another_version() {
    let versions = Versions { convert: &rename_versions, schema_of: &no_schema };
    let b = e("b", "Apply", "x.io/v2", json!({"f:spec": {"f:replicas": {}, "f:color": {}}}));
    let config = thing("x.io/v2", json!({"color": "red"}));
    let req = ApplyRequest { manager: "b", api_version: "x.io/v2", kind: "Thing", subresource: "", scope: Scope::All, force: false, now: NOW, versions: Some(versions) };
    let a = e("a", "Update", "x.io/v1", json!({"f:spec": {"f:size": {}}}));
    let live = with_mf(thing("x.io/v2", json!({"replicas": 3, "color": "red"})), vec![a, b.clone()]);
    let out = apply(None, Some(&live), &config, &req).unwrap();
    assert_eq!(out["spec"], json!({"replicas": 3, "color": "red"}));
    let managers: Vec<&str> = out["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].as_str().unwrap()).collect();
    assert_eq!(managers, ["b", "a"], "{out}");
    // Compared as if v1 paths were v2 ones, the field would go.
    assert_eq!(apply(None, Some(&live), &config, &ApplyRequest { versions: None, ..req.clone() }).unwrap()["spec"], json!({"color": "red"}));

    let alone = with_mf(thing("x.io/v2", json!({"replicas": 3, "color": "red"})), vec![b]);
    assert_eq!(apply(None, Some(&alone), &config, &req).unwrap()["spec"], json!({"color": "red"}));
}
