//! `ResourceQuota` (kube `plugin/pkg/admission/resourcequota` and the
//! evaluators of `pkg/quota/v1/evaluator/core`): the last validating
//! plugin, which refuses a write that would take a namespace over one of
//! its ResourceQuotas and charges the quotas for the writes it lets
//! through.
//!
//! ## What is counted ([`usage`])
//!
//! | resource | names |
//! |---|---|
//! | pods | `pods` (not terminal), `count/pods`, `cpu`/`requests.cpu`, `memory`/`requests.memory`, `ephemeral-storage`/`requests.ephemeral-storage`, `limits.*`, `hugepages-*`, `requests.<extended>` (from [`super::pod_resources`], overhead included) |
//! | services | `services`, `count/services`, `services.loadbalancers`, `services.nodeports` |
//! | persistentvolumeclaims | `persistentvolumeclaims`, `count/persistentvolumeclaims`, `requests.storage`, `<class>.storageclass.storage.k8s.io/persistentvolumeclaims` and `.../requests.storage` |
//! | configmaps, secrets, replicationcontrollers, resourcequotas | the resource's name and `count/<resource>` |
//! | anything else | `count/<resource>.<group>` (`count/<resource>` in the core group) |
//!
//! Creates are charged; updates of services and claims are charged what
//! they add (never a refund); pod updates are not (kube charges them only
//! through the `resize` subresource, not served here). Events and subresources are not
//! counted. Quota `scopes` and `scopeSelector` (Terminating,
//! NotTerminating, BestEffort, NotBestEffort, PriorityClass,
//! CrossNamespacePodAffinity) select pods; a scoped quota matches nothing
//! else.
//!
//! ## The check and the charge
//!
//! A quota takes part when its `status.hard` names a resource the object
//! uses (kube enforces `status.hard`, which the quota controller copies
//! from `spec.hard`). Refusals are 403 in kube's words, prefixed as kube's
//! `admission.NewForbidden` does: `pods "x" is forbidden: exceeded quota:
//! q, requested: pods=1, used: pods=5, limited: pods=5`; `failed quota: q:
//! must specify limits.cpu for: app`; `status unknown for quota: q,
//! resources: pods` (the controller has not filled `status.used` yet).
//!
//! The charge is an optimistic-concurrency update of each quota, in name
//! order: the storage's guaranteed update on the quota's key reads the
//! quota, checks `used + requested <= hard` on what it read, and writes the
//! new `status.used` only if the quota's revision is still the one read;
//! when another write won the race it reads again and checks again. So
//! concurrent creates never take `used` past `hard`, on any node. When a
//! later quota refuses, the quotas charged before it are given their charge
//! back. Dry runs check against the current quota without charging.
//!
//! The charge happens before the object is written. When the write then
//! fails (the name is taken, the store is down), the charge stays until the
//! quota controller (`controllers::resource_quota`) recounts the namespace
//! — kube has the same window, closed the same way. Deletes are not
//! refunded here either: the controller recounts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::lookup;
use super::pod_resources::{self, ResourceList, Side};
use super::sources::Sources;
use super::{Attributes, Operation, Validating};
use crate::errors::Status;
use crate::meta;
use crate::quantity::{self, Quantity};
use crate::storage::{keys, Storage, Update};

/// The suffix of per-StorageClass claim resources.
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// The core resources whose bare name is also a quota resource.
const LEGACY_COUNTED: &[&str] = &["configmaps", "secrets", "replicationcontrollers", "resourcequotas"];

/// Pod compute resources with names of their own.
const POD_RESOURCES: &[&str] =
    &["pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage"];

