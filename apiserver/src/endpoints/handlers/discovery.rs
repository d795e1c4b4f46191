//! Non-resource paths: legacy discovery (`/api`, `/apis`, `/api/v1`,
//! `/apis/<g>`, `/apis/<g>/<v>`), `/version` and the health checks. The
//! discovery documents come from [`crate::discovery`].
//!
//! `/api` and `/apis` also serve aggregated discovery
//! (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`, KEP-3352, and the
//! same shape as `v2beta1` for kubectl up to 1.29) when the
//! Accept header asks for it, echoing its exact media type, which is how
//! client-go knows it got it. Plain `application/json` gets the legacy
//! `APIVersions`/`APIGroupList`, and client-go then fetches each
//! group-version.

use serde_json::{json, Value};

use crate::endpoints::filters::request_info::RequestInfo;
use crate::endpoints::{responses, ApiState, Request, Response};
use crate::errors::Status;

/// The Kubernetes version this server reports (minor 33 makes the kubectl
/// dispatcher on PATH run `kubectl.1.33`).
pub fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// The media type of aggregated discovery v2, echoed as Content-Type.
pub const AGGREGATED_MEDIA_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The media type of aggregated discovery v2beta1, which kubectl up to
/// 1.29 asks for (same shape as v2).
pub const AGGREGATED_MEDIA_TYPE_V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// The aggregated discovery version (`v2`, `v2beta1`) the Accept header
/// prefers to plain JSON, if any (the first clause either form satisfies
/// wins).
pub fn wants_aggregated(accept: Option<&str>) -> Option<&'static str> {
    let accept = accept?;
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let mime = parts.next().unwrap_or("");
        if mime != "application/json" {
            if mime == "*/*" || mime == "application/*" {
                return None;
            }
            continue;
        }
        let (mut g, mut v, mut as_) = ("", "", "");
        for p in parts {
            match p.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("g", x)) => g = x,
                Some(("v", x)) => v = x,
                Some(("as", x)) => as_ = x,
                _ => {}
            }
        }
        match (g, v, as_) {
            ("apidiscovery.k8s.io", "v2", "APIGroupDiscoveryList") => return Some("v2"),
            ("apidiscovery.k8s.io", "v2beta1", "APIGroupDiscoveryList") => return Some("v2beta1"),
            ("", "", "") => return None,
            _ => {}
        }
    }
    None
}

/// Serves a non-resource request.
pub async fn non_resource(state: &ApiState, req: &Request, info: &RequestInfo) -> Response {
    let path = info.path.trim_end_matches('/');
    if !matches!(*req.method(), http::Method::GET | http::Method::HEAD) {
        return responses::status(&Status::method_not_allowed());
    }
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
    let catalog = state.registry.catalog();
    let docs = &state.discovery;
    match parts.as_slice() {
        ["api"] | ["apis"] if wants_aggregated(accept).is_some() => {
            let version = wants_aggregated(accept).unwrap_or("v2");
            let doc = docs.aggregated(&catalog, parts[0] == "api", version);
            let ct = if version == "v2" { AGGREGATED_MEDIA_TYPE } else { AGGREGATED_MEDIA_TYPE_V2BETA1 };
            let quoted = format!("\"{}\"", doc.etag);
            let unchanged = req.headers().get(http::header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|t| t.trim() == quoted));
            let mut r = if unchanged {
                let mut r = http::Response::new(responses::full(bytes::Bytes::new()));
                *r.status_mut() = http::StatusCode::NOT_MODIFIED;
                r
            } else {
                responses::json_bytes(200, doc.body)
            };
            r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(ct));
            r.headers_mut().insert(http::header::VARY, http::HeaderValue::from_static("Accept"));
            if let Ok(v) = http::HeaderValue::from_str(&quoted) {
                r.headers_mut().insert(http::header::ETAG, v);
            }
            r
        }
        ["api"] => responses::json_bytes(200, docs.api(&catalog)),
        ["api", version] => match docs.resource_list(&catalog, "", version) {
            Some(b) => responses::json_bytes(200, b),
            None => responses::status(&Status::resource_not_found()),
        },
        ["apis"] => responses::json_bytes(200, docs.apis(&catalog)),
        ["apis", group] => match docs.group(&catalog, group) {
            Some(b) => responses::json_bytes(200, b),
            None => responses::status(&Status::resource_not_found()),
        },
        ["apis", group, version] => match docs.resource_list(&catalog, group, version) {
            Some(b) => responses::json_bytes(200, b),
            None => responses::status(&Status::resource_not_found()),
        },
        ["version"] => responses::json(200, &version_info()),
        // kube's service account issuer discovery (`routes/openidmetadata.go`).
        [".well-known", "openid-configuration"] => match state.service_accounts.as_ref().and_then(|t| t.openid_configuration()) {
            Some(doc) => openid(responses::json(200, &doc), "application/json"),
            None => responses::text(404, "404 page not found\n"),
        },
        ["openid", "v1", "jwks"] => match state.service_accounts.as_ref().filter(|t| t.openid_configuration().is_some()) {
            Some(t) => openid(responses::json(200, &t.jwks()), "application/jwk-set+json"),
            None => responses::text(404, "404 page not found\n"),
        },
        ["metrics"] => responses::text(200, &crate::watchcache::metrics::render()),
        ["openapi", rest @ ..] => super::openapi::serve(state, req, rest),
        [check @ ("healthz" | "livez" | "readyz"), rest @ ..] => health(state, check, rest, req.uri().query()).await,
        _ => responses::text(404, "404 page not found\n"),
    }
}

