//! The `autoscaling` group: HorizontalPodAutoscalers served as v2 (the
//! preferred and storage version) and v1, stored once as v2 and converted
//! through the hub, whose shape is v2's (kube's internal autoscaling type).
//!
//! v1 has a single `targetCPUUtilizationPercentage`. What v1 cannot express
//! (other metrics, behavior, current metrics, conditions) rides in the
//! annotations kube uses, so a v2 → v1 → v2 round trip loses nothing:
//! `autoscaling.alpha.kubernetes.io/{metrics,behavior,current-metrics,conditions}`.

use serde_json::{json, Map, Value};

use super::printers::age;
use super::simple::def;
use super::strategy::{Column, Strategy, AGE_COLUMN, NAME_COLUMN};
use super::ResourceDef;
use crate::errors::Cause;
use crate::meta;

const GROUP: &str = "autoscaling";
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource" && m["resource"]["name"] == "cpu" && m["resource"]["target"]["type"] == "Utilization"
}

fn annotations_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let m = meta::meta_mut(obj)?;
    let a = m.entry("annotations").or_insert_with(|| json!({}));
    if !a.is_object() {
        *a = json!({});
    }
    a.as_object_mut()
}

fn drop_empty_annotations(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if m.get("annotations").and_then(Value::as_object).is_some_and(Map::is_empty) {
            m.remove("annotations");
        }
    }
}

/// Hub (v2 shape) → v1.
fn v2_to_v1(mut o: Value) -> Value {
    let spec = o["spec"].take();
    let status = o["status"].take();
    let mut v1_spec = json!({});
    for f in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if !spec[f].is_null() {
            v1_spec[f] = spec[f].clone();
        }
    }
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let mut others = Vec::new();
    for m in metrics {
        if is_cpu_utilization(&m) && v1_spec["targetCPUUtilizationPercentage"].is_null() {
            v1_spec["targetCPUUtilizationPercentage"] = m["resource"]["target"]["averageUtilization"].clone();
        } else {
            others.push(m);
        }
    }
    let mut notes: Vec<(&str, Value)> = Vec::new();
    if !others.is_empty() {
        notes.push((METRICS, Value::Array(others)));
    }
    if !spec["behavior"].is_null() {
        notes.push((BEHAVIOR, spec["behavior"].clone()));
    }
    let mut v1_status = json!({});
    if status.is_object() {
        for f in ["observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas"] {
            if !status[f].is_null() {
                v1_status[f] = status[f].clone();
            }
        }
        if v1_status["currentReplicas"].is_null() {
            v1_status["currentReplicas"] = json!(0);
        }
        if v1_status["desiredReplicas"].is_null() {
            v1_status["desiredReplicas"] = json!(0);
        }
        let mut other_current = Vec::new();
        for m in status["currentMetrics"].as_array().cloned().unwrap_or_default() {
            let util = &m["resource"]["current"]["averageUtilization"];
            if m["type"] == "Resource" && m["resource"]["name"] == "cpu" && !util.is_null() && v1_status["currentCPUUtilizationPercentage"].is_null() {
                v1_status["currentCPUUtilizationPercentage"] = util.clone();
            } else {
                other_current.push(m);
            }
        }
        if !other_current.is_empty() {
            notes.push((CURRENT_METRICS, Value::Array(other_current)));
        }
        if status["conditions"].as_array().is_some_and(|c| !c.is_empty()) {
            notes.push((CONDITIONS, status["conditions"].clone()));
        }
    }
    if let Some(a) = annotations_mut(&mut o) {
        for (k, v) in notes {
            a.insert(k.into(), Value::String(v.to_string()));
        }
    }
    drop_empty_annotations(&mut o);
    o["apiVersion"] = json!("autoscaling/v1");
    o["spec"] = v1_spec;
    if !status.is_null() {
        o["status"] = v1_status;
    } else if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    o
}

