//! Non-resource paths: legacy discovery (`/api`, `/apis`, `/api/v1`,
//! `/apis/<g>`, `/apis/<g>/<v>`), `/version` and the health checks.
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
use crate::registry::Resource;

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

fn group_version_entry(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

fn api_group(state: &ApiState, group: &str) -> Option<Value> {
    let versions: Vec<Value> = state.registry.group_versions().into_iter().filter(|(g, _)| *g == group).map(|(g, v)| group_version_entry(g, v)).collect();
    let preferred = versions.first()?.clone();
    Some(json!({"name": group, "versions": versions, "preferredVersion": preferred}))
}

fn resource_entries(r: &Resource) -> Vec<Value> {
    let mut main = json!({
        "name": r.resource,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    for sub in r.subresources {
        let mut e = json!({
            "name": format!("{}/{sub}", r.resource),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["get", "patch", "update"],
        });
        match *sub {
            "scale" => {
                e["group"] = json!("autoscaling");
                e["version"] = json!("v1");
                e["kind"] = json!("Scale");
            }
            "finalize" => e["verbs"] = json!(["update"]),
            _ => {}
        }
        out.push(e);
    }
    out
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

/// One resource in aggregated discovery (`APIResourceDiscovery`).
fn discovery_resource(r: &Resource) -> Value {
    let mut e = json!({
        "resource": r.resource,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    let subs: Vec<Value> = r
        .subresources
        .iter()
        .map(|sub| {
            let (kind, verbs) = match *sub {
                "scale" => (json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}), json!(["get", "patch", "update"])),
                "finalize" => (json!({"group": r.group, "version": r.version, "kind": r.kind}), json!(["update"])),
                _ => (json!({"group": r.group, "version": r.version, "kind": r.kind}), json!(["get", "patch", "update"])),
            };
            json!({"subresource": sub, "responseKind": kind, "verbs": verbs})
        })
        .collect();
    if !subs.is_empty() {
        e["subresources"] = json!(subs);
    }
    e
}

/// The `APIGroupDiscoveryList` of the core group (`legacy`) or of every
/// named group, preferred version first within each group.
fn aggregated(state: &ApiState, legacy: bool) -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in state.registry.group_versions() {
        if g.is_empty() == legacy && !groups.contains(&g) {
            groups.push(g);
        }
    }
    let items: Vec<Value> = groups
        .iter()
        .map(|g| {
            let versions: Vec<Value> = state
                .registry
                .group_versions()
                .into_iter()
                .filter(|(gg, _)| gg == g)
                .map(|(_, v)| {
                    let resources: Vec<Value> = state.registry.of_group_version(g, v).iter().map(|r| discovery_resource(r)).collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut meta = json!({"creationTimestamp": null});
            if !g.is_empty() {
                meta["name"] = json!(g);
            }
            json!({"metadata": meta, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn resource_list(state: &ApiState, group: &str, version: &str) -> Option<Value> {
    let resources = state.registry.of_group_version(group, version);
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let entries: Vec<Value> = resources.iter().flat_map(|r| resource_entries(r)).collect();
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}))
}

/// Serves a non-resource request.
pub async fn non_resource(state: &ApiState, req: &Request, info: &RequestInfo) -> Response {
    let path = info.path.trim_end_matches('/');
    if !matches!(*req.method(), http::Method::GET | http::Method::HEAD) {
        return responses::status(&Status::method_not_allowed());
    }
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
    match parts.as_slice() {
        ["api"] | ["apis"] if wants_aggregated(accept).is_some() => {
            let version = wants_aggregated(accept).unwrap_or("v2");
            let mut v = aggregated(state, parts.len() == 1 && parts[0] == "api");
            v["apiVersion"] = json!(format!("apidiscovery.k8s.io/{version}"));
            let mut r = responses::json(200, &v);
            let ct = if version == "v2" { AGGREGATED_MEDIA_TYPE } else { AGGREGATED_MEDIA_TYPE_V2BETA1 };
            r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(ct));
            r.headers_mut().insert(http::header::VARY, http::HeaderValue::from_static("Accept"));
            r
        }
        ["api"] => {
            let v = json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": state.advertise_address}],
            });
            responses::json(200, &v)
        }
        ["api", version] => match resource_list(state, "", version) {
            Some(v) => responses::json(200, &v),
            None => responses::status(&Status::resource_not_found()),
        },
        ["apis"] => {
            let mut groups: Vec<&str> = Vec::new();
            for (g, _) in state.registry.group_versions() {
                if !g.is_empty() && !groups.contains(&g) {
                    groups.push(g);
                }
            }
            let gs: Vec<Value> = groups.iter().filter_map(|g| api_group(state, g)).collect();
            responses::json(200, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs}))
        }
        ["apis", group] => match api_group(state, group) {
            Some(mut g) => {
                g["kind"] = json!("APIGroup");
                g["apiVersion"] = json!("v1");
                responses::json(200, &g)
            }
            None => responses::status(&Status::resource_not_found()),
        },
        ["apis", group, version] => match resource_list(state, group, version) {
            Some(v) => responses::json(200, &v),
            None => responses::status(&Status::resource_not_found()),
        },
        ["version"] => responses::json(200, &version_info()),
        ["metrics"] => responses::text(200, &crate::watchcache::metrics::render()),
        ["openapi", rest @ ..] => super::openapi::serve(state, req, rest),
        [check @ ("healthz" | "livez" | "readyz"), rest @ ..] => health(state, check, rest, req.uri().query()).await,
        _ => responses::text(404, "404 page not found\n"),
    }
}

async fn health(state: &ApiState, check: &str, rest: &[&str], query: Option<&str>) -> Response {
    let verbose = query.is_some_and(|q| q.split('&').any(|p| p == "verbose" || p.starts_with("verbose=")));
    let etcd_ok = if check == "livez" { true } else { state.storage.current_revision().await.is_ok() };
    let checks = [("ping", true), ("etcd", etcd_ok)];
    if let [name] = rest {
        return match checks.iter().find(|(n, _)| n == name) {
            Some((_, true)) => responses::text(200, "ok"),
            Some((_, false)) => responses::text(500, &format!("internal server error: {name} check failed")),
            None => responses::text(404, "404 page not found\n"),
        };
    }
    let ok = checks.iter().all(|(_, ok)| *ok);
    if verbose || !ok {
        let mut s = String::new();
        for (n, good) in checks {
            s.push_str(&format!("[{}]{n} {}\n", if good { "+" } else { "-" }, if good { "ok" } else { "failed: reason withheld" }));
        }
        s.push_str(&format!("{check} check {}\n", if ok { "passed" } else { "failed" }));
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
