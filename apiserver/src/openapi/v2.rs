//! OpenAPI v2 (Swagger 2.0) document, as JSON and in the protobuf form
//! kubectl fetches with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
//! (gnostic `openapiv2/OpenAPIv2.proto`, package `openapi.v2`, message
//! `Document`; there is no JSON fallback in kubectl).
//!
//! The document is built as JSON from the v3 pieces, then encoded with the
//! gnostic messages generated from `proto/proto/openapiv2.proto`
//! ([`proto::openapiv2`]). Values that gnostic keeps as `Any` (vendor
//! extensions, `enum`, `default`) go in its `yaml` field as JSON text, which
//! YAML readers accept.

use proto::openapiv2 as pb;
use serde_json::{json, Map, Value};

use crate::registry::Resource;
use crate::schema::{SchemaSource, REF_PREFIX};

/// The media type clients ask for to get the v2 document as protobuf.
pub const PROTOBUF_ACCEPT: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The media type it is returned with (kube-openapi `handler.go`: Go's
/// `mime` parser rejects the `@` of the Accept form).
pub const PROTOBUF_CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const V2_PREFIX: &str = "#/definitions/";

/// A v3 schema in v2 form: `#/definitions/` refs, one-element `allOf`
/// wrappers unwrapped to `$ref` with siblings (as kube's v2 spec has them).
fn to_v2_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                match k.as_str() {
                    // IntOrString and Quantity: Swagger 2.0 has no oneOf.
                    "oneOf" => {
                        out.insert("type".into(), json!("string"));
                        if m.contains_key("x-kubernetes-int-or-string") {
                            out.insert("format".into(), json!("int-or-string"));
                        }
                    }
                    "$ref" => {
                        let name = x.as_str().unwrap_or("").strip_prefix(REF_PREFIX).unwrap_or("");
                        out.insert(k.clone(), Value::String(format!("{V2_PREFIX}{name}")));
                    }
                    "allOf" => match x.as_array().map(Vec::as_slice) {
                        Some([only]) if only.get("$ref").is_some() => {
                            if let Value::Object(r) = to_v2_schema(only) {
                                out.extend(r);
                            }
                        }
                        _ => {
                            out.insert(k.clone(), to_v2_schema(x));
                        }
                    },
                    "properties" => {
                        let props = x.as_object().map(|p| p.iter().map(|(n, s)| (n.clone(), to_v2_schema(s))).collect()).unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    _ => {
                        out.insert(k.clone(), to_v2_schema(x));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v2_schema).collect()),
        other => other.clone(),
    }
}

