//! ClusterRole aggregation (kube-controller-manager's
//! `clusterroleaggregation` controller): a ClusterRole with an
//! `aggregationRule` gets as its rules the rules of every other ClusterRole
//! whose labels match one of its `clusterRoleSelectors`, in name order,
//! each rule once. This is what gives the bootstrap `admin`, `edit` and
//! `view` their rules (from `system:aggregate-to-*`), and what lets users
//! extend them with labelled roles of their own.
//!
//! Any change of any ClusterRole queues every aggregating ClusterRole
//! (kube does the same: the selectors may match the changed role, before or
//! after the change). One node works the queue, the holder of the Lease
//! `kube-system/clusterrole-aggregation-controller`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use super::queue::Queue;
use crate::authz::rbac::rules::PolicyRule;
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::{Context, FieldValidation, UpdatedObjectInfo, Updater as _, WriteOptions};
use crate::registry::store::Store;
use crate::selectors::LabelSelector;
use crate::warning::Warnings;

/// The Lease of the loop.
pub const LEASE: &str = "clusterrole-aggregation-controller";

/// Pause before a failed role is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Keeps the names of the aggregating roles and queues them all on any
/// change.
struct Enqueue {
    queue: Queue,
    aggregating: Mutex<BTreeSet<String>>,
}

impl Enqueue {
    fn changed(&self, obj: &Value, deleted: bool) {
        let mut names = self.aggregating.lock();
        let name = meta::name(obj).to_string();
        if !deleted && obj["aggregationRule"].is_object() {
            names.insert(name);
        } else {
            names.remove(&name);
        }
        for n in names.iter() {
            self.queue.add(n);
        }
    }
}

impl EventHandler for Enqueue {
    fn on_add(&self, obj: &Value) {
        self.changed(obj, false);
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.changed(new, false);
    }
    fn on_delete(&self, obj: &Value) {
        self.changed(obj, true);
    }
}

/// The rules `role` aggregates from `all` ClusterRoles (in name order), or
/// `None` when it has no `aggregationRule`.
pub fn aggregated_rules(role: &Value, all: &[Arc<Value>]) -> Option<Vec<PolicyRule>> {
    let selectors: Vec<LabelSelector> = role["aggregationRule"]["clusterRoleSelectors"].as_array()?.iter().map(LabelSelector::from_object).collect();
    let me = meta::name(role);
    let mut rules: Vec<PolicyRule> = Vec::new();
    for other in all.iter().filter(|o| meta::name(o) != me) {
        // An empty selector selects every role, as kube's
        // `LabelSelectorAsSelector` does.
        if !selectors.iter().any(|s| s.matches_object(other)) {
            continue;
        }
        for r in PolicyRule::all_from(other) {
            if !rules.contains(&r) {
                rules.push(r);
            }
        }
    }
    Some(rules)
}

/// Sets the rules of the stored role (its resourceVersion kept: a
/// concurrent change is a conflict, and the role is queued again).
struct SetRules(Value);

#[async_trait]
impl UpdatedObjectInfo for SetRules {
    async fn updated_object(&self, _current: Option<&Value>) -> Result<Value, Status> {
        Ok(self.0.clone())
    }
    fn may_create(&self) -> bool {
        false
    }
}

/// The controller.
pub struct AggregationController {
    roles: Arc<Store>,
    lister: Lister,
    queue: Queue,
}

impl AggregationController {
    /// Starts the informer on ClusterRoles; [`AggregationController::run`]
    /// does the work.
    pub fn new(roles: Arc<Store>, stop: watch::Receiver<bool>) -> Self {
        let queue = Queue::new();
        let lister = informer::start(roles.clone(), Arc::new(Enqueue { queue: queue.clone(), aggregating: Mutex::new(BTreeSet::new()) }), stop);
        AggregationController { roles, lister, queue }
    }

    /// Works the queue while `leading` is true, until `stop`.
    pub async fn run(self, leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let this = &self;
        self.queue.work_while_leading(leading, stop, "aggregating clusterrole", RETRY, |key| async move { this.sync(&key).await }).await;
    }

    async fn sync(&self, name: &str) -> Result<(), Status> {
        let Some(role) = self.lister.get(name) else { return Ok(()) };
        let Some(rules) = aggregated_rules(&role, &self.lister.list()) else { return Ok(()) };
        if PolicyRule::all_from(&role) == rules {
            return Ok(());
        }
        let mut updated = (*role).clone();
        updated["rules"] = json!(rules.iter().map(PolicyRule::to_json).collect::<Vec<_>>());
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: "", user: &user, user_agent: Some("clusterrole-aggregation-controller"), warnings: &warnings, audit: None };
        let opts = WriteOptions { kind: "UpdateOptions", dry_run: false, field_manager: Some("clusterrole-aggregation-controller".into()), field_validation: FieldValidation::Ignore, force: false };
        match self.roles.update(&ctx, name, &SetRules(updated), &opts).await {
            Ok(_) => Ok(()),
            Err(s) if s.is_not_found() => Ok(()),
            Err(s) => Err(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_matching_roles_in_name_order_once() {
        let role = |name: &str, labels: Value, rules: Value| Arc::new(json!({"metadata": {"name": name, "labels": labels}, "rules": rules}));
        let get = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let list = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]});
        let view = json!({"metadata": {"name": "view"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "view"}}]}});
        let all = vec![
            role("a", json!({"agg": "view"}), json!([list.clone()])),
            role("b", json!({"agg": "edit"}), json!([get.clone()])),
            role("c", json!({"agg": "view"}), json!([get.clone(), list.clone()])),
            Arc::new(view.clone()),
        ];
        let got = aggregated_rules(&view, &all).unwrap_or_default();
        assert_eq!(got, vec![PolicyRule::from_json(&list), PolicyRule::from_json(&get)]);
        assert_eq!(aggregated_rules(&all[0], &all), None);
    }
}
