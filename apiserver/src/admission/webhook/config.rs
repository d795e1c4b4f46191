//! Webhook configurations compiled for calling: one [`Hook`] per entry of
//! `webhooks` of every Mutating- or ValidatingWebhookConfiguration, in the
//! order kube calls them (configurations by name, then each one's webhooks
//! in order; kube's `mutatingWebhookConfigurationManager` sorts the same
//! way), with its match conditions compiled and its HTTPS client built.
//!
//! [`Hooks::current`] compiles from the admission feed's copy of the
//! configurations ([`Sources`]) once per change of that copy: the copy is
//! the same `Arc` until a configuration changes, and a configuration whose
//! uid and resourceVersion did not change keeps its compiled hooks (and so
//! its clients' pooled connections) into the next generation. Nothing is
//! compiled or built per request.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::Value;

use super::review::Version;
use super::service::ServiceResolver;
use crate::admission::sources::{Snapshot, Sources};
use crate::cel::Program;
use crate::meta;
use crate::webhook::Client;

/// The API group of webhook configurations.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// Where a webhook is reached (`clientConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `url`.
    Url(String),
    /// `service`: namespace, name, path, port (443 when not given).
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The path posted to (`/` when not given).
        path: String,
        /// The Service port.
        port: u16,
    },
    /// Neither (refused by validation; answered with kube's message).
    Missing,
}

impl Endpoint {
    /// The URL posted to, before the `?timeout=` kube adds: `url` as given,
    /// or `https://<name>.<namespace>.svc:<port><path>`.
    pub fn base_url(&self) -> String {
        match self {
            Endpoint::Url(u) => u.clone(),
            Endpoint::Service { namespace, name, path, port } => format!("https://{name}.{namespace}.svc:{port}{path}"),
            Endpoint::Missing => String::new(),
        }
    }
}

/// One match condition: its name and compiled expression (or the
/// compilation error, reported when it is evaluated, as kube does).
pub struct Condition {
    /// `name`.
    pub name: String,
    /// The expression as written.
    pub expression: String,
    /// The program, or kube's `compilation error: …`.
    pub program: Result<Program, String>,
}

/// One webhook, ready to call.
pub struct Hook {
    /// `webhooks[].name`.
    pub name: String,
    /// The configuration's name.
    pub configuration: String,
    /// `<configuration>/<webhook>/<index in the configuration>`: which
    /// webhook this is across reinvocation (kube's `GetUID`).
    pub id: String,
    /// `rules` (RuleWithOperations).
    pub rules: Vec<Value>,
    /// `matchPolicy: Equivalent` (the default).
    pub equivalent: bool,
    /// `namespaceSelector` (absent: everything).
    pub namespace_selector: Value,
    /// `objectSelector` (absent: everything).
    pub object_selector: Value,
    /// `matchConditions`, in order.
    pub conditions: Vec<Condition>,
    /// Whether a match condition names `authorizer` (evaluated where it
    /// may wait for the authorizer).
    pub conditions_use_authorizer: bool,
    /// `failurePolicy: Ignore` (the default is Fail).
    pub fail_open: bool,
    /// `timeoutSeconds` (default 10, at most 30).
    pub timeout: Duration,
    /// `sideEffects` is `None` or `NoneOnDryRun`: may be called for a
    /// dry run.
    pub dry_run_safe: bool,
    /// The AdmissionReview version sent (first known of
    /// `admissionReviewVersions`), or none.
    pub version: Option<Version>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke_if_needed: bool,
    /// Where it is reached.
    pub endpoint: Endpoint,
    /// Its HTTPS client, or why there is none (an unusable `caBundle`).
    pub client: Result<Client, String>,
}

