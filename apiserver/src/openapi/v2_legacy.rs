//! The hand-tagged gnostic structs and encoder that `/openapi/v2` used
//! before `proto/openapiv2.proto`, kept for a while so a test can check the
//! generated messages write the same bytes.
#![allow(missing_docs, clippy::all)]

use serde_json::{Map, Value};

/// gnostic messages (field numbers from `OpenAPIv2.proto`).
pub mod pb {
    /// `Document`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Document {
        /// Always `2.0`.
        #[prost(string, tag = "1")]
        pub swagger: String,
        /// Title and version.
        #[prost(message, optional, tag = "2")]
        pub info: Option<Info>,
        /// Paths.
        #[prost(message, optional, tag = "8")]
        pub paths: Option<Paths>,
        /// Schemas.
        #[prost(message, optional, tag = "9")]
        pub definitions: Option<Definitions>,
    }
    /// `Info`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        /// Title.
        #[prost(string, tag = "1")]
        pub title: String,
        /// Version.
        #[prost(string, tag = "2")]
        pub version: String,
    }
    /// `Any`: a value as YAML text.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        /// YAML (here: JSON) text.
        #[prost(string, tag = "2")]
        pub yaml: String,
    }
    /// `NamedAny`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedAny {
        /// Key.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Value.
        #[prost(message, optional, tag = "2")]
        pub value: Option<Any>,
    }
    /// `Definitions`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Definitions {
        /// Named schemas.
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }
    /// `Properties`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Properties {
        /// Named schemas.
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }
    /// `NamedSchema`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedSchema {
        /// Key.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Schema.
        #[prost(message, optional, tag = "2")]
        pub value: Option<Schema>,
    }
    /// `TypeItem`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeItem {
        /// Types.
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }
    /// `ItemsItem`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ItemsItem {
        /// Item schemas.
        #[prost(message, repeated, tag = "1")]
        pub schema: Vec<Schema>,
    }
    /// `AdditionalPropertiesItem`: a oneof of a schema and a boolean,
    /// as two optional fields (the same bytes on the wire).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AdditionalPropertiesItem {
        /// A schema.
        #[prost(message, optional, boxed, tag = "1")]
        pub schema: Option<Box<Schema>>,
        /// A boolean.
        #[prost(bool, optional, tag = "2")]
        pub boolean: Option<bool>,
    }
    /// `Schema`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Schema {
        /// `$ref`.
        #[prost(string, tag = "1")]
        pub r#ref: String,
        /// `format`.
        #[prost(string, tag = "2")]
        pub format: String,
        /// `description`.
        #[prost(string, tag = "4")]
        pub description: String,
        /// `default`.
        #[prost(message, optional, tag = "5")]
        pub default: Option<Any>,
        /// `required`.
        #[prost(string, repeated, tag = "19")]
        pub required: Vec<String>,
        /// `enum`.
        #[prost(message, repeated, tag = "20")]
        pub r#enum: Vec<Any>,
        /// `additionalProperties`.
        #[prost(message, optional, boxed, tag = "21")]
        pub additional_properties: Option<Box<AdditionalPropertiesItem>>,
        /// `type`.
        #[prost(message, optional, tag = "22")]
        pub r#type: Option<TypeItem>,
        /// `items`.
        #[prost(message, optional, tag = "23")]
        pub items: Option<ItemsItem>,
        /// `allOf`.
        #[prost(message, repeated, tag = "24")]
        pub all_of: Vec<Schema>,
        /// `properties`.
        #[prost(message, optional, tag = "25")]
        pub properties: Option<Properties>,
        /// `x-*`.
        #[prost(message, repeated, tag = "31")]
        pub vendor_extension: Vec<NamedAny>,
    }
    /// `Paths`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Paths {
        /// Named path items.
        #[prost(message, repeated, tag = "2")]
        pub path: Vec<NamedPathItem>,
    }
    /// `NamedPathItem`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedPathItem {
        /// The path.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Its operations.
        #[prost(message, optional, tag = "2")]
        pub value: Option<PathItem>,
    }
    /// `PathItem`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PathItem {
        /// GET.
        #[prost(message, optional, tag = "2")]
        pub get: Option<Operation>,
        /// PUT.
        #[prost(message, optional, tag = "3")]
        pub put: Option<Operation>,
        /// POST.
        #[prost(message, optional, tag = "4")]
        pub post: Option<Operation>,
        /// DELETE.
        #[prost(message, optional, tag = "5")]
        pub delete: Option<Operation>,
        /// PATCH.
        #[prost(message, optional, tag = "8")]
        pub patch: Option<Operation>,
        /// Parameters of every operation.
        #[prost(message, repeated, tag = "9")]
        pub parameters: Vec<ParametersItem>,
    }
    /// `Operation`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Operation {
        /// Tags.
        #[prost(string, repeated, tag = "1")]
        pub tags: Vec<String>,
        /// Description.
        #[prost(string, tag = "3")]
        pub description: String,
        /// operationId.
        #[prost(string, tag = "5")]
        pub operation_id: String,
        /// Response media types.
        #[prost(string, repeated, tag = "6")]
        pub produces: Vec<String>,
        /// Request media types.
        #[prost(string, repeated, tag = "7")]
        pub consumes: Vec<String>,
        /// Parameters.
        #[prost(message, repeated, tag = "8")]
        pub parameters: Vec<ParametersItem>,
        /// Responses.
        #[prost(message, optional, tag = "9")]
        pub responses: Option<Responses>,
        /// `x-*`.
        #[prost(message, repeated, tag = "13")]
        pub vendor_extension: Vec<NamedAny>,
    }
    /// `ParametersItem` (only its `Parameter` arm).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ParametersItem {
        /// The parameter.
        #[prost(message, optional, tag = "1")]
        pub parameter: Option<Parameter>,
    }
    /// `Parameter`: a body or a non-body parameter.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Parameter {
        /// A body parameter.
        #[prost(message, optional, tag = "1")]
        pub body_parameter: Option<BodyParameter>,
        /// A query or path parameter.
        #[prost(message, optional, tag = "2")]
        pub non_body_parameter: Option<NonBodyParameter>,
    }
    /// `BodyParameter`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BodyParameter {
        /// Description.
        #[prost(string, tag = "1")]
        pub description: String,
        /// Name.
        #[prost(string, tag = "2")]
        pub name: String,
        /// Always `body`.
        #[prost(string, tag = "3")]
        pub r#in: String,
        /// Required.
        #[prost(bool, tag = "4")]
        pub required: bool,
        /// Schema.
        #[prost(message, optional, tag = "5")]
        pub schema: Option<Schema>,
    }
    /// `NonBodyParameter` (query and path arms).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NonBodyParameter {
        /// A query parameter.
        #[prost(message, optional, tag = "3")]
        pub query_parameter_sub_schema: Option<SimpleParameter>,
        /// A path parameter.
        #[prost(message, optional, tag = "4")]
        pub path_parameter_sub_schema: Option<PathParameter>,
    }
    /// `QueryParameterSubSchema` (leading fields).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SimpleParameter {
        /// Required.
        #[prost(bool, tag = "1")]
        pub required: bool,
        /// `query`.
        #[prost(string, tag = "2")]
        pub r#in: String,
        /// Description.
        #[prost(string, tag = "3")]
        pub description: String,
        /// Name.
        #[prost(string, tag = "4")]
        pub name: String,
        /// Type.
        #[prost(string, tag = "6")]
        pub r#type: String,
        /// uniqueItems.
        #[prost(bool, tag = "20")]
        pub unique_items: bool,
    }
    /// `PathParameterSubSchema` (leading fields).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PathParameter {
        /// Required.
        #[prost(bool, tag = "1")]
        pub required: bool,
        /// `path`.
        #[prost(string, tag = "2")]
        pub r#in: String,
        /// Description.
        #[prost(string, tag = "3")]
        pub description: String,
        /// Name.
        #[prost(string, tag = "4")]
        pub name: String,
        /// Type.
        #[prost(string, tag = "5")]
        pub r#type: String,
        /// uniqueItems.
        #[prost(bool, tag = "19")]
        pub unique_items: bool,
    }
    /// `Responses`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Responses {
        /// By status code.
        #[prost(message, repeated, tag = "1")]
        pub response_code: Vec<NamedResponseValue>,
    }
    /// `NamedResponseValue`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedResponseValue {
        /// Status code.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Response.
        #[prost(message, optional, tag = "2")]
        pub value: Option<ResponseValue>,
    }
    /// `ResponseValue` (its `Response` arm).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResponseValue {
        /// The response.
        #[prost(message, optional, tag = "1")]
        pub response: Option<Response>,
    }
    /// `Response`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Response {
        /// Description.
        #[prost(string, tag = "1")]
        pub description: String,
        /// Body schema.
        #[prost(message, optional, tag = "2")]
        pub schema: Option<SchemaItem>,
    }
    /// `SchemaItem` (its `Schema` arm).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SchemaItem {
        /// The schema.
        #[prost(message, optional, tag = "1")]
        pub schema: Option<Schema>,
    }
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
            Box::new(match a {
                Value::Bool(b) => pb::AdditionalPropertiesItem { schema: None, boolean: Some(*b) },
                s => pb::AdditionalPropertiesItem { schema: Some(Box::new(schema_pb(s))), boolean: None },
            })
        }),
        r#type: m.get("type").and_then(Value::as_str).map(|t| pb::TypeItem { value: vec![t.to_string()] }),
        items: m.get("items").map(|i| pb::ItemsItem { schema: vec![schema_pb(i)] }),
        all_of: m.get("allOf").and_then(Value::as_array).map(|a| a.iter().map(schema_pb).collect()).unwrap_or_default(),
        properties: m.get("properties").and_then(Value::as_object).map(|p| pb::Properties { additional_properties: p.iter().map(|(n, s)| pb::NamedSchema { name: n.clone(), value: Some(schema_pb(s)) }).collect() }),
        vendor_extension: extensions(m),
    }
}

