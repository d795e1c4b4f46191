//! `MutatingAdmissionWebhook` (kube `admission/plugin/webhook/mutating`):
//! the webhooks of every MutatingWebhookConfiguration, called one after
//! the other in [`super::config`] order; each sees the object as the
//! webhooks before it left it, and its JSON Patch is applied to it.
//!
//! Reinvocation (`reinvocationPolicy: IfNeeded`), as kube's
//! `webhookReinvokeContext` does it: a webhook that asks for it is
//! remembered once called; when a later webhook changes the object, the
//! remembered ones are marked for the second round and the plugin asks the
//! chain for that round ([`Mutating::admit_remembering`]). In the second
//! round ([`Attributes::reinvocation`]) only marked webhooks are called —
//! plus every remembered one when another plugin changed the object since
//! this plugin last ran — so a webhook is never called for the first time
//! on reinvocation, and none more than twice.
//!
//! Each call is recorded in the audit event as kube records it:
//! `mutation.webhook.admission.k8s.io/round_<r>_index_<i>` =
//! `{"configuration":"…","webhook":"…","mutated":true|false}`, the patch
//! as `patch.webhook.admission.k8s.io/round_<r>_index_<i>` =
//! `{"configuration":"…","webhook":"…","patch":[…],"patchType":"JSONPatch"}`
//! at level Request and above, and a call that failed open as
//! `failed-open.mutation.webhook.admission.k8s.io/round_<r>_index_<i>` =
//! `<webhook>`; `<i>` is the webhook's place among all mutating webhooks.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::config::{Hook, Hooks};
use super::dispatch::{self, CallError};
use super::review;
use crate::admission::plugins::Context;
use crate::admission::{Attributes, Memory, Mutating, Operation};
use crate::errors::go_quote;
use crate::errors::Status;
use crate::storage::Storage;

/// The plugin.
pub struct MutatingWebhooks {
    hooks: Hooks,
    storage: Arc<dyn Storage>,
}

impl MutatingWebhooks {
    /// The plugin over the configurations and namespaces of `ctx.sources`.
    pub fn new(ctx: &Context) -> Self {
        MutatingWebhooks { hooks: Hooks::new(ctx.sources.clone(), ctx.authorizer.clone(), true), storage: ctx.storage.clone() }
    }
}

/// What the plugin keeps of one request for its second round (kube's
/// `webhookReinvokeContext`).
#[derive(Default)]
struct Reinvocation {
    /// The object as the plugin last left it.
    last_output: Option<Value>,
    /// `IfNeeded` webhooks called since the object last changed.
    previously_invoked: HashSet<String>,
    /// Webhooks to call in the second round.
    reinvoke: HashSet<String>,
}

impl Reinvocation {
    fn require_reinvoking_previously_invoked(&mut self) {
        self.reinvoke.extend(self.previously_invoked.drain());
    }
}

#[async_trait]
impl Mutating for MutatingWebhooks {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn handles(&self, op: Operation) -> bool {
        self.hooks.handles(op)
    }

    fn reinvocable(&self) -> bool {
        true
    }

    /// Both rounds at once, for a caller that keeps no memory.
    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        let mut memory = Memory::default();
        if self.admit_remembering(attrs, &mut memory).await? {
            let again = attrs.reinvocation;
            attrs.reinvocation = true;
            let r = self.admit_remembering(attrs, &mut memory).await;
            attrs.reinvocation = again;
            r?;
        }
        Ok(())
    }

    async fn admit_remembering(&self, attrs: &mut Attributes<'_>, memory: &mut Memory) -> Result<bool, Status> {
        if dispatch::exempt(attrs) {
            return Ok(false);
        }
        dispatch::wait_ready(&self.hooks, attrs).await?;
        let generation = self.hooks.current();
        if generation.hooks.is_empty() {
            return Ok(false);
        }
        let state: &mut Reinvocation = memory.get();
        if attrs.reinvocation && state.last_output.as_ref() != attrs.object.as_ref() {
            // Another plugin changed the object in its second round.
            state.require_reinvoking_previously_invoked();
        }
        let result = self.dispatch(attrs, &generation.hooks, state).await;
        state.last_output = attrs.object.clone();
        result
    }
}