impl Hook {
    /// Compiles `webhook`, entry `index` of the configuration `configuration`.
    pub(super) fn compile(configuration: &str, index: usize, webhook: &Value, mutating: bool, resolver: &Arc<ServiceResolver>) -> Hook {
        let name = webhook["name"].as_str().unwrap_or_default().to_string();
        let cc = &webhook["clientConfig"];
        let endpoint = if let Some(u) = cc["url"].as_str().filter(|u| !u.is_empty()) {
            Endpoint::Url(u.to_string())
        } else if cc["service"].is_object() {
            let s = &cc["service"];
            let path = s["path"].as_str().unwrap_or_default();
            Endpoint::Service {
                namespace: s["namespace"].as_str().unwrap_or_default().to_string(),
                name: s["name"].as_str().unwrap_or_default().to_string(),
                path: if path.is_empty() { "/".into() } else { path.to_string() },
                port: s["port"].as_u64().and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
            }
        } else {
            Endpoint::Missing
        };
        let client = base64::engine::general_purpose::STANDARD.decode(cc["caBundle"].as_str().unwrap_or_default()).map_err(|e| format!("caBundle: {e}")).and_then(|ca| {
            let resolver = matches!(endpoint, Endpoint::Service { .. }).then(|| resolver.clone() as Arc<dyn crate::webhook::Resolve>);
            Client::for_admission(&ca, resolver).map_err(|e| e.to_string())
        });
        let conditions: Vec<Condition> = webhook["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let expression = c["expression"].as_str().unwrap_or_default().to_string();
                Condition { name: c["name"].as_str().unwrap_or_default().to_string(), program: Program::compile(&expression).map_err(|e| format!("compilation error: {e}")), expression }
            })
            .collect();
        let side_effects = webhook["sideEffects"].as_str().unwrap_or_default();
        let conditions_use_authorizer = conditions.iter().any(|c| c.program.as_ref().is_ok_and(|p| p.references_variable("authorizer")));
        Hook {
            conditions_use_authorizer,
            id: format!("{configuration}/{name}/{index}"),
            configuration: configuration.to_string(),
            rules: webhook["rules"].as_array().cloned().unwrap_or_default(),
            equivalent: webhook["matchPolicy"].as_str() != Some("Exact"),
            namespace_selector: webhook["namespaceSelector"].clone(),
            object_selector: webhook["objectSelector"].clone(),
            conditions,
            fail_open: webhook["failurePolicy"].as_str() == Some("Ignore"),
            timeout: Duration::from_secs(webhook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
            dry_run_safe: matches!(side_effects, "None" | "NoneOnDryRun"),
            version: Version::pick(&webhook["admissionReviewVersions"]),
            reinvoke_if_needed: mutating && webhook["reinvocationPolicy"].as_str() == Some("IfNeeded"),
            endpoint,
            client,
            name,
        }
    }
}

/// The hooks of one copy of the configurations.
pub struct Generation {
    snapshot: Snapshot,
    /// Every webhook, in calling order.
    pub hooks: Vec<Arc<Hook>>,
    /// The operations some rule of some hook names (`*` names all).
    operations: HashSet<String>,
    /// The hooks of each configuration, by (uid, resourceVersion), for the
    /// next generation to keep.
    by_config: HashMap<(String, String), Vec<Arc<Hook>>>,
}

/// The webhooks of one kind of configuration, compiled per generation.
pub struct Hooks {
    sources: Arc<Sources>,
    authorizer: Arc<dyn crate::authz::Authorizer>,
    resource: &'static str,
    mutating: bool,
    resolver: Arc<ServiceResolver>,
    current: Mutex<Option<Arc<Generation>>>,
}

impl Hooks {
    /// The hooks of `mutatingwebhookconfigurations` (`mutating`) or
    /// `validatingwebhookconfigurations`, read from `sources`; match
    /// conditions ask `authorizer`.
    pub fn new(sources: Arc<Sources>, authorizer: Arc<dyn crate::authz::Authorizer>, mutating: bool) -> Hooks {
        let resource = if mutating { "mutatingwebhookconfigurations" } else { "validatingwebhookconfigurations" };
        Hooks { resolver: Arc::new(ServiceResolver::new(sources.clone())), sources, authorizer, resource, mutating, current: Mutex::new(None) }
    }

    /// The authorizer of match conditions' `authorizer`.
    pub fn authorizer(&self) -> &Arc<dyn crate::authz::Authorizer> {
        &self.authorizer
    }

    /// The copies the hooks must have complete before they decide: the
    /// configurations and the namespaces (for `namespaceSelector`).
    pub fn needs(&self) -> [(&'static str, &'static str); 2] {
        [(GROUP, self.resource), ("", "namespaces")]
    }

    /// The sources the hooks read (namespaces, services, endpointslices).
    pub fn sources(&self) -> &Arc<Sources> {
        &self.sources
    }

    /// The hooks of the configurations as the feed last saw them, compiled
    /// once per change.
    pub fn current(&self) -> Arc<Generation> {
        let snapshot = self.sources.snapshot(GROUP, self.resource);
        let mut current = self.current.lock();
        if let Some(g) = current.as_ref() {
            if Arc::ptr_eq(&g.snapshot, &snapshot) || (g.snapshot.is_empty() && snapshot.is_empty()) {
                return g.clone();
            }
        }
        let g = Arc::new(self.compile(snapshot, current.as_deref()));
        *current = Some(g.clone());
        g
    }

