//! `DefaultTolerationSeconds` (kube
//! `plugin/pkg/admission/defaulttolerationseconds`): every Pod tolerates
//! the `NoExecute` taints `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` for 300 s (kube's
//! `--default-not-ready-toleration-seconds` and
//! `--default-unreachable-toleration-seconds`), unless it already
//! tolerates them: a toleration with that key (or no key) and effect
//! `NoExecute` (or no effect). Pod creates and updates.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::lookup;
use super::{Attributes, Mutating, Operation};
use crate::errors::Status;

/// The taint of a node whose Ready condition is False or Unknown.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint of a node the node controller cannot reach.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The seconds both tolerations get.
pub const SECONDS: i64 = 300;

/// The plugin.
pub struct DefaultTolerationSeconds;

fn tolerates(tolerations: &[Value], key: &str) -> bool {
    tolerations.iter().any(|t| {
        let k = t["key"].as_str().unwrap_or("");
        let effect = t["effect"].as_str().unwrap_or("");
        (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
    })
}

/// Adds the missing tolerations to a Pod `spec`.
fn add_defaults(spec: &mut Value) {
    let have: Vec<Value> = spec["tolerations"].as_array().cloned().unwrap_or_default();
    let mut add = Vec::new();
    for key in [NOT_READY, UNREACHABLE] {
        if !tolerates(&have, key) {
            add.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": SECONDS}));
        }
    }
    if add.is_empty() {
        return;
    }
    if !spec["tolerations"].is_array() {
        spec["tolerations"] = json!([]);
    }
    if let Some(list) = spec["tolerations"].as_array_mut() {
        list.extend(add);
    }
}

#[async_trait]
impl Mutating for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if !lookup::is_core(attrs, "pods") {
            return Ok(());
        }
        if let Some(spec) = attrs.object.as_mut().and_then(|p| p.get_mut("spec")).filter(|s| s.is_object()) {
            add_defaults(spec);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_only_what_is_not_tolerated() {
        let mut spec = json!({"containers": []});
        add_defaults(&mut spec);
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
        let mut spec = json!({"tolerations": [{"key": UNREACHABLE, "operator": "Exists", "tolerationSeconds": 60}]});
        add_defaults(&mut spec);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
        assert_eq!(spec["tolerations"][1]["key"], NOT_READY);
        let mut spec = json!({"tolerations": [{"operator": "Exists"}]});
        add_defaults(&mut spec);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(1));
    }
}
