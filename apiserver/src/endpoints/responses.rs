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

/// A Status response with its code.
pub fn status(s: &Status) -> Response {
    json(s.code, &s.to_value())
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
