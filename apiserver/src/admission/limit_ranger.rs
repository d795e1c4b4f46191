//! `LimitRanger` (kube `plugin/pkg/admission/limitranger`): the
//! LimitRanges of the namespace fill in and bound the resources of Pods and
//! PersistentVolumeClaims.
//!
//! Mutating, on Pod creates: each LimitRange's `Container` limits give
//! `default` (limits) and `defaultRequest` (requests), filled into every
//! container and init container that does not name that resource, and
//! recorded in the annotation `kubernetes.io/limit-ranger` (`LimitRanger
//! plugin set: cpu, memory request for container app; cpu limit for init
//! container setup`).
//!
//! Validating, on Pod creates and PVC creates and updates, for each
//! LimitRange in turn (the first one violated refuses the write, 403,
//! every violation of it in the message):
//!
//! | type | checked | against |
//! |---|---|---|
//! | `Container` | each container and init container | `min`, `max`, `maxLimitRequestRatio` |
//! | `Pod` | the Pod's total ([`super::pod_resources`], without overhead) | `min`, `max`, `maxLimitRequestRatio` |
//! | `PersistentVolumeClaim` | `spec.resources.requests` | `min`, `max` |
//!
//! Values compare in thousandths rounded up, or in units when one of them
//! is too large for that (kube's `requestLimitEnforcedValues`). Messages
//! are kube's, e.g. `pods "x" is forbidden: maximum cpu usage per Container
//! is 1, but limit is 2`; quantities print in canonical form. Pods whose
//! old object is being deleted are left alone. Pod updates are not checked
//! (containers' resources cannot change there), nor the `resize`
//! subresource (not served).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::lookup;
use super::pod_resources::{self, ResourceList, Side};
use super::sources::Sources;
use super::{Attributes, Mutating, Operation, Validating};
use crate::errors::Status;
use crate::meta;
use crate::quantity::{self, Quantity};
use crate::storage::Storage;

/// The annotation listing what the plugin filled in.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// kube's `resource.MaxMilliValue`: above it, values compare in units.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

/// The plugin.
pub struct LimitRanger {
    storage: Arc<dyn Storage>,
    sources: Arc<Sources>,
}

impl LimitRanger {
    /// The plugin over the LimitRanges of `sources` (or of `storage`, when
    /// the copy has none for a namespace).
    pub fn new(storage: Arc<dyn Storage>, sources: Arc<Sources>) -> Self {
        LimitRanger { storage, sources }
    }

    async fn ranges(&self, namespace: &str) -> Result<Vec<Arc<Value>>, Status> {
        lookup::list(&self.sources, self.storage.as_ref(), "", "limitranges", namespace).await
    }
}

/// What the plugin looks at.
#[derive(PartialEq)]
enum Target {
    Pod,
    Claim,
}

fn target(attrs: &Attributes<'_>) -> Option<Target> {
    if !attrs.subresource.is_empty() || !attrs.kind.group.is_empty() {
        return None;
    }
    match attrs.kind.kind {
        "Pod" if attrs.operation == Operation::Create => Some(Target::Pod),
        "PersistentVolumeClaim" => Some(Target::Claim),
        _ => None,
    }
}

fn old_is_deleting(attrs: &Attributes<'_>) -> bool {
    attrs.old_object.is_some_and(meta::is_deleting)
}

/// The `limits` items of a LimitRange of `kind`.
fn items<'a>(range: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    range["spec"]["limits"].as_array().into_iter().flatten().filter(move |l| l["type"] == kind)
}

/// `default` and `defaultRequest` of the `Container` items (later items
/// win), each completed as kube's API defaults complete a stored
/// LimitRange (`SetDefaults_LimitRangeItem`), which this server does not
/// store: `default` falls back to `max`, `defaultRequest` to `default`,
/// then to `min`.
fn container_defaults(range: &Value) -> (ResourceList, ResourceList) {
    let (mut limits, mut requests) = (ResourceList::new(), ResourceList::new());
    for item in items(range, "Container") {
        let mut default = quantity::list(&item["default"]);
        for (k, v) in quantity::list(&item["max"]) {
            default.entry(k).or_insert(v);
        }
        let mut default_request = quantity::list(&item["defaultRequest"]);
        for (k, v) in default.iter().chain(quantity::list(&item["min"]).iter()) {
            default_request.entry(k.clone()).or_insert(*v);
        }
        limits.extend(default);
        requests.extend(default_request);
    }
    (limits, requests)
}

