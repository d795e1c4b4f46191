//! `Priority` (kube `plugin/pkg/admission/priority`).
//!
//! Mutating, on Pod creates: `spec.priorityClassName` resolves to
//! `spec.priority` and `spec.preemptionPolicy` from its PriorityClass. A
//! Pod that names no class gets the `globalDefault` class (the lowest value
//! when several claim it), or priority 0 and `PreemptLowerPriority` when
//! there is none. The system classes `system-cluster-critical`
//! (2000000000) and `system-node-critical` (2000001000) always resolve,
//! stored or not (kube creates them at start-up; this server does not store
//! them). Refusals (403), in kube's words:
//!
//! - `no PriorityClass with name x was found`;
//! - `the integer value of priority (5) must not be provided in pod spec;
//!   priority admission controller computed 10 from the given
//!   PriorityClass name`;
//! - the same for a `preemptionPolicy` that disagrees.
//!
//! Pod updates keep the priority and policy the Pod had when the update
//! leaves them out. Validating, on PriorityClass creates and updates: a
//! second `globalDefault` class is refused (`PriorityClass x is already
//! marked as default. Only one default can exist`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::lookup;
use super::sources::Sources;
use super::{Attributes, Mutating, Operation, Validating};
use crate::errors::Status;
use crate::meta;
use crate::storage::Storage;

/// The group of PriorityClasses.
const GROUP: &str = "scheduling.k8s.io";

/// The classes that exist on every cluster: (name, value).
pub const SYSTEM_CLASSES: &[(&str, i64)] = &[("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)];

/// The policy of a class that says none, and of Pods without a class.
const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// The plugin.
pub struct Priority {
    storage: Arc<dyn Storage>,
    sources: Arc<Sources>,
}

impl Priority {
    /// The plugin over the PriorityClasses of `sources` (or `storage`).
    pub fn new(storage: Arc<dyn Storage>, sources: Arc<Sources>) -> Self {
        Priority { storage, sources }
    }

    async fn classes(&self) -> Result<Vec<Arc<Value>>, Status> {
        lookup::list(&self.sources, self.storage.as_ref(), GROUP, "priorityclasses", "").await
    }

    /// The class `name`: stored, or a system class.
    async fn class(&self, name: &str) -> Result<Option<Arc<Value>>, Status> {
        if let Some(c) = lookup::get(&self.sources, self.storage.as_ref(), GROUP, "priorityclasses", name).await? {
            return Ok(Some(c));
        }
        Ok(SYSTEM_CLASSES.iter().find(|(n, _)| *n == name).map(|(n, v)| Arc::new(serde_json::json!({"metadata": {"name": n}, "value": v}))))
    }
}

/// The `globalDefault` class among `classes`: the lowest value when
/// several claim it (a race kube resolves the same way).
pub fn global_default(classes: &[Arc<Value>]) -> Option<&Value> {
    classes.iter().map(|c| c.as_ref()).filter(|c| c["globalDefault"] == true).min_by_key(|c| c["value"].as_i64().unwrap_or(0))
}

/// Sets priority and policy on a Pod being created, from `class` (`None`:
/// no class and no default).
fn resolve(attrs: &Attributes<'_>, pod: &mut Value, class: Option<&Value>) -> Result<(), Status> {
    let priority = class.and_then(|c| c["value"].as_i64()).unwrap_or(0);
    let policy = match class {
        Some(c) => c["preemptionPolicy"].as_str().unwrap_or(PREEMPT_LOWER_PRIORITY),
        None => PREEMPT_LOWER_PRIORITY,
    };
    if let Some(given) = pod["spec"]["priority"].as_i64() {
        if given != priority {
            let why = format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name");
            return Err(lookup::forbidden(attrs, &why));
        }
    }
    if let Some(given) = pod["spec"]["preemptionPolicy"].as_str() {
        if given != policy {
            let why = format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name");
            return Err(lookup::forbidden(attrs, &why));
        }
    }
    if let Some(spec) = pod["spec"].as_object_mut() {
        spec.insert("priority".into(), Value::from(priority));
        spec.insert("preemptionPolicy".into(), Value::String(policy.to_string()));
        if let Some(c) = class {
            spec.insert("priorityClassName".into(), Value::String(meta::name(c).to_string()));
        }
    }
    Ok(())
}

#[async_trait]
impl Mutating for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if !lookup::is_core(attrs, "pods") || !attrs.object.as_ref().is_some_and(|p| p["spec"].is_object()) {
            return Ok(());
        }
        if attrs.operation == Operation::Update {
            let old = attrs.old_object.map(|o| (o["spec"]["priority"].clone(), o["spec"]["preemptionPolicy"].clone()));
            if let (Some((priority, policy)), Some(spec)) = (old, attrs.object.as_mut().and_then(|p| p["spec"].as_object_mut())) {
                for (field, was) in [("priority", priority), ("preemptionPolicy", policy)] {
                    if spec.get(field).is_none_or(Value::is_null) && !was.is_null() {
                        spec.insert(field.into(), was);
                    }
                }
            }
            return Ok(());
        }
        let named = attrs.object.as_ref().and_then(|p| p["spec"]["priorityClassName"].as_str()).filter(|n| !n.is_empty()).map(str::to_string);
        let class = match named {
            Some(name) => match self.class(&name).await? {
                Some(c) => Some(c),
                None => return Err(lookup::forbidden(attrs, &format!("no PriorityClass with name {name} was found"))),
            },
            None => {
                let classes = self.classes().await?;
                global_default(&classes).map(|c| Arc::new(c.clone()))
            }
        };
        let mut pod = attrs.object.take().unwrap_or(Value::Null);
        let r = resolve(attrs, &mut pod, class.as_deref());
        attrs.object = Some(pod);
        r
    }
}