    fn compile(&self, snapshot: Snapshot, previous: Option<&Generation>) -> Generation {
        let mut hooks = Vec::new();
        let mut by_config = HashMap::new();
        // Informer keys of cluster-scoped objects are their names: the map
        // is in name order already.
        for config in snapshot.values() {
            let key = (meta::meta_str(config, "uid").to_string(), meta::resource_version(config).to_string());
            let compiled = match previous.and_then(|p| p.by_config.get(&key)) {
                Some(kept) => kept.clone(),
                None => {
                    let name = meta::name(config);
                    config["webhooks"].as_array().into_iter().flatten().enumerate().map(|(i, w)| Arc::new(Hook::compile(name, i, w, self.mutating, &self.resolver))).collect()
                }
            };
            hooks.extend(compiled.iter().cloned());
            by_config.insert(key, compiled);
        }
        let operations = hooks.iter().flat_map(|h| h.rules.iter()).flat_map(|r| r["operations"].as_array().cloned().unwrap_or_default()).filter_map(|o| o.as_str().map(str::to_string)).collect();
        Generation { snapshot, hooks, by_config, operations }
    }

    /// Whether some webhook may be called for `op`: some rule names it,
    /// or the configurations are not all in yet (the request then waits
    /// for them). Writes skip the plugin otherwise, so that a server
    /// without webhooks builds no admission attributes for them.
    pub fn handles(&self, op: crate::admission::Operation) -> bool {
        // Until the copies are complete every operation waits in the
        // plugin (and is refused if they stay incomplete).
        if !self.sources.ready(&self.needs()) {
            return true;
        }
        let g = self.current();
        g.operations.contains("*") || g.operations.contains(op.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::sources::Fixed;
    use serde_json::json;

    fn config(name: &str, rv: &str, hooks: &[&str]) -> Value {
        let webhooks: Vec<Value> = hooks
            .iter()
            .map(|h| json!({"name": h, "admissionReviewVersions": ["v1"], "sideEffects": "None", "clientConfig": {"url": "https://127.0.0.1:1/x"}, "rules": [], "timeoutSeconds": 3, "reinvocationPolicy": "IfNeeded"}))
            .collect();
        json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv}, "webhooks": webhooks})
    }

    #[test]
    fn hooks_are_in_kubes_order_and_kept_while_unchanged() {
        let sources = Sources::new();
        sources.set(GROUP, "mutatingwebhookconfigurations", Fixed::of([config("b", "1", &["b1"]), config("a", "1", &["a2", "a1"])]));
        let hooks = Hooks::new(sources.clone(), Arc::new(crate::authz::Union::new(Vec::new())), true);
        assert!(hooks.handles(crate::admission::Operation::Create), "no namespaces yet: every write waits in the plugin");
        sources.set("", "namespaces", Fixed::of([]));
        let g1 = hooks.current();
        let names: Vec<&str> = g1.hooks.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["a2", "a1", "b1"]);
        assert_eq!(g1.hooks[1].id, "a/a1/1");
        assert_eq!((g1.hooks[0].timeout, g1.hooks[0].reinvoke_if_needed, g1.hooks[0].fail_open), (Duration::from_secs(3), true, false));
        assert!(Arc::ptr_eq(&g1, &hooks.current()), "the same copy compiles once");
        assert!(!hooks.handles(crate::admission::Operation::Create), "no rule names an operation");
        // b changes: a's hooks are kept, b's compiled again.
        sources.set(GROUP, "mutatingwebhookconfigurations", Fixed::of([config("b", "2", &["b1"]), config("a", "1", &["a2", "a1"])]));
        let g2 = hooks.current();
        assert!(!Arc::ptr_eq(&g1, &g2));
        assert!(Arc::ptr_eq(&g1.hooks[0], &g2.hooks[0]) && !Arc::ptr_eq(&g1.hooks[2], &g2.hooks[2]));
        let mut c = config("c", "1", &["c1"]);
        c["webhooks"][0]["rules"] = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]);
        sources.set(GROUP, "mutatingwebhookconfigurations", Fixed::of([c]));
        assert!(hooks.handles(crate::admission::Operation::Create) && !hooks.handles(crate::admission::Operation::Delete));
    }

    #[test]
    fn service_references_get_kubes_defaults() {
        let w = json!({"name": "s", "clientConfig": {"service": {"namespace": "ns", "name": "svc"}}});
        let h = Hook::compile("c", 0, &w, false, &Arc::new(ServiceResolver::new(Sources::new())));
        assert_eq!(h.endpoint.base_url(), "https://svc.ns.svc:443/");
        assert_eq!((h.timeout, h.fail_open, h.equivalent, h.version, h.dry_run_safe), (Duration::from_secs(10), false, true, None, false));
    }
}
