//! Non-resource paths: legacy discovery (`/api`, `/apis`, `/api/v1`,
//! `/apis/<g>`, `/apis/<g>/<v>`), `/version` and the health checks.
//!
//! Discovery is served as plain `application/json`, which makes client-go
//! fall back from aggregated discovery to one request per group-version.

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
    match parts.as_slice() {
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