#[async_trait]
impl Validating for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let is_class = attrs.resource.group == GROUP && attrs.resource.resource == "priorityclasses" && attrs.subresource.is_empty();
        let Some(pc) = attrs.object.as_ref().filter(|_| is_class) else { return Ok(()) };
        if pc["globalDefault"] != true {
            return Ok(());
        }
        let classes = self.classes().await?;
        if let Some(other) = global_default(&classes).filter(|d| attrs.operation == Operation::Create || meta::name(d) != meta::name(pc)) {
            let why = format!("PriorityClass {} is already marked as default. Only one default can exist", meta::name(other));
            return Err(lookup::forbidden(attrs, &why));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::admission::sources::Fixed;
    use crate::admission::testing::{MemStorage, Parts};
    use serde_json::json;

    use super::*;

    #[test]
    fn the_lowest_global_default_wins() {
        let c = |n: &str, v: i64, d: bool| Arc::new(json!({"metadata": {"name": n}, "value": v, "globalDefault": d}));
        let classes = vec![c("a", 100, true), c("b", 50, true), c("c", 10, false)];
        assert_eq!(global_default(&classes).map(meta::name), Some("b"));
        assert_eq!(global_default(&classes[2..]), None);
    }

    async fn admit(plugin: &Priority, spec: Value) -> Result<Value, String> {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec});
        let parts = Parts::of(&pod);
        let mut a = parts.attrs(Operation::Create, "pods", "Pod", "ns", pod, false);
        plugin.admit(&mut a).await.map_err(|s| s.message)?;
        Ok(a.object.take().map(|p| p["spec"].clone()).unwrap_or_default())
    }

    #[tokio::test]
    async fn classes_resolve_and_disagreements_are_refused() {
        let sources = Sources::new();
        sources.set(GROUP, "priorityclasses", Fixed::of([json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"})]));
        let plugin = Priority::new(MemStorage::with([]), sources.clone());
        let spec = admit(&plugin, json!({"priorityClassName": "high"})).await.unwrap_or_default();
        assert_eq!((spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!(1000), json!("Never")));
        let spec = admit(&plugin, json!({"priorityClassName": "system-cluster-critical"})).await.unwrap_or_default();
        assert_eq!((spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!(2_000_000_000), json!("PreemptLowerPriority")));
        let spec = admit(&plugin, json!({})).await.unwrap_or_default();
        assert_eq!((spec["priority"].clone(), spec.get("priorityClassName")), (json!(0), None));
        assert_eq!(admit(&plugin, json!({"priorityClassName": "nope"})).await, Err("pods \"p\" is forbidden: no PriorityClass with name nope was found".into()));
        assert_eq!(
            admit(&plugin, json!({"priorityClassName": "high", "priority": 5})).await,
            Err("pods \"p\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name".into())
        );
        assert_eq!(
            admit(&plugin, json!({"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"})).await,
            Err("pods \"p\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name".into())
        );
        sources.set(GROUP, "priorityclasses", Fixed::of([json!({"metadata": {"name": "base"}, "value": 7, "globalDefault": true})]));
        let spec = admit(&plugin, json!({})).await.unwrap_or_default();
        assert_eq!((spec["priority"].clone(), spec["priorityClassName"].clone()), (json!(7), json!("base")));
    }
}