/// The resources kube makes every container name when a quota limits them.
const MUST_SPECIFY: &[&str] = &["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];

/// The `count/...` name of a resource.
pub fn count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// Which objects a quota resource name counts: (group, resource), or
/// `None` for names no evaluator knows.
pub fn counted_resource(name: &str) -> Option<(String, String)> {
    let core = |r: &str| Some((String::new(), r.to_string()));
    if let Some(rest) = name.strip_prefix("count/") {
        return Some(match rest.split_once('.') {
            Some((r, g)) => (g.to_string(), r.to_string()),
            None => (String::new(), rest.to_string()),
        });
    }
    if POD_RESOURCES.contains(&name) || name.starts_with("hugepages-") || name.starts_with("requests.hugepages-") || (name.starts_with("requests.") && name.contains('/')) {
        return core("pods");
    }
    if name.starts_with("services") {
        return core("services");
    }
    if name == "persistentvolumeclaims" || name == "requests.storage" || name.contains(STORAGE_CLASS_SUFFIX) {
        return core("persistentvolumeclaims");
    }
    if LEGACY_COUNTED.contains(&name) {
        return core(name);
    }
    None
}

/// Whether quota resource `name` is one the evaluator of `group`/`resource`
/// measures (kube's `MatchingResources`).
fn measures(group: &str, resource: &str, name: &str) -> bool {
    counted_resource(name).is_some_and(|(g, r)| g == group && r == resource)
}

/// Whether kube's evaluator of `group`/`resource` looks at `op`.
fn handles(group: &str, resource: &str, op: Operation) -> bool {
    match op {
        Operation::Create => true,
        Operation::Update => group.is_empty() && matches!(resource, "services" | "persistentvolumeclaims"),
        _ => false,
    }
}

fn one() -> Quantity {
    Quantity::from_int(1)
}

/// Whether a Pod counts as running for quota (kube's `QuotaV1Pod`): not
/// Succeeded or Failed, and not past its deletion grace period.
pub fn pod_is_live(pod: &Value, now: std::time::SystemTime) -> bool {
    if matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
        return false;
    }
    let deleting = pod["metadata"]["deletionTimestamp"].as_str().and_then(meta::parse_time);
    if let (Some(at), Some(grace)) = (deleting, pod["metadata"]["deletionGracePeriodSeconds"].as_u64()) {
        if now > at + std::time::Duration::from_secs(grace) {
            return false;
        }
    }
    true
}

/// kube's `podComputeUsageHelper`.
fn pod_compute(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("pods".into(), one());
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.into(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (k, q) in requests {
        if k.starts_with("hugepages-") {
            out.insert(k.clone(), *q);
            out.insert(format!("requests.{k}"), *q);
        } else if k.contains('/') && !k.starts_with("kubernetes.io/") && !k.starts_with("requests.") {
            out.insert(format!("requests.{k}"), *q);
        }
    }
    out
}

/// What `obj` of `group`/`resource` uses, by quota resource name.
pub fn usage(group: &str, resource: &str, obj: &Value) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert(count_name(group, resource), one());
    if !group.is_empty() {
        return out;
    }
    match resource {
        "pods" if pod_is_live(obj, std::time::SystemTime::now()) => {
            let (requests, limits) = (pod_resources::pod(obj, Side::Requests, true), pod_resources::pod(obj, Side::Limits, true));
            out.extend(pod_compute(&requests, &limits));
        }
        "services" => {
            out.insert("services".into(), one());
            out.insert("services.loadbalancers".into(), Quantity::ZERO);
            out.insert("services.nodeports".into(), Quantity::ZERO);
            let ports = Quantity::from_int(obj["spec"]["ports"].as_array().map_or(0, Vec::len) as i64);
            match obj["spec"]["type"].as_str() {
                Some("NodePort") => {
                    out.insert("services.nodeports".into(), ports);
                }
                Some("LoadBalancer") => {
                    out.insert("services.loadbalancers".into(), one());
                    if obj["spec"]["allocateLoadBalancerNodePorts"] != false {
                        out.insert("services.nodeports".into(), ports);
                    }
                }
                _ => {}
            }
        }
        "persistentvolumeclaims" => {
            out.insert("persistentvolumeclaims".into(), one());
            let class = obj["spec"]["storageClassName"].as_str().or_else(|| obj["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"].as_str()).unwrap_or("");
            if !class.is_empty() {
                out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"), one());
            }
            let requested = Quantity::from_json(&obj["spec"]["resources"]["requests"]["storage"]).ok();
            let allocated = Quantity::from_json(&obj["status"]["allocatedResources"]["storage"]).ok();
            let storage = match (requested, allocated) {
                (Some(r), Some(a)) => Some(r.max(a)),
                (r, a) => r.or(a),
            };
            if let Some(s) = storage {
                out.insert("requests.storage".into(), s);
                if !class.is_empty() {
                    out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"), s);
                }
            }
        }
        r if LEGACY_COUNTED.contains(&r) => {
            out.insert(r.to_string(), one());
        }
        _ => {}
    }
    out
}