/// Fills the defaults into one container; returns the annotation parts.
fn fill_container(c: &mut Value, limits: &ResourceList, requests: &ResourceList, what: &str, notes: &mut Vec<String>) {
    let mut set = |side: Side, defaults: &ResourceList| -> Vec<String> {
        let field = if side == Side::Requests { "requests" } else { "limits" };
        let mut added = Vec::new();
        for (k, v) in defaults {
            if c["resources"][field].get(k).is_none() {
                if !c["resources"].is_object() {
                    c["resources"] = json!({});
                }
                if !c["resources"][field].is_object() {
                    c["resources"][field] = json!({});
                }
                c["resources"][field][k] = Value::from(*v);
                added.push(k.clone());
            }
        }
        added
    };
    let limits_set = set(Side::Limits, limits);
    let requests_set = set(Side::Requests, requests);
    let name = c["name"].as_str().unwrap_or("");
    if !requests_set.is_empty() {
        notes.push(format!("{} request for {what} {name}", requests_set.join(", ")));
    }
    if !limits_set.is_empty() {
        notes.push(format!("{} limit for {what} {name}", limits_set.join(", ")));
    }
}

/// kube's `mergePodResourceRequirements` for one LimitRange.
fn fill_pod(pod: &mut Value, range: &Value) {
    let (limits, requests) = container_defaults(range);
    let mut notes = Vec::new();
    for (list, what) in [("containers", "container"), ("initContainers", "init container")] {
        if let Some(cs) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) {
            for c in cs.iter_mut() {
                fill_container(c, &limits, &requests, what, &mut notes);
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    if let Some(m) = meta::meta_mut(pod) {
        let annotations = m.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[ANNOTATION] = Value::String(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
}

/// The request, limit and enforced values at a common precision (kube's
/// `requestLimitEnforcedValues`): thousandths, or units when any is too
/// large for thousandths.
fn common(req: Option<&Quantity>, lim: Option<&Quantity>, enforced: &Quantity) -> (i128, i128, i128) {
    let v = |q: Option<&Quantity>, f: fn(&Quantity) -> i128| q.map_or(0, f);
    let (r, l, e) = (v(req, Quantity::value), v(lim, Quantity::value), enforced.value());
    if r <= MAX_MILLI_VALUE && l <= MAX_MILLI_VALUE && e <= MAX_MILLI_VALUE {
        (v(req, Quantity::milli_value), v(lim, Quantity::milli_value), enforced.milli_value())
    } else {
        (r, l, e)
    }
}

fn min_constraint(kind: &str, name: &str, enforced: &Quantity, requests: &ResourceList, limits: &ResourceList) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, e) = common(req, lim, enforced);
    match (req, lim) {
        (None, _) => Some(format!("minimum {name} usage per {kind} is {enforced}.  No request is specified")),
        (Some(req), _) if r < e => Some(format!("minimum {name} usage per {kind} is {enforced}, but request is {req}")),
        (_, Some(lim)) if l < e => Some(format!("minimum {name} usage per {kind} is {enforced}, but limit is {lim}")),
        _ => None,
    }
}

fn max_constraint(kind: &str, name: &str, enforced: &Quantity, requests: &ResourceList, limits: &ResourceList) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, e) = common(req, lim, enforced);
    match (req, lim) {
        (_, None) => Some(format!("maximum {name} usage per {kind} is {enforced}.  No limit is specified")),
        (_, Some(lim)) if l > e => Some(format!("maximum {name} usage per {kind} is {enforced}, but limit is {lim}")),
        (Some(req), _) if r > e => Some(format!("maximum {name} usage per {kind} is {enforced}, but request is {req}")),
        _ => None,
    }
}

fn max_request_constraint(kind: &str, name: &str, enforced: &Quantity, requests: &ResourceList) -> Option<String> {
    let req = requests.get(name);
    let (r, _, e) = common(req, None, enforced);
    match req {
        None => Some(format!("maximum {name} usage per {kind} is {enforced}.  No request is specified")),
        Some(req) if r > e => Some(format!("maximum {name} usage per {kind} is {enforced}, but request is {req}")),
        _ => None,
    }
}

