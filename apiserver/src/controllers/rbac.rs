//! Feeds the RBAC authorizer and reconciles the bootstrap policy (kube's
//! RBAC informers and the `rbac/bootstrap-roles` post-start hook).
//!
//! - One [`informer`] per RBAC resource, all over the watch cache, passes
//!   every change to [`Rbac::apply`], so the authorizer's index follows
//!   the store without a read per request.
//! - Once the four have listed, the bootstrap ClusterRoles and
//!   ClusterRoleBindings ([`bootstrap`]) are reconciled through the
//!   registry's stores (admission and validation apply), on every node at
//!   every start, as every kube-apiserver does; objects annotated
//!   `rbac.authorization.kubernetes.io/autoupdate: "false"` are left
//!   alone. Then [`Health`]'s `poststarthook/rbac/bootstrap-roles` check
//!   passes. A failed pass (another node writing the same object) is
//!   retried.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::informer::{self, internal_user, EventHandler, Lister};
use crate::authz::rbac::bootstrap::{self, Reconcile};
use crate::authz::rbac::{Kind, Rbac, GROUP};
use crate::errors::Status;
use crate::health::Health;
use crate::meta;
use crate::registry::rest::{Context, Creater as _, DeleteOptions, Deleter as _, FieldValidation, Replace, Updater as _, WriteOptions};
use crate::registry::store::Store;
use crate::registry::Registry;
use crate::warning::Warnings;

/// Pause between reconciliation passes that failed.
const RETRY: Duration = Duration::from_secs(1);

/// Passes one resource's changes to the authorizer.
struct Feed {
    rbac: Arc<Rbac>,
    kind: Kind,
}

impl EventHandler for Feed {
    fn on_add(&self, obj: &Value) {
        self.rbac.apply(self.kind, obj, false);
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.rbac.apply(self.kind, new, false);
    }
    fn on_delete(&self, obj: &Value) {
        self.rbac.apply(self.kind, obj, true);
    }
}

/// Starts the informers that feed `rbac`, then reconciles the bootstrap
/// policy and tells `health`; returns the task.
pub fn start(registry: Arc<Registry>, rbac: Arc<Rbac>, health: Arc<Health>, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let mut listers = Vec::new();
    let mut stores = Vec::new();
    for kind in Kind::ALL {
        let Some(store) = registry.store(GROUP, "v1", kind.resource()) else {
            tracing::warn!("{} are not served: RBAC cannot see them", kind.resource());
            continue;
        };
        listers.push((kind, informer::start(store.clone(), Arc::new(Feed { rbac: rbac.clone(), kind }), stop.clone())));
        stores.push((kind, store));
    }
    let mut stop = stop;
    tokio::spawn(async move {
        for (_, l) in listers.iter_mut() {
            tokio::select! {
                _ = l.wait_synced() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
        let store = |k: Kind| stores.iter().find(|(kind, _)| *kind == k).map(|(_, s)| s.clone());
        let lister = |k: Kind| listers.iter().find(|(kind, _)| *kind == k).map(|(_, l)| l.clone());
        let (Some(roles), Some(bindings), Some(role_lister), Some(binding_lister)) =
            (store(Kind::ClusterRole), store(Kind::ClusterRoleBinding), lister(Kind::ClusterRole), lister(Kind::ClusterRoleBinding))
        else {
            return;
        };
        loop {
            match reconcile_all(&roles, &role_lister, &bindings, &binding_lister).await {
                Ok(()) => {
                    health.set_rbac_bootstrap_pending(false);
                    tracing::info!("RBAC bootstrap policy reconciled");
                    return;
                }
                Err(e) => tracing::warn!("reconciling the RBAC bootstrap policy: {}; retrying", e.message),
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    })
}

/// One pass over the bootstrap ClusterRoles, then ClusterRoleBindings,
/// reading what is stored from the informers.
async fn reconcile_all(roles: &Store, role_lister: &Lister, bindings: &Store, binding_lister: &Lister) -> Result<(), Status> {
    let user = internal_user();
    let warnings = Warnings::default();
    let ctx = Context { namespace: "", user: &user, user_agent: Some("rbac-bootstrap"), warnings: &warnings, audit: None };
    let opts = |kind| WriteOptions { kind, dry_run: false, field_manager: Some("kube-apiserver".into()), field_validation: FieldValidation::Ignore, force: false };
    let sets = [(roles, role_lister, bootstrap::cluster_roles()), (bindings, binding_lister, bootstrap::cluster_role_bindings())];
    for (store, lister, expected) in sets {
        for want in expected {
            let name = meta::name(&want).to_string();
            let existing = lister.get(&name);
            match bootstrap::reconcile(existing.as_deref(), &want) {
                Reconcile::Keep => {
                    if existing.as_deref().is_some_and(bootstrap::is_protected) {
                        tracing::debug!("{} {name} has autoupdate=false: left alone", store.resource().qualified());
                    }
                }
                Reconcile::Create(obj) => match store.create(&ctx, obj, &opts("CreateOptions")).await {
                    Ok(_) => {}
                    Err(e) if e.is_already_exists() => {}
                    Err(e) => return Err(e),
                },
                Reconcile::Update(obj) => {
                    store.update(&ctx, &name, &Replace(obj), &opts("UpdateOptions")).await?;
                }
                Reconcile::Recreate(obj) => {
                    match store.delete(&ctx, &name, &DeleteOptions::default()).await {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(e),
                    }
                    match store.create(&ctx, obj, &opts("CreateOptions")).await {
                        Ok(_) => {}
                        Err(e) if e.is_already_exists() => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    Ok(())
}