/// A quota's scope requirements: (scope, operator, values).
fn scope_selectors(quota: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>)> =
        quota["spec"]["scopes"].as_array().into_iter().flatten().filter_map(Value::as_str).map(|s| (s.to_string(), "Exists".to_string(), Vec::new())).collect();
    for e in quota["spec"]["scopeSelector"]["matchExpressions"].as_array().into_iter().flatten() {
        let values = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
        out.push((e["scopeName"].as_str().unwrap_or("").to_string(), e["operator"].as_str().unwrap_or("").to_string(), values));
    }
    out
}

fn is_best_effort(pod: &Value) -> bool {
    let spec = &pod["spec"];
    ["containers", "initContainers"].iter().flat_map(|l| spec[*l].as_array().into_iter().flatten()).all(|c| {
        let has = |side: &str| {
            let list = &c["resources"][side];
            ["cpu", "memory"].iter().any(|r| list.get(*r).is_some_and(|v| !v.is_null()))
        };
        !has("requests") && !has("limits")
    })
}

fn has_cross_namespace_affinity(pod: &Value) -> bool {
    let affinity = &pod["spec"]["affinity"];
    let terms = ["podAffinity", "podAntiAffinity"].iter().flat_map(|kind| {
        let a = &affinity[*kind];
        let required = a["requiredDuringSchedulingIgnoredDuringExecution"].as_array().into_iter().flatten();
        let preferred = a["preferredDuringSchedulingIgnoredDuringExecution"].as_array().into_iter().flatten().map(|w| &w["podAffinityTerm"]);
        required.chain(preferred).collect::<Vec<_>>()
    });
    terms.into_iter().any(|t| t["namespaces"].as_array().is_some_and(|n| !n.is_empty()) || t["namespaceSelector"].is_object())
}

/// Whether the scope requirement selects `pod` (kube's
/// `podMatchesScopeFunc`).
fn pod_matches_scope(pod: &Value, scope: &str, operator: &str, values: &[String]) -> bool {
    let selected = match scope {
        "Terminating" => pod["spec"]["activeDeadlineSeconds"].as_i64().is_some_and(|s| s >= 0),
        "NotTerminating" => pod["spec"]["activeDeadlineSeconds"].as_i64().is_none_or(|s| s < 0),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "CrossNamespacePodAffinity" => has_cross_namespace_affinity(pod),
        "PriorityClass" => {
            let class = pod["spec"]["priorityClassName"].as_str().unwrap_or("");
            return match operator {
                "Exists" => !class.is_empty(),
                "DoesNotExist" => class.is_empty(),
                "In" => values.iter().any(|v| v == class),
                "NotIn" => !values.iter().any(|v| v == class),
                _ => false,
            };
        }
        _ => return false,
    };
    match operator {
        "Exists" | "In" => selected,
        "DoesNotExist" | "NotIn" => !selected,
        _ => false,
    }
}

/// Whether `quota`'s scopes select `obj` of `group`/`resource` (no scopes:
/// everything; scopes: pods only).
pub fn scopes_match(quota: &Value, group: &str, resource: &str, obj: &Value) -> bool {
    let scopes = scope_selectors(quota);
    if scopes.is_empty() {
        return true;
    }
    group.is_empty() && resource == "pods" && scopes.iter().all(|(s, op, v)| pod_matches_scope(obj, s, op, v))
}

