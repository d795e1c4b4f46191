//! `RuntimeClass` (kube `plugin/pkg/admission/runtimeclass`), on Pod
//! creates that name `spec.runtimeClassName`:
//!
//! - an unknown class refuses the Pod (403 `pod rejected: RuntimeClass "x"
//!   not found`);
//! - mutating: the class's `overhead.podFixed` becomes `spec.overhead`
//!   (a Pod that already has another overhead is refused: `pod rejected:
//!   Pod's Overhead doesn't match RuntimeClass's defined Overhead`); its
//!   `scheduling.nodeSelector` is merged into the Pod's (a key with another
//!   value is refused: `conflict: runtimeClass.scheduling.nodeSelector[k] =
//!   a; pod.spec.nodeSelector[k] = b`) and its `scheduling.tolerations`
//!   into the Pod's, dropping tolerations another one covers (kube's
//!   `MergeTolerations`);
//! - validating: a Pod with an overhead must get it from its class
//!   (`pod rejected: Pod Overhead set without corresponding RuntimeClass
//!   defined Overhead`, or the mismatch message).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::lookup;
use super::sources::Sources;
use super::{Attributes, Mutating, Operation, Validating};
use crate::errors::Status;
use crate::quantity;
use crate::storage::Storage;

/// The plugin.
pub struct RuntimeClass {
    storage: Arc<dyn Storage>,
    sources: Arc<Sources>,
}

impl RuntimeClass {
    /// The plugin over the RuntimeClasses of `sources` (or `storage`).
    pub fn new(storage: Arc<dyn Storage>, sources: Arc<Sources>) -> Self {
        RuntimeClass { storage, sources }
    }

    /// The Pod's class: `Ok(None)` when it names none.
    async fn class_of(&self, attrs: &Attributes<'_>) -> Result<Option<Arc<Value>>, Status> {
        let Some(name) = attrs.object.as_ref().and_then(|p| p["spec"]["runtimeClassName"].as_str()).map(str::to_string) else { return Ok(None) };
        match lookup::get(&self.sources, self.storage.as_ref(), "node.k8s.io", "runtimeclasses", &name).await? {
            Some(c) => Ok(Some(c)),
            None => Err(lookup::forbidden(attrs, &format!("pod rejected: RuntimeClass {name:?} not found"))),
        }
    }
}

fn applies(attrs: &Attributes<'_>) -> bool {
    lookup::is_core(attrs, "pods")
}

/// Whether two resource lists hold the same quantities (kube's semantic
/// equality of quantities).
fn same_resources(a: &Value, b: &Value) -> bool {
    let (a, b) = (quantity::list(a), quantity::list(b));
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v))
}

fn has_overhead(pod: &Value) -> bool {
    pod["spec"]["overhead"].as_object().is_some_and(|o| !o.is_empty())
}

const MISMATCH: &str = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead";

/// Whether toleration `a` tolerates everything `b` does (kube's
/// `isSuperset`).
fn covers(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    let s = |t: &Value, f: &str| t[f].as_str().unwrap_or("").to_string();
    let (a_key, a_op) = (s(a, "key"), s(a, "operator"));
    if s(b, "key") != a_key && !(a_key.is_empty() && a_op == "Exists") {
        return false;
    }
    let a_effect = s(a, "effect");
    if s(b, "effect") != a_effect && !a_effect.is_empty() {
        return false;
    }
    if a_effect == "NoExecute" {
        if let Some(limit) = a["tolerationSeconds"].as_i64() {
            match b["tolerationSeconds"].as_i64() {
                Some(t) if t <= limit => {}
                _ => return false,
            }
        }
    }
    match a_op.as_str() {
        "" | "Equal" => matches!(s(b, "operator").as_str(), "Equal") && s(b, "value") == s(a, "value"),
        "Exists" => true,
        _ => false,
    }
}

/// kube's `MergeTolerations`: `first` then `second`, without tolerations
/// another one covers (of two equal ones, the first stays).
pub fn merge_tolerations(first: &[Value], second: &[Value]) -> Vec<Value> {
    let all: Vec<&Value> = first.iter().chain(second).collect();
    let mut merged: Vec<Value> = Vec::new();
    'next: for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|m| covers(m, t)) {
            continue;
        }
        for later in &all[i + 1..] {
            if later != t && covers(later, t) {
                continue 'next;
            }
        }
        merged.push((*t).clone());
    }
    merged
}

/// Applies the class's scheduling to the Pod `spec`.
fn schedule(attrs: &Attributes<'_>, spec: &mut Map<String, Value>, scheduling: &Value) -> Result<(), Status> {
    if let Some(selector) = scheduling["nodeSelector"].as_object().filter(|s| !s.is_empty()) {
        let mut merged = spec.get("nodeSelector").and_then(Value::as_object).cloned().unwrap_or_default();
        for (k, v) in selector {
            if let Some(have) = merged.get(k).filter(|have| *have != v) {
                let why = format!("conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}", v.as_str().unwrap_or(""), have.as_str().unwrap_or(""));
                return Err(lookup::forbidden(attrs, &why));
            }
            merged.insert(k.clone(), v.clone());
        }
        spec.insert("nodeSelector".into(), Value::Object(merged));
    }
    if let Some(extra) = scheduling["tolerations"].as_array().filter(|t| !t.is_empty()) {
        let have = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
        spec.insert("tolerations".into(), Value::Array(merge_tolerations(&have, extra)));
    }
    Ok(())
}

