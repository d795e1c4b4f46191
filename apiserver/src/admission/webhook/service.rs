//! Webhook services: `clientConfig.service` resolved through the Service
//! and its EndpointSlices in the admission feed's copies.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use serde_json::Value;

use crate::admission::sources::Sources;
use crate::errors::go_quote;
use crate::webhook;

/// Resolves `<name>.<namespace>.svc` through the Service and its
/// EndpointSlices in the admission feed's copies, as kube-apiserver
/// resolves webhook services (kube `proxy.ResolveEndpoint`): the Service
/// port equal to the port asked for, then a ready endpoint of a slice whose
/// port has that Service port's name; the slice port's number is dialed.
pub struct ServiceResolver {
    sources: Arc<Sources>,
}

impl ServiceResolver {
    /// A resolver over `sources` (`services`, `endpointslices`).
    pub fn new(sources: Arc<Sources>) -> Self {
        ServiceResolver { sources }
    }
}

impl webhook::Resolve for ServiceResolver {
    fn resolve(&self, host: &str, port: u16) -> Option<Result<SocketAddr, String>> {
        let (name, namespace) = host.strip_suffix(".svc")?.split_once('.')?;
        Some(resolve_endpoint(&self.sources, namespace, name, port))
    }
}

/// The address of a ready endpoint of Service `namespace/name` for its
/// port `port`.
///
/// # Errors
/// kube's words: `service "x" not found`, `unsupported service type "…"`,
/// `no service port 443 found for service "x"`, `no endpoints available
/// for service "x"`.
pub fn resolve_endpoint(sources: &Sources, namespace: &str, name: &str, port: u16) -> Result<SocketAddr, String> {
    let svc = sources.object("", "services", &format!("{namespace}/{name}")).ok_or_else(|| format!("service {} not found", go_quote(name)))?;
    let kind = svc["spec"]["type"].as_str().unwrap_or("ClusterIP");
    if !matches!(kind, "ClusterIP" | "LoadBalancer" | "NodePort") {
        return Err(format!("unsupported service type {}", go_quote(kind)));
    }
    let no_endpoints = || format!("no endpoints available for service {}", go_quote(name));
    let svc_port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service {}", go_quote(name)))?;
    let port_name = svc_port["name"].as_str().unwrap_or_default();
    let slices = sources.snapshot("discovery.k8s.io", "endpointslices");
    let prefix = format!("{namespace}/");
    let ours: Vec<&Arc<Value>> =
        slices.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)).map(|(_, s)| s).filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"].as_str() == Some(name)).collect();
    if ours.is_empty() {
        return Err(no_endpoints());
    }
    for slice in ours {
        // An unnamed slice port stands for the unnamed service port.
        let Some(slice_port) = slice["ports"].as_array().into_iter().flatten().find(|p| p["name"].as_str().unwrap_or_default() == port_name).and_then(|p| p["port"].as_u64()) else { continue };
        let Ok(slice_port) = u16::try_from(slice_port) else { continue };
        for ep in slice["endpoints"].as_array().into_iter().flatten() {
            if ep["conditions"]["ready"].as_bool() == Some(false) {
                continue;
            }
            if let Some(ip) = ep["addresses"][0].as_str().and_then(|a| a.parse::<IpAddr>().ok()) {
                return Ok(SocketAddr::new(ip, slice_port));
            }
        }
    }
    Err(no_endpoints())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::sources::Fixed;
    use serde_json::json;

    #[test]
    fn services_resolve_to_ready_endpoints_with_kubes_errors() {
        let sources = Sources::new();
        sources.set("", "services", Fixed::of([json!({"metadata": {"name": "hook", "namespace": "ns"}, "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]}})]));
        let slice = |name: &str, svc: &str, ready: bool, ip: &str| {
            json!({"metadata": {"name": name, "namespace": "ns", "labels": {"kubernetes.io/service-name": svc}},
                "ports": [{"name": "https", "port": 9443}], "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}]})
        };
        sources.set("discovery.k8s.io", "endpointslices", Fixed::of([slice("a", "hook", false, "10.0.0.1"), slice("b", "hook", true, "127.0.0.1"), slice("c", "other", true, "10.0.0.3")]));
        assert_eq!(resolve_endpoint(&sources, "ns", "hook", 443), Ok("127.0.0.1:9443".parse().unwrap_or_else(|e| panic!("{e}"))));
        assert_eq!(resolve_endpoint(&sources, "ns", "hook", 80), Err(r#"no service port 80 found for service "hook""#.into()));
        assert_eq!(resolve_endpoint(&sources, "ns", "nope", 443), Err(r#"service "nope" not found"#.into()));
        sources.set("discovery.k8s.io", "endpointslices", Fixed::of([slice("a", "hook", false, "10.0.0.1")]));
        assert_eq!(resolve_endpoint(&sources, "ns", "hook", 443), Err(r#"no endpoints available for service "hook""#.into()));
        use crate::webhook::Resolve as _;
        let r = ServiceResolver::new(sources.clone());
        assert!(r.resolve("example.com", 443).is_none());
        assert_eq!(r.resolve("hook.ns.svc", 443), Some(Err(r#"no endpoints available for service "hook""#.into())));
    }
}
