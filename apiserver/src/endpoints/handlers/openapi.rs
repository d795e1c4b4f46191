//! `/openapi/v2` and `/openapi/v3[/<api|apis>/<g>/<v>]` (kube-openapi
//! `handler` and `handler3`). Documents come from [`crate::openapi::Service`].

use crate::endpoints::{responses, ApiState, Request, Response};
use crate::openapi::{v2, Document};

fn respond(doc: Document, immutable: bool) -> Response {
    let mut r = http::Response::new(responses::full(doc.body));
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(doc.content_type));
    if let Ok(v) = http::HeaderValue::from_str(&format!("\"{}\"", doc.etag)) {
        h.insert(http::header::ETAG, v);
    }
    let cache = if immutable { "public, immutable" } else { "no-cache, private" };
    h.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static(cache));
    r
}

/// Serves `/openapi/...`; `rest` is the path after `openapi`.
pub fn serve(state: &ApiState, req: &Request, rest: &[&str]) -> Response {
    let catalog = state.registry.catalog();
    let reg = catalog.as_ref();
    match rest {
        ["v2"] => {
            let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
            let protobuf = accept.split(',').map(|a| a.split(';').next().unwrap_or("").trim()).any(|m| m == v2::PROTOBUF_ACCEPT || m == v2::PROTOBUF_CONTENT_TYPE);
            respond(state.openapi.v2(reg, protobuf), false)
        }
        ["v3"] => respond(state.openapi.v3_root(reg), false),
        ["v3", gv @ ..] => match state.openapi.v3_group_version(reg, &gv.join("/")) {
            Some(doc) => {
                let hashed = req.uri().query().is_some_and(|q| q.split('&').any(|p| p.strip_prefix("hash=") == Some(doc.etag.as_str())));
                respond(doc, hashed)
            }
            None => responses::text(404, "404 page not found\n"),
        },
        _ => responses::text(404, "404 page not found\n"),
    }
}