#[async_trait]
impl Mutating for RuntimeClass {
    fn name(&self) -> &'static str {
        "RuntimeClass"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if !applies(attrs) {
            return Ok(());
        }
        let Some(class) = self.class_of(attrs).await? else { return Ok(()) };
        let mut pod = attrs.object.take().unwrap_or(Value::Null);
        let r = (|| {
            let overhead = &class["overhead"]["podFixed"];
            if overhead.as_object().is_some_and(|o| !o.is_empty()) {
                if has_overhead(&pod) && !same_resources(overhead, &pod["spec"]["overhead"]) {
                    return Err(lookup::forbidden(attrs, MISMATCH));
                }
                pod["spec"]["overhead"] = overhead.clone();
            }
            match pod["spec"].as_object_mut() {
                Some(spec) if class["scheduling"].is_object() => schedule(attrs, spec, &class["scheduling"]),
                _ => Ok(()),
            }
        })();
        attrs.object = Some(pod);
        r
    }
}

#[async_trait]
impl Validating for RuntimeClass {
    fn name(&self) -> &'static str {
        "RuntimeClass"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        if !applies(attrs) {
            return Ok(());
        }
        let class = self.class_of(attrs).await?;
        let Some(pod) = attrs.object.as_ref().filter(|p| has_overhead(p)) else { return Ok(()) };
        match class.as_ref().map(|c| &c["overhead"]["podFixed"]).filter(|o| o.as_object().is_some_and(|o| !o.is_empty())) {
            Some(overhead) if same_resources(overhead, &pod["spec"]["overhead"]) => Ok(()),
            Some(_) => Err(lookup::forbidden(attrs, MISMATCH)),
            None => Err(lookup::forbidden(attrs, "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::admission::sources::Fixed;
    use crate::admission::testing::{MemStorage, Parts};
    use serde_json::json;

    use super::*;

    #[test]
    fn merged_tolerations_drop_covered_ones() {
        let pod = vec![json!({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"})];
        let class = vec![json!({"key": "a", "operator": "Exists"}), json!({"key": "b", "operator": "Exists", "effect": "NoExecute"})];
        assert_eq!(merge_tolerations(&pod, &class), class);
        let same = vec![json!({"key": "x", "operator": "Exists"})];
        assert_eq!(merge_tolerations(&same, &same), same);
        let timed = vec![json!({"key": "n", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})];
        let forever = vec![json!({"key": "n", "operator": "Exists", "effect": "NoExecute"})];
        assert_eq!(merge_tolerations(&timed, &forever), forever);
        assert!(same_resources(&json!({"cpu": "0.1"}), &json!({"cpu": "100m"})));
        assert!(!same_resources(&json!({"cpu": "0.1"}), &json!({"cpu": "100m", "memory": "1"})));
    }

    async fn run(plugin: &RuntimeClass, spec: Value) -> Result<Value, String> {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec});
        let parts = Parts::of(&pod);
        let mut a = parts.attrs(Operation::Create, "pods", "Pod", "ns", pod, false);
        plugin.admit(&mut a).await.map_err(|s| s.message)?;
        Validating::validate(plugin, &a).await.map_err(|s| s.message)?;
        Ok(a.object.take().map(|p| p["spec"].clone()).unwrap_or_default())
    }

    #[tokio::test]
    async fn overhead_and_scheduling_come_from_the_class() {
        let sources = Sources::new();
        let class = json!({"metadata": {"name": "kata"}, "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}, "scheduling": {"nodeSelector": {"rt": "kata"}}});
        sources.set("node.k8s.io", "runtimeclasses", Fixed::of([class]));
        let plugin = RuntimeClass::new(MemStorage::with([]), sources);
        let spec = run(&plugin, json!({"runtimeClassName": "kata", "nodeSelector": {"zone": "a"}})).await.unwrap_or_default();
        assert_eq!((spec["overhead"].clone(), spec["nodeSelector"].clone()), (json!({"cpu": "250m"}), json!({"zone": "a", "rt": "kata"})));
        assert_eq!(run(&plugin, json!({"runtimeClassName": "kata", "overhead": {"cpu": "0.25"}})).await.map(|s| s["overhead"].clone()), Ok(json!({"cpu": "250m"})));
        assert_eq!(run(&plugin, json!({"runtimeClassName": "kata", "overhead": {"cpu": "1"}})).await, Err(format!("pods \"p\" is forbidden: {MISMATCH}")));
        assert_eq!(run(&plugin, json!({"runtimeClassName": "nope"})).await, Err("pods \"p\" is forbidden: pod rejected: RuntimeClass \"nope\" not found".into()));
        assert_eq!(run(&plugin, json!({"overhead": {"cpu": "1"}})).await, Err("pods \"p\" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead".into()));
        assert_eq!(
            run(&plugin, json!({"runtimeClassName": "kata", "nodeSelector": {"rt": "runc"}})).await,
            Err("pods \"p\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[rt] = kata; pod.spec.nodeSelector[rt] = runc".into())
        );
    }
}
