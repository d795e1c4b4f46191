//! Content negotiation and output transforms (kube `handlers/negotiation`
//! and `handlers/response.go`): plain objects, `meta.k8s.io/v1` Tables for
//! `kubectl get`, and PartialObjectMetadata for metadata-only clients.

use serde_json::{json, Map, Value};

use crate::registry::Resource;

/// What form the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The objects themselves.
    Object,
    /// A Table (`application/json;as=Table;v=v1;g=meta.k8s.io`).
    Table,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
}

/// The media types resources are served in and accept bodies in, in
/// kube's order (`application/vnd.kubernetes.protobuf` bodies are decoded
/// for the kinds of [`crate::protobuf`]; responses to it are JSON, which
/// client-go accepts because it always offers JSON too).
pub const MEDIA_TYPES: &[&str] = &["application/json", "application/yaml", crate::protobuf::MEDIA_TYPE];

/// Whether some media range of `accept` names a type of [`MEDIA_TYPES`]
/// (parameters such as `as=Table` or `stream=watch` are allowed), or is a
/// wildcard. A missing or empty header accepts anything.
///
/// # Errors
/// 406 NotAcceptable with kube's message when nothing matches.
pub fn check_accept(accept: Option<&str>) -> Result<(), crate::errors::Status> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return Ok(()) };
    let ok = accept.split(',').any(|clause| {
        let mime = clause.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        mime == "*/*" || mime == "application/*" || MEDIA_TYPES.contains(&mime.as_str())
    });
    if ok {
        Ok(())
    } else {
        Err(crate::errors::Status::not_acceptable(MEDIA_TYPES))
    }
}

/// Picks the first acceptable form of the Accept header, in order.
pub fn output(accept: Option<&str>) -> Output {
    let Some(accept) = accept else { return Output::Object };
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let mime = parts.next().unwrap_or("");
        let (mut as_, mut g, mut v) = ("", "", "");
        for p in parts {
            if let Some((k, val)) = p.split_once('=') {
                match k.trim() {
                    "as" => as_ = val.trim(),
                    "g" => g = val.trim(),
                    "v" => v = val.trim(),
                    _ => {}
                }
            }
        }
        if !(mime == "application/json" || mime == "*/*" || mime == "application/*" || mime == "application/yaml") {
            continue;
        }
        match as_ {
            "" => return Output::Object,
            "Table" if g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") => return Output::Table,
            "PartialObjectMetadata" | "PartialObjectMetadataList" if g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") => return Output::Metadata,
            _ => continue,
        }
    }
    Output::Object
}

/// `includeObject` of Table requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// Rows carry no object.
    None,
    /// Rows carry PartialObjectMetadata (the default).
    Metadata,
    /// Rows carry the whole object.
    Object,
}

impl IncludeObject {
    /// Parses the query value; unknown values read as the default.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }

    /// Checks the query value of a Table request as kube's
    /// `ValidateTableOptions`.
    ///
    /// # Errors
    /// 400 `Unable to convert to Table as requested: includeObject: ...`
    /// for a value other than `None`, `Metadata`, `Object` or empty.
    pub fn validate(v: Option<&str>) -> Result<(), crate::errors::Status> {
        match v {
            None | Some("" | "None" | "Metadata" | "Object") => Ok(()),
            Some(other) => {
                Err(crate::errors::Status::bad_request(format!("Unable to convert to Table as requested: includeObject: Invalid value: {other:?}: must be 'Metadata', 'Object', 'None', or empty")))
            }
        }
    }
}

/// An object as `PartialObjectMetadata`.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"].clone()})
}

fn list_meta(rv: &str, cont: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    if let Some(c) = cont.filter(|c| !c.is_empty()) {
        m.insert("continue".into(), Value::String(c.to_string()));
    }
    Value::Object(m)
}

/// A Table of `objs`. `with_columns` false leaves `columnDefinitions` empty
/// (watch events after the first, kube's `NoHeaders`).
pub fn table(res: &Resource, objs: &[Value], rv: &str, cont: Option<&str>, include: IncludeObject, with_columns: bool) -> Value {
    let columns: Vec<Value> = if with_columns { res.strategy.columns().iter().map(|c| serde_json::to_value(c).unwrap_or(Value::Null)).collect() } else { Vec::new() };
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut row = json!({"cells": res.strategy.cells(o)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(o),
                IncludeObject::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta(rv, cont), "columnDefinitions": columns, "rows": rows})
}

/// A `<Kind>List` of `items`.
pub fn list(res: &Resource, items: Vec<Value>, rv: &str, cont: Option<&str>) -> Value {
    json!({"kind": format!("{}List", res.kind), "apiVersion": res.api_version(), "metadata": list_meta(rv, cont), "items": items})
}

/// A list in the requested form.
pub fn transform_list(out: Output, res: &Resource, items: Vec<Value>, rv: &str, cont: Option<&str>, include: IncludeObject) -> Value {
    match out {
        Output::Object => list(res, items, rv, cont),
        Output::Table => table(res, &items, rv, cont, include, true),
        Output::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": list_meta(rv, cont),
            "items": items.iter().map(partial_metadata).collect::<Vec<_>>(),
        }),
    }
}

/// One object in the requested form.
pub fn transform_object(out: Output, res: &Resource, obj: Value, include: IncludeObject) -> Value {
    match out {
        Output::Object => obj,
        Output::Table => {
            let rv = crate::meta::resource_version(&obj).to_string();
            table(res, std::slice::from_ref(&obj), &rv, None, include, true)
        }
        Output::Metadata => partial_metadata(&obj),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers() {
        let cases = [
            (None, Output::Object),
            (Some("application/json"), Output::Object),
            (Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"), Output::Table),
            (Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"), Output::Metadata),
            (Some("application/vnd.kubernetes.protobuf,application/json"), Output::Object),
            (Some("application/json;as=Foo;g=x;v=v1,application/json"), Output::Object),
        ];
        for (a, want) in cases {
            assert_eq!(output(a), want, "{a:?}");
            assert!(check_accept(a).is_ok(), "{a:?}");
        }
        for bad in ["text/plain", "application/xml, text/html", "image/png;q=0.9"] {
            assert_eq!(check_accept(Some(bad)).map_err(|s| s.code), Err(406), "{bad}");
        }
    }
}
