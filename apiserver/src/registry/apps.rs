//! The `apps` group, version v1.

use std::sync::Arc;

use serde_json::{json, Value};

use super::core::{default_pod_spec, validate_pod_spec};
use super::printers::{age, or_none};
use super::scale::scale;
use super::strategy::{Column, Strategy, AGE_COLUMN, NAME_COLUMN};
use super::subresources::{status, Subresource};
use super::validation::go_string_map;
use super::{DefaultStrategy, Resource, ResourceDef};
use crate::errors::Cause;
use crate::meta;
use crate::selectors::LabelSelector;

/// Validation shared by workloads with a selector and a pod template.
fn validate_workload(o: &Value, replicas: bool) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = Vec::new();
    if replicas {
        if let Some(r) = spec["replicas"].as_i64() {
            if r < 0 {
                causes.push(Cause::invalid("spec.replicas", &spec["replicas"], "must be greater than or equal to 0"));
            }
        }
    }
    let sel = &spec["selector"];
    if sel.is_null() {
        causes.push(Cause::required("spec.selector", ""));
    } else {
        let s = LabelSelector::from_object(sel);
        if s.is_empty() {
            causes.push(Cause::invalid("spec.selector", sel, "empty selector is invalid for deployment"));
        } else {
            let labels = &spec["template"]["metadata"]["labels"];
            if !s.matches(&crate::selectors::labels_of(&json!({"metadata": {"labels": labels}}))) {
                let rendered = Value::String(go_string_map(labels));
                let mut c = Cause::invalid("spec.template.metadata.labels", &rendered, "`selector` does not match template `labels`");
                // Go prints the map with %#v, not as a quoted string.
                c.message = format!("Invalid value: {}: `selector` does not match template `labels`", go_string_map(labels));
                causes.push(c);
            }
        }
    }
    causes.extend(validate_pod_spec(&spec["template"]["spec"], "spec.template.spec"));
    causes
}

fn containers_cells(o: &Value) -> (String, String, String) {
    let cs = o["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = cs.iter().map(|c| c["name"].as_str().unwrap_or("")).collect();
    let images: Vec<&str> = cs.iter().map(|c| c["image"].as_str().unwrap_or("")).collect();
    let ml: Vec<String> = o["spec"]["selector"]["matchLabels"].as_object().map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect()).unwrap_or_default();
    (names.join(","), images.join(","), or_none(ml.join(",")))
}

const CONTAINERS: Column = Column::wide("Containers", "string", "Names of each container in the template.");
const IMAGES: Column = Column::wide("Images", "string", "Images referenced by each container in the template.");
const SELECTOR: Column = Column::wide("Selector", "string", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.");

struct Deployments;
impl Strategy for Deployments {
    fn has_status(&self) -> bool {
        true
    }
    fn has_generation(&self) -> bool {
        true
    }
    fn default(&self, o: &mut Value) {
        let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else { return };
        spec.entry("replicas").or_insert_with(|| json!(1));
        spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
        spec.entry("progressDeadlineSeconds").or_insert_with(|| json!(600));
        let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
        if let Some(s) = strategy.as_object_mut() {
            s.entry("type").or_insert_with(|| json!("RollingUpdate"));
            if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
                if let Some(ru) = ru.as_object_mut() {
                    ru.entry("maxUnavailable").or_insert_with(|| json!("25%"));
                    ru.entry("maxSurge").or_insert_with(|| json!("25%"));
                }
            }
        }
        if let Some(t) = spec.get_mut("template") {
            default_pod_spec(&mut t["spec"]);
        }
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_workload(o, true)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        causes.extend(selector_immutable(new, old));
        causes
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            NAME_COLUMN,
            Column::new("Ready", "string", "Number of the pod with ready state"),
            Column::new("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            Column::new("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            AGE_COLUMN,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        let st = &o["status"];
        let (c, i, s) = containers_cells(o);
        vec![
            json!(meta::name(o)),
            json!(format!("{}/{}", st["readyReplicas"].as_i64().unwrap_or(0), o["spec"]["replicas"].as_i64().unwrap_or(0))),
            json!(st["updatedReplicas"].as_i64().unwrap_or(0)),
            json!(st["availableReplicas"].as_i64().unwrap_or(0)),
            json!(age(o)),
            json!(c),
            json!(i),
            json!(s),
        ]
    }
}

/// ReplicaSets, StatefulSets, DaemonSets: a selector and a pod template.
struct Workload {
    replicas: bool,
    /// Updates may not change `spec.selector` (ReplicaSets, DaemonSets;
    /// kube words a StatefulSet's refusal differently).
    selector_immutable: bool,
}
impl Strategy for Workload {
    fn has_status(&self) -> bool {
        true
    }
    fn has_generation(&self) -> bool {
        true
    }
    fn default(&self, o: &mut Value) {
        if self.replicas {
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                spec.entry("replicas").or_insert_with(|| json!(1));
            }
        }
        if let Some(t) = o.get_mut("spec").and_then(|s| s.get_mut("template")) {
            default_pod_spec(&mut t["spec"]);
        }
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_workload(o, self.replicas)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        if self.selector_immutable {
            causes.extend(selector_immutable(new, old));
        }
        causes
    }
}

