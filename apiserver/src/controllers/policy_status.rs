//! The ValidatingAdmissionPolicy status loop (kube-controller-manager's
//! `validatingadmissionpolicy-status` controller): a policy whose
//! `metadata.generation` is newer than its `status.observedGeneration` is
//! type-checked ([`crate::admission::policy::typecheck`]) and gets
//!
//! ```text
//! status:
//!   observedGeneration: <generation>
//!   typeChecking:
//!     expressionWarnings:            # left out when there is none
//!     - fieldRef: spec.validations[0].expression
//!       warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'…"
//! ```
//!
//! written through the status subresource. One node works, the holder of
//! the Lease `kube-system/validatingadmissionpolicy-status-controller`.
//! Kinds resolve through the registry's catalog and schemas through its
//! schema store, CRDs included.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use super::queue::Queue;
use crate::admission::policy::typecheck;
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::{Context, FieldValidation, UpdatedObjectInfo, WriteOptions};
use crate::registry::store::{Part, Store};
use crate::registry::Registry;
use crate::warning::Warnings;

/// The Lease of the loop, and its field manager.
pub const LEASE: &str = "validatingadmissionpolicy-status-controller";

/// Pause before a failed policy is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Queues policies whose status is behind their generation.
struct Enqueue(Queue);

impl Enqueue {
    fn changed(&self, obj: &Value) {
        if behind(obj) {
            self.0.add(meta::name(obj));
        }
    }
}

/// Whether the policy's status is behind its generation.
fn behind(obj: &Value) -> bool {
    obj["metadata"]["generation"].as_i64().unwrap_or(0) > obj["status"]["observedGeneration"].as_i64().unwrap_or(0)
}

impl EventHandler for Enqueue {
    fn on_add(&self, obj: &Value) {
        self.changed(obj);
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.changed(new);
    }
    fn on_delete(&self, _obj: &Value) {}
}

/// Sets the status computed for `generation`, unless the policy moved on.
struct SetStatus {
    generation: i64,
    warnings: Vec<Value>,
}

#[async_trait]
impl UpdatedObjectInfo for SetStatus {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, Status> {
        let Some(current) = current else { return Err(Status::not_found(crate::admission::policy::GROUP, "validatingadmissionpolicies", "")) };
        let mut obj = current.clone();
        if obj["metadata"]["generation"].as_i64().unwrap_or(0) != self.generation {
            return Ok(obj);
        }
        let mut type_checking = json!({});
        if !self.warnings.is_empty() {
            type_checking["expressionWarnings"] = json!(self.warnings);
        }
        if !obj["status"].is_object() {
            obj["status"] = json!({});
        }
        obj["status"]["observedGeneration"] = json!(self.generation);
        obj["status"]["typeChecking"] = type_checking;
        Ok(obj)
    }
    fn may_create(&self) -> bool {
        false
    }
}

/// The controller.
pub struct PolicyStatusController {
    registry: Arc<Registry>,
    policies: Arc<Store>,
    lister: Lister,
    queue: Queue,
}

impl PolicyStatusController {
    /// Starts the informer on `policies` (ValidatingAdmissionPolicies);
    /// [`PolicyStatusController::run`] does the work.
    pub fn new(registry: Arc<Registry>, policies: Arc<Store>, stop: watch::Receiver<bool>) -> Self {
        let queue = Queue::new();
        let lister = informer::start(policies.clone(), Arc::new(Enqueue(queue.clone())), stop);
        PolicyStatusController { registry, policies, lister, queue }
    }

    /// Works the queue while `leading` is true, until `stop`.
    pub async fn run(self, leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        let mut lister = self.lister.clone();
        tokio::select! {
            _ = lister.wait_synced() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let this = &self;
        self.queue.work_while_leading(leading, stop, "validatingadmissionpolicy status of", RETRY, |key| async move { this.sync(&key).await }).await;
    }

    async fn sync(&self, name: &str) -> Result<(), Status> {
        let Some(policy) = self.lister.get(name) else { return Ok(()) };
        if !behind(&policy) {
            return Ok(());
        }
        let catalog = self.registry.catalog();
        let kinds = typecheck::kinds_to_check(&policy, |g, v, r| catalog.get(g, v, r).map(|res| res.kind.clone()));
        let warnings = typecheck::expression_warnings(&policy, &kinds, self.registry.schemas());
        let info = SetStatus { generation: policy["metadata"]["generation"].as_i64().unwrap_or(0), warnings };
        let (user, sink) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: "", user: &user, user_agent: Some(LEASE), warnings: &sink, audit: None };
        let opts = WriteOptions { kind: "UpdateOptions", dry_run: false, field_manager: Some(LEASE.into()), field_validation: FieldValidation::Ignore, force: false };
        match self.policies.update_part(&ctx, name, &info, &opts, Part::STATUS).await {
            Ok(_) => Ok(()),
            Err(s) if s.is_not_found() => Ok(()),
            Err(s) => Err(s),
        }
    }
}
