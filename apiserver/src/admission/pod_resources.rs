//! A Pod's resource requests and limits as a whole (kube
//! `k8s.io/component-helpers/resource` `PodRequests` and `PodLimits`), for
//! LimitRanger's `Pod` limits and ResourceQuota's compute usage.
//!
//! For each resource: the sum over the containers and the restartable
//! ("sidecar") init containers, or, when larger, what any one ordinary
//! init container needs together with the sidecars started before it:
//!
//! ```text
//! containers a=1, b=2; init i1=4; sidecar s=1, then init i2=3
//!   running:  a + b + s        = 4
//!   init i1:  4                = 4
//!   init i2:  3 + s            = 4
//!   pod     = max(4, 4, 4)     = 4
//! ```
//!
//! Requests may add `spec.overhead` (RuntimeClass); limits add it only to
//! resources that have a limit. Pod-level `spec.resources` (the
//! PodLevelResources feature, off by default in 1.33) is not read.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::quantity::{self, Quantity};

/// Resource name → quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Which half of `resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `resources.requests`.
    Requests,
    /// `resources.limits`.
    Limits,
}

impl Side {
    fn field(self) -> &'static str {
        match self {
            Side::Requests => "requests",
            Side::Limits => "limits",
        }
    }
}

/// One container's requests or limits.
pub fn container(c: &Value, side: Side) -> ResourceList {
    quantity::list(&c["resources"][side.field()])
}

/// Adds `from` into `into`.
pub fn add_into(into: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        let sum = into.get(k).map_or(*v, |have| have.add(v));
        into.insert(k.clone(), sum);
    }
}

fn max_into(into: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        if into.get(k).is_none_or(|have| v > have) {
            into.insert(k.clone(), *v);
        }
    }
}

/// The Pod's requests or limits, with `spec.overhead` when
/// `with_overhead`.
pub fn pod(pod: &Value, side: Side, with_overhead: bool) -> ResourceList {
    let spec = &pod["spec"];
    let mut total = ResourceList::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add_into(&mut total, &container(c, side));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let own = container(c, side);
        let needs = if c["restartPolicy"] == "Always" {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut t = own;
            add_into(&mut t, &sidecars);
            t
        };
        max_into(&mut init_max, &needs);
    }
    max_into(&mut total, &init_max);
    if with_overhead {
        let overhead = quantity::list(&spec["overhead"]);
        match side {
            Side::Requests => add_into(&mut total, &overhead),
            Side::Limits => {
                for (k, v) in total.iter_mut() {
                    if let Some(o) = overhead.get(k) {
                        *v = v.add(o);
                    }
                }
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn req(cpu: &str) -> Value {
        json!({"resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}})
    }

    #[test]
    fn sidecars_count_with_containers_and_init_containers_alone() {
        let mut s = req("1");
        s["restartPolicy"] = json!("Always");
        let p = json!({"spec": {
            "containers": [req("1"), req("2")],
            "initContainers": [req("4"), s, req("3")],
            "overhead": {"cpu": "100m", "memory": "10Mi"},
        }});
        assert_eq!(pod(&p, Side::Requests, false).get("cpu").map(ToString::to_string), Some("4".into()));
        let with = pod(&p, Side::Requests, true);
        assert_eq!(with.get("cpu").map(ToString::to_string), Some("4100m".into()));
        assert_eq!(with.get("memory").map(ToString::to_string), Some("10Mi".into()));
        let limits = pod(&p, Side::Limits, true);
        assert_eq!(limits.get("memory"), None);
        let p = json!({"spec": {"containers": [req("1")], "initContainers": [req("5")]}});
        assert_eq!(pod(&p, Side::Limits, false).get("cpu").map(ToString::to_string), Some("5".into()));
    }
}