impl MutatingWebhooks {
    /// One round over `hooks`; returns whether a webhook changed the object.
    async fn dispatch(&self, attrs: &mut Attributes<'_>, hooks: &[Arc<Hook>], state: &mut Reinvocation) -> Result<bool, Status> {
        let round = usize::from(attrs.reinvocation);
        let mut changed_any = false;
        for (index, hook) in hooks.iter().enumerate() {
            if !dispatch::should_call(hook, attrs, &self.hooks, self.storage.as_ref()).await? {
                continue;
            }
            // Never called for the first time in the second round.
            if attrs.reinvocation && !state.reinvoke.contains(&hook.id) {
                continue;
            }
            let mut changed = false;
            let result = call(hook, attrs, round, index, &mut changed).await;
            annotate(attrs, &mutation_key("", round, index), &format!("{{\"configuration\":{},\"webhook\":{},\"mutated\":{changed}}}", json_str(&hook.configuration), json_str(&hook.name)));
            if changed {
                state.require_reinvoking_previously_invoked();
                changed_any = true;
            }
            if hook.reinvoke_if_needed {
                state.previously_invoked.insert(hook.id.clone());
            }
            match result {
                Ok(()) => {}
                Err(CallError::Calling(reason)) if hook.fail_open => {
                    tracing::warn!("failed calling webhook, failing open {}: failed calling webhook {}: {reason}", hook.name, go_quote(&hook.name));
                    annotate(attrs, &mutation_key("failed-open.", round, index), &hook.name);
                }
                Err(CallError::Calling(reason)) => {
                    tracing::warn!("failed calling webhook, failing closed {}: {reason}", hook.name);
                    return Err(dispatch::failed_closed(&hook.name, &reason));
                }
                Err(CallError::Status(s)) => return Err(*s),
            }
        }
        Ok(changed_any)
    }
}

/// Calls one webhook and applies its patch to `attrs.object`; `changed`
/// says whether the patch changed it (kube `callAttrMutatingHook`).
async fn call(hook: &Hook, attrs: &mut Attributes<'_>, round: usize, index: usize, changed: &mut bool) -> Result<(), CallError> {
    let answer = dispatch::exchange(hook, attrs, true).await?;
    if !answer.allowed {
        return Err(CallError::Status(Box::new(review::denied(&hook.name, &answer.status))));
    }
    let Some(patch_bytes) = answer.patch else { return Ok(()) };
    // Only a body that is not a list of operations is undecodable (subject
    // to the failure policy); an operation that does not apply is a 500.
    let patch = super::patch::decode(&patch_bytes).map_err(|e| CallError::Calling(format!("received undecodable patch in webhook response: {e}")))?;
    if patch.0.is_empty() {
        return Ok(());
    }
    let Some(object) = attrs.object.as_mut() else {
        return Err(CallError::Status(Box::new(Status::internal(format!("admission webhook {} attempted to modify the object, which is not supported for this operation", go_quote(&hook.name))))));
    };
    if answer.patch_type != "JSONPatch" {
        return Err(CallError::Calling(format!("unsupported patch type {}", go_quote(&answer.patch_type))));
    }
    let patched = super::patch::apply(object, &patch).map_err(|e| CallError::Status(Box::new(Status::internal(e))))?;
    *changed = patched != *object;
    *object = patched;
    if attrs.audit.is_some_and(|a| a.records_request_bodies()) {
        let patch_json = serde_json::to_string(&patch.0).unwrap_or_default();
        let value = format!("{{\"configuration\":{},\"webhook\":{},\"patch\":{patch_json},\"patchType\":\"JSONPatch\"}}", json_str(&hook.configuration), json_str(&hook.name));
        annotate(attrs, &format!("patch.webhook.admission.k8s.io/round_{round}_index_{index}"), &value);
    }
    Ok(())
}

/// `<prefix>mutation.webhook.admission.k8s.io/round_<round>_index_<index>`.
fn mutation_key(prefix: &str, round: usize, index: usize) -> String {
    format!("{prefix}mutation.webhook.admission.k8s.io/round_{round}_index_{index}")
}

fn annotate(attrs: &Attributes<'_>, key: &str, value: &str) {
    attrs.add_audit_annotation(key, value);
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}