fn ratio_constraint(kind: &str, name: &str, enforced: &Quantity, requests: &ResourceList, limits: &ResourceList) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, _) = common(req, lim, enforced);
    if req.is_none() || r == 0 {
        return Some(format!("{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"));
    }
    if lim.is_none() || l == 0 {
        return Some(format!("{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"));
    }
    let observed = l as f64 / r as f64;
    let (mut compared, mut max) = (observed, enforced.value() as f64);
    if enforced.value() <= MAX_MILLI_VALUE {
        compared = observed * 1000.0;
        max = enforced.milli_value() as f64;
    }
    (compared > max).then(|| format!("{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {observed:.6}"))
}

/// Checks `min`, `max` and `maxLimitRequestRatio` of one item against
/// requests and limits.
fn check_item(item: &Value, kind: &str, requests: &ResourceList, limits: &ResourceList, errors: &mut Vec<String>) {
    for (k, v) in quantity::list(&item["min"]) {
        errors.extend(min_constraint(kind, &k, &v, requests, limits));
    }
    for (k, v) in quantity::list(&item["max"]) {
        errors.extend(max_constraint(kind, &k, &v, requests, limits));
    }
    for (k, v) in quantity::list(&item["maxLimitRequestRatio"]) {
        errors.extend(ratio_constraint(kind, &k, &v, requests, limits));
    }
}

/// kube's `PodValidateLimitFunc`: the violations of one LimitRange.
fn pod_violations(pod: &Value, range: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for item in range["spec"]["limits"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("Container") => {
                for list in ["containers", "initContainers"] {
                    for c in pod["spec"][list].as_array().into_iter().flatten() {
                        check_item(item, "Container", &pod_resources::container(c, Side::Requests), &pod_resources::container(c, Side::Limits), &mut errors);
                    }
                }
            }
            Some("Pod") => {
                let (requests, limits) = (pod_resources::pod(pod, Side::Requests, false), pod_resources::pod(pod, Side::Limits, false));
                check_item(item, "Pod", &requests, &limits, &mut errors);
            }
            _ => {}
        }
    }
    errors
}

/// kube's `PersistentVolumeClaimValidateLimitFunc`: only requests count.
fn claim_violations(claim: &Value, range: &Value) -> Vec<String> {
    let requests = quantity::list(&claim["spec"]["resources"]["requests"]);
    let mut errors = Vec::new();
    for item in items(range, "PersistentVolumeClaim") {
        for (k, v) in quantity::list(&item["min"]) {
            errors.extend(min_constraint("PersistentVolumeClaim", &k, &v, &requests, &ResourceList::new()));
        }
        for (k, v) in quantity::list(&item["max"]) {
            errors.extend(max_request_constraint("PersistentVolumeClaim", &k, &v, &requests));
        }
    }
    errors
}

