//! Writing responses.

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use super::{Body, Response};
use crate::errors::Status;

/// A body from bytes.
pub fn full(b: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// A JSON response.
pub fn json(code: u16, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut r = http::Response::new(full(body));
    *r.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

/// A response of JSON bytes encoded already.
pub fn json_bytes(code: u16, body: Bytes) -> Response {
    let mut r = http::Response::new(full(body));
    *r.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

/// A Status response with its code, and a `Retry-After` header when the
/// Status asks for a retry (as kube's `ErrorNegotiated` writes it).
pub fn status(s: &Status) -> Response {
    let mut r = json(s.code, &s.to_value());
    if let Some(secs) = s.details.as_ref().and_then(|d| d.retry_after_seconds).filter(|s| *s > 0) {
        r.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
    }
    r
}

/// A plain-text response.
pub fn text(code: u16, s: &str) -> Response {
    let mut r = http::Response::new(full(s.to_string()));
    *r.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// Turns a handler result into a response.
pub fn from_result(r: Result<Response, Status>) -> Response {
    r.unwrap_or_else(|s| status(&s))
}

/// Whether the client prefers YAML: the first media type of `Accept` that
/// the server can produce is `application/yaml`.
pub fn wants_yaml(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    for clause in accept.split(',') {
        let mime = clause.split(';').next().unwrap_or("").trim();
        match mime {
            "application/yaml" => return true,
            "application/json" | "*/*" | "application/*" => return false,
            _ => continue,
        }
    }
    false
}

/// Re-encodes a JSON response as YAML (kube serves both). Responses that
/// are not JSON, or whose body cannot be read, are returned as they were.
pub async fn to_yaml(resp: Response) -> Response {
    let is_json = resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| ct.starts_with("application/json"));
    if !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(collected) = body.collect().await else {
        return status(&Status::internal("cannot read the response body"));
    };
    let bytes = collected.to_bytes();
    let yaml = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| serde_saphyr::to_string(&v).ok());
    match yaml {
        Some(y) => {
            parts.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/yaml"));
            parts.headers.remove(http::header::CONTENT_LENGTH);
            http::Response::from_parts(parts, full(y))
        }
        None => http::Response::from_parts(parts, full(bytes)),
    }
}