/// v1 → hub (v2 shape).
fn v1_to_v2(mut o: Value) -> Value {
    let spec = o["spec"].take();
    let status = o["status"].take();
    let mut notes = Map::new();
    if let Some(a) = o["metadata"]["annotations"].as_object_mut() {
        for k in [METRICS, BEHAVIOR, CURRENT_METRICS, CONDITIONS] {
            if let Some(v) = a.remove(k) {
                // A malformed annotation is dropped, as kube ignores it.
                if let Some(parsed) = v.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok()) {
                    notes.insert(k.into(), parsed);
                }
            }
        }
    }
    drop_empty_annotations(&mut o);
    let mut v2_spec = json!({});
    for f in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if !spec[f].is_null() {
            v2_spec[f] = spec[f].clone();
        }
    }
    let mut metrics = Vec::new();
    if let Some(t) = spec["targetCPUUtilizationPercentage"].as_i64() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": t}}}));
    }
    if let Some(Value::Array(more)) = notes.remove(METRICS) {
        metrics.extend(more);
    }
    if !metrics.is_empty() {
        v2_spec["metrics"] = Value::Array(metrics);
    }
    if let Some(b) = notes.remove(BEHAVIOR) {
        v2_spec["behavior"] = b;
    }
    o["apiVersion"] = json!("autoscaling/v2");
    o["spec"] = v2_spec;
    if status.is_object() {
        let mut v2_status = json!({});
        for f in ["observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas"] {
            if !status[f].is_null() {
                v2_status[f] = status[f].clone();
            }
        }
        let mut current = Vec::new();
        if let Some(u) = status["currentCPUUtilizationPercentage"].as_i64() {
            current.push(json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": u}}}));
        }
        if let Some(Value::Array(more)) = notes.remove(CURRENT_METRICS) {
            current.extend(more);
        }
        if !current.is_empty() {
            v2_status["currentMetrics"] = Value::Array(current);
        }
        if let Some(c) = notes.remove(CONDITIONS) {
            v2_status["conditions"] = c;
        }
        o["status"] = v2_status;
    } else if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    o
}

fn validate_hub(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = Vec::new();
    let min = spec["minReplicas"].as_i64().unwrap_or(1);
    if min < 1 {
        causes.push(Cause::invalid("spec.minReplicas", &spec["minReplicas"], "must be greater than or equal to 1"));
    }
    match spec["maxReplicas"].as_i64() {
        None => causes.push(Cause::required("spec.maxReplicas", "")),
        Some(max) if max < min => causes.push(Cause::invalid("spec.maxReplicas", &spec["maxReplicas"], "must be greater than or equal to `minReplicas`")),
        _ => {}
    }
    for f in ["kind", "name"] {
        if spec["scaleTargetRef"][f].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(&format!("spec.scaleTargetRef.{f}"), ""));
        }
    }
    causes
}

fn hpa_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new(
            "Reference",
            "string",
            "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
        ),
        Column::new("Targets", "string", "the target value of the metrics and their current value"),
        Column::new("MinPods", "string", "lower limit for the number of pods that can be set by the autoscaler, default 1."),
        Column::new("MaxPods", "string", "upper limit for the number of pods that can be set by the autoscaler; cannot be smaller than MinReplicas."),
        Column::new("Replicas", "string", "current number of replicas of pods managed by this autoscaler."),
        AGE_COLUMN,
    ]
}