/// kube's `prettyPrint`: `a=1,b=2`, sorted.
fn pretty(list: &ResourceList) -> String {
    list.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

fn mask(list: &ResourceList, names: &BTreeSet<String>) -> ResourceList {
    list.iter().filter(|(k, _)| names.contains(*k)).map(|(k, v)| (k.clone(), *v)).collect()
}

/// kube's pod `Constraints`: with cpu or memory quota'd, every container
/// must name them. `None` when they do.
fn pod_constraints(pod: &Value, required: &BTreeSet<String>) -> Option<String> {
    let required: BTreeSet<&str> = required.iter().map(String::as_str).filter(|r| MUST_SPECIFY.contains(r)).collect();
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            let have = pod_compute(&pod_resources::container(c, Side::Requests), &pod_resources::container(c, Side::Limits));
            for r in &required {
                if !have.contains_key(*r) {
                    missing.entry(r).or_default().insert(c["name"].as_str().unwrap_or("").to_string());
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing.iter().map(|(r, names)| format!("{r} for: {}", names.iter().cloned().collect::<Vec<_>>().join(","))).collect();
    Some(format!("must specify {}", parts.join("; ")))
}

/// The usage an update adds: new minus old, never below zero (kube's
/// `SubtractWithNonNegativeResult`).
fn added_usage(new: &ResourceList, old: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    for (k, v) in new {
        let d = old.get(k).map_or(*v, |o| v.sub(o));
        out.insert(k.clone(), if d.sign() > 0 { d } else { Quantity::ZERO });
    }
    for k in old.keys() {
        out.entry(k.clone()).or_insert(Quantity::ZERO);
    }
    out
}

/// The plugin.
pub struct ResourceQuota {
    storage: Arc<dyn Storage>,
    sources: Arc<Sources>,
}

/// What a write asks of the quotas.
struct Request<'a> {
    group: &'a str,
    resource: &'a str,
    object: &'a Value,
    /// The usage it adds.
    delta: &'a ResourceList,
}

/// How one quota is to change.
enum Charge<'a> {
    /// Check the write against the quota and charge it.
    Take(&'a Request<'a>),
    /// Give back what an earlier [`Charge::Take`] charged.
    GiveBack(&'a ResourceList),
}

/// kube's `checkRequest` for one quota as stored: `Ok(None)` when the quota
/// does not govern the write, else the new `status.used`.
fn check(attrs: &Attributes<'_>, quota: &Value, req: &Request<'_>) -> Result<Option<(ResourceList, ResourceList)>, Status> {
    let name = meta::name(quota);
    let hard = quantity::list(&quota["status"]["hard"]);
    let restricted: BTreeSet<String> = hard.keys().filter(|k| measures(req.group, req.resource, k)).cloned().collect();
    if restricted.is_empty() || !scopes_match(quota, req.group, req.resource, req.object) {
        return Ok(None);
    }
    if req.group.is_empty() && req.resource == "pods" {
        if let Some(why) = pod_constraints(req.object, &restricted) {
            return Err(lookup::forbidden(attrs, &format!("failed quota: {name}: {why}")));
        }
    }
    let used = quantity::list(&quota["status"]["used"]);
    let unknown: Vec<&str> = restricted.iter().filter(|r| !used.contains_key(*r)).map(String::as_str).collect();
    if !unknown.is_empty() {
        return Err(lookup::forbidden(attrs, &format!("status unknown for quota: {name}, resources: {}", unknown.join(","))));
    }
    let requested = mask(req.delta, &restricted);
    let mut new_used = used.clone();
    for (k, v) in &requested {
        let after = used.get(k).map_or(*v, |u| u.add(v));
        new_used.insert(k.clone(), after);
    }
    let exceeded: BTreeSet<String> = requested.keys().filter(|k| new_used.get(*k) > hard.get(*k)).cloned().collect();
    if !exceeded.is_empty() {
        let why = format!("exceeded quota: {name}, requested: {}, used: {}, limited: {}", pretty(&mask(&requested, &exceeded)), pretty(&mask(&used, &exceeded)), pretty(&mask(&hard, &exceeded)));
        return Err(lookup::forbidden(attrs, &why));
    }
    Ok(Some((requested, new_used)))
}

/// `quota` with `status.used` set to `used` (other entries kept).
fn with_used(mut quota: Value, used: &ResourceList) -> Value {
    if let Some(q) = quota.as_object_mut() {
        let status = q.entry("status").or_insert_with(|| Value::Object(Map::new()));
        if !status.is_object() {
            *status = Value::Object(Map::new());
        }
        let mut used_json = status["used"].as_object().cloned().unwrap_or_default();
        for (k, v) in used {
            used_json.insert(k.clone(), Value::from(*v));
        }
        status["used"] = Value::Object(used_json);
    }
    quota
}

impl ResourceQuota {
    /// The plugin over the quotas of `sources` (or `storage`, when the copy
    /// has none for a namespace); charges are written to `storage`.
    pub fn new(storage: Arc<dyn Storage>, sources: Arc<Sources>) -> Self {
        ResourceQuota { storage, sources }
    }

    /// Applies `charge` to quota `name`: an optimistic-concurrency update
    /// whose every attempt decides on the quota as it reads it. Returns
    /// what was charged (`None`: the quota does not govern the write, or
    /// is gone). A dry run decides on the current quota and writes
    /// nothing.
    async fn apply(&self, attrs: &Attributes<'_>, name: &str, charge: Charge<'_>, dry_run: bool) -> Result<Option<ResourceList>, Status> {
        let key = keys::object("", "resourcequotas", Some(attrs.namespace), name);
        let mut taken: Option<ResourceList> = None;
        let mut step = |current: Option<Value>| -> Result<Update, Status> {
            taken = None;
            let Some(quota) = current else { return Ok(Update::Unchanged) };
            let used = match &charge {
                Charge::Take(req) => match check(attrs, &quota, req)? {
                    Some((requested, used)) => {
                        taken = Some(requested);
                        used
                    }
                    None => return Ok(Update::Unchanged),
                },
                Charge::GiveBack(given) => {
                    let mut used = quantity::list(&quota["status"]["used"]);
                    for (k, v) in given.iter() {
                        if let Some(u) = used.get_mut(k) {
                            let left = u.sub(v);
                            *u = if left.sign() < 0 { Quantity::ZERO } else { left };
                        }
                    }
                    used
                }
            };
            if dry_run || used == quantity::list(&quota["status"]["used"]) {
                return Ok(Update::Unchanged);
            }
            Ok(Update::Put(with_used(quota, &used)))
        };
        let r = if dry_run {
            match self.storage.get(&key).await {
                Ok(q) => step(Some(q)).map(|_| ()),
                Err(crate::storage::Error::NotFound) => Ok(()),
                Err(e) => Err(Status::internal(e)),
            }
        } else {
            match self.storage.guaranteed_update(&key, &Default::default(), &mut step).await {
                Ok(_) | Err(crate::storage::Error::NotFound) => Ok(()),
                Err(crate::storage::Error::Aborted(s)) => Err(*s),
                Err(e) => Err(Status::internal(e)),
            }
        };
        r.map(|()| taken)
    }
}

#[async_trait]
impl Validating for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let (group, resource) = (attrs.resource.group, attrs.resource.resource);
        if !attrs.subresource.is_empty() || attrs.namespace.is_empty() || !handles(group, resource, attrs.operation) {
            return Ok(());
        }
        if resource == "events" && (group.is_empty() || group == "events.k8s.io") {
            return Ok(());
        }
        let Some(obj) = attrs.object.as_ref() else { return Ok(()) };
        let mut names: Vec<String> = lookup::list(&self.sources, self.storage.as_ref(), "", "resourcequotas", attrs.namespace)
            .await?
            .iter()
            .filter(|q| meta::namespace(q) == attrs.namespace)
            .map(|q| meta::name(q).to_string())
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        names.sort();
        let mut delta = usage(group, resource, obj);
        let negative: Vec<&str> = delta.iter().filter(|(_, v)| v.sign() < 0).map(|(k, _)| k.as_str()).collect();
        if !negative.is_empty() {
            return Err(lookup::forbidden(attrs, &format!("quota usage is negative for resource(s): {}", negative.join(","))));
        }
        if attrs.operation == Operation::Update {
            match attrs.old_object {
                Some(old) if !meta::resource_version(old).is_empty() => delta = added_usage(&delta, &usage(group, resource, old)),
                Some(_) => {}
                None => return Err(lookup::forbidden(attrs, "unable to get previous usage since prior version of object was not found")),
            }
        }
        if delta.values().all(Quantity::is_zero) {
            return Ok(());
        }
        let req = Request { group, resource, object: obj, delta: &delta };
        let mut done: Vec<(&str, ResourceList)> = Vec::new();
        for name in &names {
            match self.apply(attrs, name, Charge::Take(&req), attrs.dry_run).await {
                Ok(Some(taken)) if !attrs.dry_run => done.push((name, taken)),
                Ok(_) => {}
                Err(s) => {
                    for (n, taken) in &done {
                        if let Err(e) = self.apply(attrs, n, Charge::GiveBack(taken), false).await {
                            tracing::warn!("giving back the charge on quota {}/{n}: {}", attrs.namespace, e.message);
                        }
                    }
                    return Err(s);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::sources::Fixed;
    use crate::admission::testing::{MemStorage, Parts};

    fn shown(list: &ResourceList) -> String {
        pretty(list)
    }

    #[test]
    fn usage_of_each_kind() {
        let pod = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi", "example.com/gpu": "1"}, "limits": {"cpu": "500m"}}}]}});
        assert_eq!(shown(&usage("", "pods", &pod)), "count/pods=1,cpu=250m,limits.cpu=500m,memory=64Mi,pods=1,requests.cpu=250m,requests.example.com/gpu=1,requests.memory=64Mi");
        let done = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Succeeded"}});
        assert_eq!(shown(&usage("", "pods", &done)), "count/pods=1");
        let svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]}});
        assert_eq!(shown(&usage("", "services", &svc)), "count/services=1,services=1,services.loadbalancers=0,services.nodeports=2");
        let pvc = json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            shown(&usage("", "persistentvolumeclaims", &pvc)),
            "count/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/requests.storage=1Gi,persistentvolumeclaims=1,requests.storage=1Gi"
        );
        assert_eq!(shown(&usage("", "configmaps", &json!({}))), "configmaps=1,count/configmaps=1");
        assert_eq!(shown(&usage("apps", "deployments", &json!({}))), "count/deployments.apps=1");
    }

    #[test]
    fn names_map_to_resources() {
        assert_eq!(counted_resource("count/deployments.apps"), Some(("apps".into(), "deployments".into())));
        assert_eq!(counted_resource("count/configmaps"), Some(("".into(), "configmaps".into())));
        assert_eq!(counted_resource("limits.memory"), Some(("".into(), "pods".into())));
        assert_eq!(counted_resource("services.nodeports"), Some(("".into(), "services".into())));
        assert_eq!(counted_resource("gold.storageclass.storage.k8s.io/requests.storage"), Some(("".into(), "persistentvolumeclaims".into())));
        assert_eq!(counted_resource("secrets"), Some(("".into(), "secrets".into())));
        assert_eq!(counted_resource("bogus"), None);
        assert!(measures("", "pods", "count/pods") && !measures("", "pods", "count/configmaps"));
    }

    #[test]
    fn scopes_select_pods() {
        let quota = |scopes: Value| json!({"spec": {"scopes": scopes}});
        let best_effort = json!({"spec": {"containers": [{"name": "a"}]}});
        let burstable = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}], "activeDeadlineSeconds": 30}});
        assert!(scopes_match(&quota(json!(["BestEffort"])), "", "pods", &best_effort));
        assert!(!scopes_match(&quota(json!(["BestEffort"])), "", "pods", &burstable));
        assert!(scopes_match(&quota(json!(["NotBestEffort", "Terminating"])), "", "pods", &burstable));
        assert!(!scopes_match(&quota(json!(["BestEffort"])), "", "configmaps", &json!({})));
        let by_class = json!({"spec": {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        assert!(scopes_match(&by_class, "", "pods", &json!({"spec": {"priorityClassName": "high"}})));
        assert!(!scopes_match(&by_class, "", "pods", &json!({"spec": {"priorityClassName": "low"}})));
    }

    #[test]
    fn constraints_and_deltas() {
        let pod = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        let required: BTreeSet<String> = ["requests.cpu", "limits.memory", "pods"].iter().map(|s| s.to_string()).collect();
        assert_eq!(pod_constraints(&pod, &required).as_deref(), Some("must specify limits.memory for: a,b,i; requests.cpu for: b,i"));
        let q = |s: &str| Quantity::parse(s).unwrap_or(Quantity::ZERO);
        let new: ResourceList = [("a".to_string(), q("3")), ("b".to_string(), q("1"))].into();
        let old: ResourceList = [("a".to_string(), q("1")), ("b".to_string(), q("2")), ("c".to_string(), q("1"))].into();
        assert_eq!(shown(&added_usage(&new, &old)), "a=2,b=0,c=0");
    }

    fn quota(name: &str, hard: Value, used: Option<Value>) -> Value {
        let mut q = json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": hard.clone()}, "status": {"hard": hard}});
        if let Some(u) = used {
            q["status"]["used"] = u;
        }
        q
    }

    fn plugin(quotas: &[Value]) -> (Arc<MemStorage>, Arc<ResourceQuota>) {
        let storage = MemStorage::with(quotas.iter().map(|q| (keys::object("", "resourcequotas", Some("ns"), meta::name(q)), q.clone())));
        let sources = Sources::new();
        sources.set("", "resourcequotas", Fixed::of(quotas.iter().cloned()));
        (storage.clone(), Arc::new(ResourceQuota::new(storage, sources)))
    }

    async fn create_cm(plugin: &ResourceQuota, name: &str, dry_run: bool) -> Result<(), String> {
        let cm = json!({"metadata": {"name": name, "namespace": "ns"}});
        let p = Parts::of(&cm);
        let a = p.attrs(Operation::Create, "configmaps", "ConfigMap", "ns", cm, dry_run);
        plugin.validate(&a).await.map_err(|s| s.message)
    }

    async fn used_of(storage: &MemStorage, name: &str) -> Value {
        storage.get(&keys::object("", "resourcequotas", Some("ns"), name)).await.map(|q| q["status"]["used"].clone()).unwrap_or_default()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_charges_never_overshoot() {
        let (storage, plugin) = plugin(&[quota("q", json!({"count/configmaps": "5"}), Some(json!({"count/configmaps": "0"})))]);
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let plugin = plugin.clone();
                tokio::spawn(async move { (i, create_cm(&plugin, &format!("c{i}"), false).await) })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            let (i, r) = t.await.unwrap_or((0, Err("join".into())));
            match r {
                Ok(()) => admitted += 1,
                Err(m) => assert_eq!(m, format!("configmaps \"c{i}\" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=5, limited: count/configmaps=5")),
            }
        }
        assert_eq!(admitted, 5);
        assert_eq!(used_of(&storage, "q").await, json!({"count/configmaps": "5"}));
    }

    #[tokio::test]
    async fn dry_runs_check_without_charging() {
        let (storage, plugin) = plugin(&[quota("q", json!({"configmaps": "1"}), Some(json!({"configmaps": "0"})))]);
        assert_eq!(create_cm(&plugin, "a", true).await, Ok(()));
        assert_eq!(used_of(&storage, "q").await, json!({"configmaps": "0"}));
        assert_eq!(create_cm(&plugin, "a", false).await, Ok(()));
        assert_eq!(used_of(&storage, "q").await, json!({"configmaps": "1"}));
        assert!(create_cm(&plugin, "b", true).await.is_err_and(|m| m.contains("exceeded quota: q")));
    }

    #[tokio::test]
    async fn a_refusing_quota_gives_back_the_earlier_charges() {
        let (storage, plugin) =
            plugin(&[quota("a", json!({"count/configmaps": "10"}), Some(json!({"count/configmaps": "3"}))), quota("b", json!({"configmaps": "1"}), Some(json!({"configmaps": "1"})))]);
        let r = create_cm(&plugin, "x", false).await;
        assert_eq!(r, Err("configmaps \"x\" is forbidden: exceeded quota: b, requested: configmaps=1, used: configmaps=1, limited: configmaps=1".into()));
        assert_eq!(used_of(&storage, "a").await, json!({"count/configmaps": "3"}));
        let (_, unknown) = plugin_unknown();
        assert_eq!(create_cm(&unknown, "y", false).await, Err("configmaps \"y\" is forbidden: status unknown for quota: q, resources: count/configmaps".into()));
    }

    fn plugin_unknown() -> (Arc<MemStorage>, Arc<ResourceQuota>) {
        plugin(&[quota("q", json!({"count/configmaps": "1"}), None)])
    }
}