fn param_pb(p: &Value) -> pb::ParametersItem {
    let parameter = if p["in"] == "body" {
        pb::Parameter { body_parameter: Some(pb::BodyParameter { description: str_field(p, "description"), name: str_field(p, "name"), r#in: "body".into(), required: p["required"].as_bool().unwrap_or(false), schema: Some(schema_pb(&p["schema"])) }), non_body_parameter: None }
    } else if p["in"] == "path" {
        let pp = pb::PathParameter { required: true, r#in: "path".into(), description: str_field(p, "description"), name: str_field(p, "name"), r#type: str_field(p, "type"), unique_items: true };
        pb::Parameter { body_parameter: None, non_body_parameter: Some(pb::NonBodyParameter { query_parameter_sub_schema: None, path_parameter_sub_schema: Some(pp) }) }
    } else {
        let qp = pb::SimpleParameter { required: false, r#in: "query".into(), description: str_field(p, "description"), name: str_field(p, "name"), r#type: str_field(p, "type"), unique_items: true };
        pb::Parameter { body_parameter: None, non_body_parameter: Some(pb::NonBodyParameter { query_parameter_sub_schema: Some(qp), path_parameter_sub_schema: None }) }
    };
    pb::ParametersItem { parameter: Some(parameter) }
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
                value: Some(pb::ResponseValue { response: Some(pb::Response { description: str_field(r, "description"), schema: r.get("schema").map(|s| pb::SchemaItem { schema: Some(schema_pb(s)) }) }) }),
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
    let definitions = doc["definitions"].as_object().map(|ds| pb::Definitions { additional_properties: ds.iter().map(|(n, s)| pb::NamedSchema { name: n.clone(), value: Some(schema_pb(s)) }).collect() });
    let d = pb::Document { swagger: str_field(doc, "swagger"), info: Some(pb::Info { title: str_field(&doc["info"], "title"), version: str_field(&doc["info"], "version") }), paths, definitions };
    d.encode_to_vec()
}