#[async_trait]
impl Mutating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if target(attrs) != Some(Target::Pod) || old_is_deleting(attrs) {
            return Ok(());
        }
        let ranges = self.ranges(attrs.namespace).await?;
        if let Some(pod) = attrs.object.as_mut() {
            for range in &ranges {
                fill_pod(pod, range);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Validating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let Some(t) = target(attrs) else { return Ok(()) };
        if old_is_deleting(attrs) {
            return Ok(());
        }
        let Some(obj) = attrs.object.as_ref() else { return Ok(()) };
        for range in self.ranges(attrs.namespace).await? {
            let errors = match t {
                Target::Pod => pod_violations(obj, &range),
                Target::Claim => claim_violations(obj, &range),
            };
            if !errors.is_empty() {
                return Err(lookup::forbidden(attrs, &lookup::aggregate(&errors)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::sources::Fixed;
    use crate::admission::testing::{MemStorage, Parts};

    fn range(limits: Value) -> Value {
        json!({"metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": limits}})
    }

    #[test]
    fn defaults_fill_containers_and_init_containers_once() {
        let lr = range(json!([{"type": "Container", "default": {"cpu": "0.5", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}]));
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "app", "resources": {"limits": {"memory": "1Gi"}}}],
            "initContainers": [{"name": "setup"}],
        }});
        fill_pod(&mut pod, &lr);
        assert_eq!(pod["spec"]["containers"][0]["resources"], json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}));
        assert_eq!(pod["spec"]["initContainers"][0]["resources"], json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}));
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container app; cpu limit for container app; cpu, memory request for init container setup; cpu, memory limit for init container setup"
        );
        let mut bare = json!({"spec": {"containers": [{"name": "c"}]}});
        fill_pod(&mut bare, &range(json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}}])));
        assert_eq!(bare["spec"]["containers"][0]["resources"], json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1", "memory": "64Mi"}}));
        let before = pod.clone();
        fill_pod(&mut pod, &range(json!([{"type": "Pod", "max": {"cpu": "1"}}])));
        assert_eq!(pod, before);
    }

    #[test]
    fn violations_read_as_kubes() {
        let lr = range(json!([
            {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "10Mi"}, "maxLimitRequestRatio": {"cpu": "2"}},
        ]));
        let pod = |cpu_req: &str, cpu_lim: &str| json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": cpu_req, "memory": "20Mi"}, "limits": {"cpu": cpu_lim}}}]}});
        assert_eq!(pod_violations(&pod("1", "2000m"), &lr), vec!["maximum cpu usage per Container is 1, but limit is 2".to_string()]);
        assert_eq!(pod_violations(&pod("200m", "1"), &lr), vec!["cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000".to_string()]);
        assert!(pod_violations(&pod("500m", "1"), &lr).is_empty());
        let none = json!({"spec": {"containers": [{"name": "a"}]}});
        let errors = pod_violations(&none, &lr);
        assert_eq!(
            lookup::aggregate(&errors),
            "[minimum memory usage per Container is 10Mi.  No request is specified, maximum cpu usage per Container is 1.  No limit is specified, cpu max limit to request ratio per Container is 2, but no request is specified or request is 0]"
        );
        let pod_lr = range(json!([{"type": "Pod", "max": {"memory": "1Gi"}}]));
        let two = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "768Mi"}}},
            {"name": "b", "resources": {"limits": {"memory": "512Mi"}}},
        ]}});
        assert_eq!(pod_violations(&two, &pod_lr), vec!["maximum memory usage per Pod is 1Gi, but limit is 1280Mi".to_string()]);
    }

    #[test]
    fn claims_check_requests_only() {
        let lr = range(json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]));
        let claim = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert_eq!(claim_violations(&claim("20Gi"), &lr), vec!["maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi".to_string()]);
        assert_eq!(claim_violations(&claim("500Mi"), &lr), vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi".to_string()]);
        assert!(claim_violations(&claim("5Gi"), &lr).is_empty());
    }

    #[tokio::test]
    async fn the_plugin_fills_then_refuses() {
        let sources = Sources::new();
        sources.set("", "limitranges", Fixed::of([range(json!([{"type": "Container", "max": {"cpu": "1"}}]))]));
        let plugin = LimitRanger::new(MemStorage::with([]), sources);
        let run = |cpu: Option<&str>| {
            let resources = cpu.map_or(json!({}), |c| json!({"limits": {"cpu": c}}));
            let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c", "resources": resources}]}});
            let plugin = &plugin;
            async move {
                let parts = Parts::of(&pod);
                let mut a = parts.attrs(Operation::Create, "pods", "Pod", "ns", pod, false);
                Mutating::admit(plugin, &mut a).await.map_err(|s| s.message)?;
                Validating::validate(plugin, &a).await.map_err(|s| s.message)?;
                Ok::<Value, String>(a.object.take().unwrap_or_default())
            }
        };
        let filled = run(None).await.unwrap_or_default();
        assert_eq!(filled["spec"]["containers"][0]["resources"], json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}));
        assert_eq!(filled["metadata"]["annotations"][ANNOTATION], "LimitRanger plugin set: cpu request for container c; cpu limit for container c");
        assert_eq!(run(Some("1500m")).await.err(), Some("pods \"p\" is forbidden: maximum cpu usage per Container is 1, but limit is 1500m".into()));
    }
}