/// An OpenID document's response: its content type and kube's caching
/// (public, one hour).
fn openid(mut r: Response, content_type: &'static str) -> Response {
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    r.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("public, max-age=3600"));
    r
}

/// `/livez`, `/readyz`, `/healthz` and their single checks
/// (`/readyz/etcd`), in kube's format: `ok`, or with `?verbose` or on a
/// failure one `[+]name ok` / `[-]name failed: reason withheld` line per
/// check and `<endpoint> check passed|failed`, 500 on a failure. The
/// reason goes to the log only, as kube withholds it.
async fn health(state: &ApiState, endpoint: &str, rest: &[&str], query: Option<&str>) -> Response {
    let verbose = query.is_some_and(|q| q.split('&').any(|p| p == "verbose" || p.starts_with("verbose=")));
    let names = state.health.checks(endpoint);
    if let [name] = rest {
        if !names.iter().any(|n| n == name) {
            return responses::text(404, "404 page not found\n");
        }
        return match state.health.check(name).await {
            Some(Ok(())) => responses::text(200, "ok"),
            Some(Err(e)) => {
                tracing::debug!("{endpoint} check {name} failed: {e}");
                responses::text(500, &format!("internal server error: {name} check failed"))
            }
            None => responses::text(404, "404 page not found\n"),
        };
    }
    let mut results = Vec::with_capacity(names.len());
    for name in &names {
        let r = state.health.check(name).await.unwrap_or(Ok(()));
        if let Err(e) = &r {
            tracing::debug!("{endpoint} check {name} failed: {e}");
        }
        results.push((name, r.is_ok()));
    }
    let ok = results.iter().all(|(_, good)| *good);
    if verbose || !ok {
        let mut s = String::new();
        for (n, good) in results {
            s.push_str(&format!("[{}]{n} {}\n", if good { "+" } else { "-" }, if good { "ok" } else { "failed: reason withheld" }));
        }
        s.push_str(&format!("{endpoint} check {}\n", if ok { "passed" } else { "failed" }));
        return responses::text(if ok { 200 } else { 500 }, &s);
    }
    responses::text(200, "ok")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_accept_headers() {
        let cases = [
            (None, None),
            (Some("application/json"), None),
            (Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"), Some("v2")),
            (Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"), Some("v2beta1")),
            (Some("application/json, */*"), None),
            (Some("application/yaml,application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList"), Some("v2")),
        ];
        for (a, want) in cases {
            assert_eq!(wants_aggregated(a), want, "{a:?}");
        }
    }
}
