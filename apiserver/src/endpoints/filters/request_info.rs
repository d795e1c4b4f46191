//! The request-info filter: resolves what a request is about, as
//! Kubernetes' `RequestInfoFactory.NewRequestInfo` does
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`).
//!
//! Examples (method, path → verb, group/version, namespace, resource, name,
//! subresource):
//! - `GET /api/v1/namespaces/default/configmaps` → list, v1, default, configmaps
//! - `GET /api/v1/namespaces/default/configmaps?watch=true` → watch
//! - `GET /api/v1/namespaces/default` → get, namespace default, resource namespaces, name default
//! - `PUT /apis/apps/v1/namespaces/ns/deployments/web/scale` → update, subresource scale
//! - `DELETE /api/v1/namespaces/ns/pods` → deletecollection
//! - `GET /api/v1/watch/namespaces/ns/pods/p` → watch (deprecated watch prefix)
//! - `GET /version`, `GET /api/v1` → non-resource, verb get

use std::sync::Arc;

use super::super::{BoxFuture, Handler, Request, Response};

/// What a request is about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the request is for an API resource.
    pub is_resource_request: bool,
    /// The URL path.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `proxy`; for non-resource requests the lowercase
    /// HTTP method.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace, if any (for a namespace's own path, its name).
    pub namespace: String,
    /// Whether the path scoped the resource to the namespace
    /// (`/namespaces/<ns>/<resource>...`), rather than naming a namespace
    /// itself (`/namespaces/<ns>`, `/namespaces/<ns>/status`).
    pub namespace_scoped: bool,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `scale`...).
    pub subresource: String,
    /// Object name, if any.
    pub name: String,
    /// The path segments from the resource on.
    pub parts: Vec<String>,
}

const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];
const SPECIAL_VERBS: &[&str] = &["proxy", "watch"];
const SPECIAL_VERBS_NO_SUBRESOURCES: &[&str] = &["proxy"];

/// A boolean query parameter as kube's `Convert_Slice_string_To_bool` reads
/// it: only `0` and `false` (any case) are false; any other value, including
/// the empty string, is true.
fn parse_bool(v: &str) -> bool {
    v != "0" && !v.eq_ignore_ascii_case("false")
}

/// Resolves `RequestInfo` from a method, path and raw query string.
pub fn resolve(method: &http::Method, path: &str, query: Option<&str>) -> RequestInfo {
    let method_verb = match *method {
        http::Method::POST => "create",
        http::Method::GET | http::Method::HEAD => "get",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "",
    };
    let mut info = RequestInfo { path: path.to_string(), verb: method.as_str().to_lowercase(), ..Default::default() };
    let mut parts: Vec<String> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).map(String::from).collect();
    if parts.len() < 3 || !(parts[0] == "api" || parts[0] == "apis") {
        return info;
    }
    info.api_prefix = parts.remove(0);
    if info.api_prefix == "apis" {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0);
    }
    info.is_resource_request = true;
    info.api_version = parts.remove(0);
    if SPECIAL_VERBS.contains(&parts[0].as_str()) {
        if parts.len() < 2 {
            // kube: "unable to determine kind and namespace from url"; the
            // router answers 404.
            info.is_resource_request = false;
            return info;
        }
        info.verb = parts.remove(0);
    } else {
        info.verb = method_verb.to_string();
    }
    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].clone();
        if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2].as_str()) {
            parts.drain(0..2);
            info.namespace_scoped = true;
        }
    }
    if parts.len() >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.contains(&info.verb.as_str()) {
        info.subresource = parts[2].clone();
    }
    if parts.len() >= 2 {
        info.name = parts[1].clone();
    }
    if !parts.is_empty() {
        info.resource = parts[0].clone();
    }
    info.parts = parts;

    let q: Vec<(String, String)> = query.map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    let get = |k: &str| q.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    if info.name.is_empty() && info.verb == "get" {
        info.verb = if get("watch").is_some_and(parse_bool) { "watch" } else { "list" }.to_string();
        if let Some(fs) = get("fieldSelector") {
            if let Ok(sel) = crate::selectors::FieldSelector::parse(fs) {
                if let Some(n) = sel.exact("metadata.name") {
                    if !n.is_empty() && !n.contains('/') && n != "." && n != ".." && !n.contains('%') {
                        info.name = n.to_string();
                    }
                }
            }
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".into();
    }
    info
}

/// The filter: attaches a [`RequestInfo`] to the request's extensions.
pub struct WithRequestInfo {
    next: Arc<dyn Handler>,
}

impl WithRequestInfo {
    /// Wraps `next`.
    pub fn wrap(next: Arc<dyn Handler>) -> Arc<dyn Handler> {
        Arc::new(WithRequestInfo { next })
    }
}

impl Handler for WithRequestInfo {
    fn call(&self, mut req: Request) -> BoxFuture<'_, Response> {
        let info = resolve(req.method(), req.uri().path(), req.uri().query());
        req.extensions_mut().insert(info);
        self.next.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn resolves_like_kube() {
        // (method, path, query, verb, group, version, ns, resource, name, sub)
        type Case<'a> = (Method, &'a str, Option<&'a str>, &'a str, &'a str, &'a str, &'a str, &'a str, &'a str, &'a str);
        let cases: &[Case] = &[
            (Method::GET, "/api/v1/namespaces/default/configmaps", None, "list", "", "v1", "default", "configmaps", "", ""),
            (Method::GET, "/api/v1/namespaces/default/configmaps", Some("watch=true"), "watch", "", "v1", "default", "configmaps", "", ""),
            (Method::GET, "/api/v1/namespaces/default/configmaps", Some("watch=1&fieldSelector=metadata.name%3Dx"), "watch", "", "v1", "default", "configmaps", "x", ""),
            (Method::GET, "/api/v1/namespaces/default", None, "get", "", "v1", "default", "namespaces", "default", ""),
            (Method::PUT, "/api/v1/namespaces/x/finalize", None, "update", "", "v1", "x", "namespaces", "x", "finalize"),
            (Method::GET, "/api/v1/configmaps", None, "list", "", "v1", "", "configmaps", "", ""),
            (Method::POST, "/apis/apps/v1/namespaces/ns/deployments", None, "create", "apps", "v1", "ns", "deployments", "", ""),
            (Method::PUT, "/apis/apps/v1/namespaces/ns/deployments/web/scale", None, "update", "apps", "v1", "ns", "deployments", "web", "scale"),
            (Method::DELETE, "/api/v1/namespaces/ns/pods", None, "deletecollection", "", "v1", "ns", "pods", "", ""),
            (Method::DELETE, "/api/v1/namespaces/ns/pods/p", None, "delete", "", "v1", "ns", "pods", "p", ""),
            (Method::GET, "/api/v1/watch/namespaces/ns/pods/p", None, "watch", "", "v1", "ns", "pods", "p", ""),
            (Method::PATCH, "/api/v1/nodes/n1/status", None, "patch", "", "v1", "", "nodes", "n1", "status"),
        ];
        for (m, path, q, verb, g, v, ns, res, name, sub) in cases {
            let i = resolve(m, path, *q);
            assert!(i.is_resource_request, "{path}");
            assert_eq!(
                (i.verb.as_str(), i.api_group.as_str(), i.api_version.as_str(), i.namespace.as_str(), i.resource.as_str(), i.name.as_str(), i.subresource.as_str()),
                (*verb, *g, *v, *ns, *res, *name, *sub),
                "{m} {path}"
            );
        }
        for path in ["/api", "/api/v1", "/apis/apps/v1", "/version", "/healthz"] {
            let i = resolve(&Method::GET, path, None);
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, "get");
        }
    }
}