/// The v2 operation of a v3 one: body parameter from `requestBody`,
/// media types, one schema per response.
fn to_v2_operation(op: &Value) -> Value {
    let mut out = Map::new();
    for k in ["tags", "description", "operationId", "x-kubernetes-action", "x-kubernetes-group-version-kind"] {
        if let Some(v) = op.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    let mut params: Vec<Value> = op["parameters"].as_array().cloned().unwrap_or_default().iter().map(to_v2_param).collect();
    if let Some(content) = op["requestBody"]["content"].as_object() {
        let schema = content.values().next().map(|c| to_v2_schema(&c["schema"])).unwrap_or(Value::Null);
        params.insert(0, json!({"name": "body", "in": "body", "required": op["requestBody"]["required"].as_bool().unwrap_or(false), "schema": schema}));
        out.insert("consumes".into(), json!(content.keys().collect::<Vec<_>>()));
    }
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    out.insert("produces".into(), json!(["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]));
    let mut resps = Map::new();
    if let Some(rs) = op["responses"].as_object() {
        for (code, r) in rs {
            let mut nr = json!({"description": r["description"]});
            if let Some(s) = r["content"]["application/json"].get("schema") {
                nr["schema"] = to_v2_schema(s);
            }
            resps.insert(code.clone(), nr);
        }
    }
    out.insert("responses".into(), Value::Object(resps));
    Value::Object(out)
}

fn to_v2_param(p: &Value) -> Value {
    let mut out = json!({"name": p["name"], "in": p["in"], "description": p["description"], "type": p["schema"]["type"], "uniqueItems": true});
    if p["required"].as_bool() == Some(true) {
        out["required"] = json!(true);
    }
    out
}

/// The Swagger 2.0 document of every served resource, as JSON.
pub fn document(defs: &SchemaSource, gvs: &[(String, String, Vec<std::sync::Arc<Resource>>)]) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for (_, _, resources) in gvs {
        let v3 = super::v3::group_version_document(defs, resources);
        if let Some(ps) = v3["paths"].as_object() {
            for (path, item) in ps {
                let mut ni = Map::new();
                if let Some(m) = item.as_object() {
                    for (verb, op) in m {
                        if verb == "parameters" {
                            ni.insert(verb.clone(), Value::Array(op.as_array().map(|a| a.iter().map(to_v2_param).collect()).unwrap_or_default()));
                        } else {
                            ni.insert(verb.clone(), to_v2_operation(op));
                        }
                    }
                }
                paths.insert(path.clone(), Value::Object(ni));
            }
        }
        if let Some(ss) = v3["components"]["schemas"].as_object() {
            for (n, s) in ss {
                definitions.entry(n.clone()).or_insert_with(|| to_v2_schema(s));
            }
        }
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": paths, "definitions": definitions})
}

fn any(v: &Value) -> pb::Any {
    pb::Any { yaml: v.to_string() }
}

fn extensions(m: &Map<String, Value>) -> Vec<pb::NamedAny> {
    m.iter().filter(|(k, _)| k.starts_with("x-")).map(|(k, v)| pb::NamedAny { name: k.clone(), value: Some(any(v)) }).collect()
}

fn str_field(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

fn schema_pb(v: &Value) -> pb::Schema {
    let Some(m) = v.as_object() else { return pb::Schema::default() };
    pb::Schema {
        r#ref: str_field(v, "$ref"),
        format: str_field(v, "format"),
        description: str_field(v, "description"),
        default: m.get("default").map(any),
        required: m.get("required").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default(),
        r#enum: m.get("enum").and_then(Value::as_array).map(|a| a.iter().map(any).collect()).unwrap_or_default(),
        additional_properties: m.get("additionalProperties").map(|a| {
            use pb::additional_properties_item::Oneof;
            Box::new(pb::AdditionalPropertiesItem {
                oneof: Some(match a {
                    Value::Bool(b) => Oneof::Boolean(*b),
                    s => Oneof::Schema(Box::new(schema_pb(s))),
                }),
            })
        }),
        r#type: m.get("type").and_then(Value::as_str).map(|t| pb::TypeItem { value: vec![t.to_string()] }),
        items: m.get("items").map(|i| pb::ItemsItem { schema: vec![schema_pb(i)] }),
        all_of: m.get("allOf").and_then(Value::as_array).map(|a| a.iter().map(schema_pb).collect()).unwrap_or_default(),
        properties: m
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| pb::Properties { additional_properties: p.iter().map(|(n, s)| pb::NamedSchema { name: n.clone(), value: Some(schema_pb(s)) }).collect() }),
        vendor_extension: extensions(m),
    }
}

fn param_pb(p: &Value) -> pb::ParametersItem {
    use pb::non_body_parameter::Oneof as NonBody;
    use pb::parameter::Oneof as Param;
    let parameter = if p["in"] == "body" {
        Param::BodyParameter(pb::BodyParameter {
            description: str_field(p, "description"),
            name: str_field(p, "name"),
            r#in: "body".into(),
            required: p["required"].as_bool().unwrap_or(false),
            schema: Some(schema_pb(&p["schema"])),
        })
    } else if p["in"] == "path" {
        let pp =
            pb::PathParameterSubSchema { required: true, r#in: "path".into(), description: str_field(p, "description"), name: str_field(p, "name"), r#type: str_field(p, "type"), unique_items: true };
        Param::NonBodyParameter(pb::NonBodyParameter { oneof: Some(NonBody::PathParameterSubSchema(pp)) })
    } else {
        let qp = pb::QueryParameterSubSchema {
            required: false,
            r#in: "query".into(),
            description: str_field(p, "description"),
            name: str_field(p, "name"),
            r#type: str_field(p, "type"),
            unique_items: true,
        };
        Param::NonBodyParameter(pb::NonBodyParameter { oneof: Some(NonBody::QueryParameterSubSchema(qp)) })
    };
    pb::ParametersItem { oneof: Some(pb::parameters_item::Oneof::Parameter(pb::Parameter { oneof: Some(parameter) })) }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

fn operation_pb(op: Option<&Value>) -> Option<pb::Operation> {
    let op = op?;
    let m = op.as_object()?;
    let responses = op["responses"].as_object().map(|rs| pb::Responses {
        response_code: rs
            .iter()
            .map(|(code, r)| pb::NamedResponseValue {
                name: code.clone(),
                value: Some(pb::ResponseValue {
                    oneof: Some(pb::response_value::Oneof::Response(pb::Response {
                        description: str_field(r, "description"),
                        schema: r.get("schema").map(|s| pb::SchemaItem { oneof: Some(pb::schema_item::Oneof::Schema(schema_pb(s))) }),
                    })),
                }),
            })
            .collect(),
    });
    Some(pb::Operation {
        tags: strings(&op["tags"]),
        description: str_field(op, "description"),
        operation_id: str_field(op, "operationId"),
        produces: strings(&op["produces"]),
        consumes: strings(&op["consumes"]),
        parameters: op["parameters"].as_array().map(|a| a.iter().map(param_pb).collect()).unwrap_or_default(),
        responses,
        vendor_extension: extensions(m),
    })
}

/// Encodes a Swagger 2.0 JSON document as a gnostic `Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    use prost::Message;
    let paths = doc["paths"].as_object().map(|ps| pb::Paths {
        path: ps
            .iter()
            .map(|(name, item)| pb::NamedPathItem {
                name: name.clone(),
                value: Some(pb::PathItem {
                    get: operation_pb(item.get("get")),
                    put: operation_pb(item.get("put")),
                    post: operation_pb(item.get("post")),
                    delete: operation_pb(item.get("delete")),
                    patch: operation_pb(item.get("patch")),
                    parameters: item["parameters"].as_array().map(|a| a.iter().map(param_pb).collect()).unwrap_or_default(),
                }),
            })
            .collect(),
    });
    let definitions =
        doc["definitions"].as_object().map(|ds| pb::Definitions { additional_properties: ds.iter().map(|(n, s)| pb::NamedSchema { name: n.clone(), value: Some(schema_pb(s)) }).collect() });
    let d = pb::Document { swagger: str_field(doc, "swagger"), info: Some(pb::Info { title: str_field(&doc["info"], "title"), version: str_field(&doc["info"], "version") }), paths, definitions };
    d.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn v2_round_trips_through_protobuf() {
        let defs = &crate::schema::SchemaSource::builtin();
        let reg = crate::registry::tests::builtin_catalog();
        let gvs: Vec<_> = reg.group_versions().iter().map(|(g, v)| (g.to_string(), v.to_string(), reg.of_group_version(g, v))).collect();
        let doc = document(defs, &gvs);
        let dep = &doc["definitions"]["io.k8s.api.apps.v1.DeploymentSpec"];
        assert_eq!(dep["properties"]["template"]["$ref"], "#/definitions/io.k8s.api.core.v1.PodTemplateSpec");
        let ios = &doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!((&ios["type"], &ios["format"]), (&json!("string"), &json!("int-or-string")));
        assert!(ios.get("oneOf").is_none());
        let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert!(patch["parameters"].as_array().is_some_and(|ps| ps.iter().any(|p| p["name"] == "fieldValidation")), "{patch}");
        let bytes = encode(&doc);
        let back = pb::Document::decode(bytes.as_slice()).unwrap_or_default();
        assert_eq!(back.swagger, "2.0");
        let defs_pb = back.definitions.unwrap_or_default();
        let d = defs_pb.additional_properties.iter().find(|n| n.name == "io.k8s.api.apps.v1.Deployment").and_then(|n| n.value.clone()).unwrap_or_default();
        assert!(d.vendor_extension.iter().any(|e| e.name == "x-kubernetes-group-version-kind"));
    }

    /// The bytes the hand-tagged gnostic structs wrote for a document that
    /// reaches every message and oneof arm the server writes, recorded when
    /// generated messages replaced them: `proto/openapiv2.proto` must keep
    /// gnostic's field numbers and oneofs.
    #[test]
    fn small_document_keeps_gnostics_field_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "T", "version": "v"},
            "paths": {"/p/{name}": {
                "parameters": [{"name": "name", "in": "path", "description": "d", "type": "string", "uniqueItems": true, "required": true}],
                "get": {"tags": ["t"], "description": "g", "operationId": "op", "produces": ["a/j"], "consumes": ["a/y"],
                        "parameters": [{"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/X"}},
                                       {"name": "q", "in": "query", "description": "qd", "type": "boolean", "uniqueItems": true}],
                        "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/X"}}},
                        "x-kubernetes-action": "get"}}},
            "definitions": {"X": {"description": "x", "type": "object", "required": ["a"],
                "properties": {"a": {"type": "string", "format": "f", "enum": ["e"], "default": "e"},
                               "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                               "b": {"type": "object", "additionalProperties": false},
                               "l": {"type": "array", "items": {"$ref": "#/definitions/Y"}},
                               "o": {"allOf": [{"$ref": "#/definitions/Y"}], "description": "o"}},
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "X", "version": "v1"}]}}
        });
        let want = concat!(
            "0a03322e3012060a015412017642db0112d8010a092f702f7b6e616d657d12ca0112a3010a01741a01672a026f703203",
            "612f6a3a03612f7942250a230a211204626f64791a04626f647920012a110a0f232f646566696e6974696f6e732f5842",
            "200a1e121c1a1a120571756572791a0271642201713207626f6f6c65616ea001014a240a220a03323030121b0a190a02",
            "4f4b12130a110a0f232f646566696e6974696f6e732f586a1e0a13782d6b756265726e657465732d616374696f6e1207",
            "120522676574224a220a20121e221c08011204706174681a016422046e616d652a06737472696e679801014a92020a8f",
            "020a01581289022201789a010161b201080a066f626a656374ca01a3010a220a0161121d1201662a051203226522a201",
            "051203226522b201080a06737472696e670a150a01621210aa01021000b201080a066f626a6563740a250a016c1220b2",
            "01070a056172726179ba01130a110a0f232f646566696e6974696f6e732f590a210a016d121caa010e0a0cb201090a07",
            "696e7465676572b201080a066f626a6563740a1c0a016f121722016fc201110a0f232f646566696e6974696f6e732f59",
            "fa014d0a1f782d6b756265726e657465732d67726f75702d76657273696f6e2d6b696e64122a12285b7b2267726f7570",
            "223a22222c226b696e64223a2258222c2276657273696f6e223a227631227d5d",
        );
        let got: String = encode(&doc).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
    }
}