/// `spec.selector: Invalid value: v1.LabelSelector{...}: field is immutable`
/// when an apps/v1 update changes the selector (kube's Deployment,
/// ReplicaSet and DaemonSet strategies); empty and missing parts are equal,
/// as under `apiequality.Semantic`.
fn selector_immutable(new: &Value, old: &Value) -> Option<Cause> {
    let norm = |sel: &Value| {
        let labels = sel["matchLabels"].as_object().filter(|m| !m.is_empty()).cloned();
        let exprs = sel["matchExpressions"].as_array().filter(|a| !a.is_empty()).cloned();
        (labels, exprs)
    };
    let (n, o) = (&new["spec"]["selector"], &old["spec"]["selector"]);
    if norm(n) == norm(o) {
        return None;
    }
    Some(Cause { reason: "FieldValueInvalid".into(), message: format!("Invalid value: {}: field is immutable", go_label_selector(n)), field: "spec.selector".into() })
}

/// Go's `%#v` of a `metav1.LabelSelector`, as kube prints it in field
/// errors.
fn go_label_selector(sel: &Value) -> String {
    let labels = match sel["matchLabels"].as_object() {
        Some(m) if !m.is_empty() => go_string_map(&sel["matchLabels"]),
        _ => "map[string]string(nil)".to_string(),
    };
    let go_strings = |v: &Value| match v.as_array() {
        Some(a) => format!("[]string{{{}}}", a.iter().map(|s| format!("{:?}", s.as_str().unwrap_or(""))).collect::<Vec<_>>().join(", ")),
        None => "[]string(nil)".to_string(),
    };
    let exprs = match sel["matchExpressions"].as_array() {
        Some(a) if !a.is_empty() => {
            let items: Vec<String> = a
                .iter()
                .map(|r| format!("v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{}}}", r["key"].as_str().unwrap_or(""), r["operator"].as_str().unwrap_or(""), go_strings(&r["values"])))
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        _ => "[]v1.LabelSelectorRequirement(nil)".to_string(),
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

fn apps(resource: &str, singular: &str, kind: &str, short: &[&str], cats: &[&str], subs: Vec<Arc<dyn Subresource>>, strategy: Box<dyn Strategy>) -> ResourceDef {
    ResourceDef::stored(Resource::new("apps", "v1", resource, singular, kind, true, Arc::from(strategy)), subs).short_names(short).categories(cats)
}

/// apps/v1 resources.
pub fn resources() -> Vec<ResourceDef> {
    vec![
        apps("deployments", "deployment", "Deployment", &["deploy"], &["all"], vec![status(), scale()], Box::new(Deployments)),
        apps("replicasets", "replicaset", "ReplicaSet", &["rs"], &["all"], vec![status(), scale()], Box::new(Workload { replicas: true, selector_immutable: true })),
        apps("statefulsets", "statefulset", "StatefulSet", &["sts"], &["all"], vec![status(), scale()], Box::new(Workload { replicas: true, selector_immutable: false })),
        apps("daemonsets", "daemonset", "DaemonSet", &["ds"], &["all"], vec![status()], Box::new(Workload { replicas: false, selector_immutable: true })),
        apps("controllerrevisions", "controllerrevision", "ControllerRevision", &[], &[], Vec::new(), Box::new(DefaultStrategy)),
    ]
}
