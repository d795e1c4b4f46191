//! `ValidatingAdmissionWebhook` (kube `admission/plugin/webhook/validating`):
//! every matching webhook of every ValidatingWebhookConfiguration is
//! called at once, on the object as mutation and validation left it; any
//! denial, or any failed call under `failurePolicy: Fail`, fails the
//! request with the first such error to arrive (kube also returns the
//! first of its error channel). A call that fails open is recorded in the
//! audit event as
//! `failed-open.validating.webhook.admission.k8s.io/round_0_index_<i>` =
//! `<webhook>`, `<i>` counting the webhooks called.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};

use super::config::{Hook, Hooks};
use super::dispatch::{self, CallError};
use super::review;
use crate::admission::plugins::Context;
use crate::admission::{Attributes, Operation, Validating};
use crate::errors::go_quote;
use crate::errors::Status;
use crate::storage::Storage;

/// The plugin.
pub struct ValidatingWebhooks {
    hooks: Hooks,
    storage: Arc<dyn Storage>,
}

impl ValidatingWebhooks {
    /// The plugin over the configurations and namespaces of `ctx.sources`.
    pub fn new(ctx: &Context) -> Self {
        ValidatingWebhooks { hooks: Hooks::new(ctx.sources.clone(), ctx.authorizer.clone(), false), storage: ctx.storage.clone() }
    }
}

#[async_trait]
impl Validating for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn handles(&self, op: Operation) -> bool {
        self.hooks.handles(op)
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        if dispatch::exempt(attrs) {
            return Ok(());
        }
        dispatch::wait_ready(&self.hooks, attrs).await?;
        let generation = self.hooks.current();
        let mut relevant: Vec<&Arc<Hook>> = Vec::new();
        for hook in &generation.hooks {
            if dispatch::should_call(hook, attrs, &self.hooks, self.storage.as_ref()).await? {
                relevant.push(hook);
            }
        }
        let mut calls: FuturesUnordered<_> = relevant.into_iter().enumerate().map(|(index, hook)| async move { (index, hook, call(hook, attrs).await) }).collect();
        let mut first_error = None;
        while let Some((index, hook, result)) = calls.next().await {
            let error = match result {
                Ok(()) => continue,
                Err(CallError::Calling(reason)) if hook.fail_open => {
                    tracing::warn!("failed calling webhook, failing open {}: failed calling webhook {}: {reason}", hook.name, go_quote(&hook.name));
                    attrs.add_audit_annotation(&format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{index}"), &hook.name);
                    continue;
                }
                Err(CallError::Calling(reason)) => {
                    tracing::warn!("failed calling webhook, failing closed {}: {reason}", hook.name);
                    dispatch::failed_closed(&hook.name, &reason)
                }
                Err(CallError::Status(s)) => {
                    tracing::warn!("rejected by webhook {:?}: {}", hook.name, s.message);
                    *s
                }
            };
            first_error.get_or_insert(error);
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Calls one webhook (kube's validating `callHook`).
async fn call(hook: &Hook, attrs: &Attributes<'_>) -> Result<(), CallError> {
    let answer = dispatch::exchange(hook, attrs, false).await?;
    if answer.allowed {
        Ok(())
    } else {
        Err(CallError::Status(Box::new(review::denied(&hook.name, &answer.status))))
    }
}