/// kube's `formatHPAMetrics` on a hub object.
fn targets(o: &Value) -> String {
    let specs = o["spec"]["metrics"].as_array().cloned().unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let current = o["status"]["currentMetrics"].as_array().cloned().unwrap_or_default();
    let mut list = Vec::new();
    for (i, m) in specs.iter().enumerate() {
        let cur = current.get(i);
        let s = match m["type"].as_str().unwrap_or("") {
            t @ ("Resource" | "ContainerResource") => {
                let key = if t == "Resource" { "resource" } else { "containerResource" };
                let r = &m[key];
                let name = r["name"].as_str().unwrap_or("");
                if let Some(av) = r["target"]["averageValue"].as_str() {
                    let c = cur.and_then(|c| c[key]["current"]["averageValue"].as_str()).unwrap_or("<unknown>");
                    format!("{name}: {c}/{av}")
                } else {
                    let c = cur.and_then(|c| c[key]["current"]["averageUtilization"].as_i64()).map_or("<unknown>".to_string(), |u| format!("{u}%"));
                    let t = r["target"]["averageUtilization"].as_i64().map_or("<auto>".to_string(), |u| format!("{u}%"));
                    format!("{name}: {c}/{t}")
                }
            }
            t @ ("Pods" | "Object" | "External") => {
                let key = match t {
                    "Pods" => "pods",
                    "Object" => "object",
                    _ => "external",
                };
                let target = &m[key]["target"];
                let tv = target["averageValue"].as_str().or(target["value"].as_str()).unwrap_or("<auto>");
                let c = cur.and_then(|c| c[key]["current"]["averageValue"].as_str().or(c[key]["current"]["value"].as_str())).unwrap_or("<unknown>");
                let suffix = if target["type"] == "AverageValue" && t != "Pods" { " (avg)" } else { "" };
                format!("{c}/{tv}{suffix}")
            }
            _ => "<unknown type>".into(),
        };
        list.push(s);
    }
    if list.len() > 2 {
        let more = list.len() - 2;
        list.truncate(2);
        return format!("{} + {more} more...", list.join(", "));
    }
    list.join(", ")
}

fn hpa_cells(o: &Value) -> Vec<Value> {
    let spec = &o["spec"];
    let reference = format!("{}/{}", spec["scaleTargetRef"]["kind"].as_str().unwrap_or(""), spec["scaleTargetRef"]["name"].as_str().unwrap_or(""));
    let min = spec["minReplicas"].as_i64().map_or("<unset>".to_string(), |m| m.to_string());
    vec![
        json!(meta::name(o)),
        json!(reference),
        json!(targets(o)),
        json!(min),
        json!(spec["maxReplicas"].as_i64().unwrap_or(0)),
        json!(o["status"]["currentReplicas"].as_i64().unwrap_or(0)),
        json!(age(o)),
    ]
}

/// One served version of HorizontalPodAutoscaler.
struct Hpa {
    v1: bool,
}

impl Strategy for Hpa {
    fn has_status(&self) -> bool {
        true
    }
    fn has_generation(&self) -> bool {
        true
    }
    fn default(&self, o: &mut Value) {
        if let Some(s) = o.get_mut("spec").and_then(Value::as_object_mut) {
            s.entry("minReplicas").or_insert_with(|| json!(1));
            if !self.v1 && s.get("metrics").is_none_or(|m| m.as_array().is_none_or(Vec::is_empty)) {
                s.insert("metrics".into(), json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]));
            }
        }
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_hub(&self.convert_to_hub(o.clone()))
    }
    fn storage_version(&self) -> Option<(&str, &str)> {
        self.v1.then_some((GROUP, "v2"))
    }
    fn convert_to_hub(&self, obj: Value) -> Value {
        if self.v1 {
            v1_to_v2(obj)
        } else {
            obj
        }
    }
    fn convert_from_hub(&self, mut obj: Value) -> Value {
        if self.v1 {
            v2_to_v1(obj)
        } else {
            obj["apiVersion"] = json!("autoscaling/v2");
            obj
        }
    }
    fn columns(&self) -> Vec<Column> {
        hpa_columns()
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        hpa_cells(&self.convert_to_hub(o.clone()))
    }
}

/// autoscaling v2 (preferred, stored) then v1.
pub fn resources() -> Vec<ResourceDef> {
    let hpa = || def("horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler", true, &["hpa"], &["all"]);
    vec![hpa().build(GROUP, "v2", Box::new(Hpa { v1: false })), hpa().build(GROUP, "v1", Box::new(Hpa { v1: true }))]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn v2_v1_round_trip_keeps_everything() {
        let v2 = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
            },
            "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 20}}}]},
        });
        let v1 = v2_to_v1(v2.clone());
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 20);
        assert!(v1["metadata"]["annotations"][METRICS].as_str().unwrap().contains("memory"));
        assert_eq!(v1_to_v2(v1), v2);
        assert_eq!(targets(&v2), "cpu: 20%/50%, memory: <unknown>/100Mi");
    }
}
