//! Leader election on a `coordination.k8s.io/v1` Lease (client-go
//! `leaderelection` with its `LeaseLock`), for loops that must run once per
//! cluster although every node starts them.
//!
//! Each node tries, every [`RETRY_PERIOD`], to take or renew the Lease
//! `kube-system/<name>`:
//! - no Lease: create it, holding it;
//! - held by this node: renew `renewTime`;
//! - held by another node: take it over once its record has not changed for
//!   [`LEASE_DURATION`], as measured on this node's clock (a holder that
//!   died stops renewing), counting one more `leaseTransitions`.
//!
//! Writes go through the Lease store with the object's resourceVersion, so
//! two nodes racing for it cannot both win. A leader that cannot renew for
//! [`RENEW_DEADLINE`] stops leading. The identity is the node's name
//! (`--name`), so a restarted node takes its own Lease back at once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::informer::internal_user;
use crate::errors::Status;
use crate::registry::rest::{Context, Creater as _, GetOptions, Getter as _, Replace, Updater as _, WriteOptions};
use crate::registry::store::Store;
use crate::warning::Warnings;

/// How long a Lease holds without renewal (client-go's default for
/// kube-controller-manager: 15 s).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long a leader keeps trying to renew before it gives up (10 s).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often a node tries to take or renew (2 s).
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The namespace of the Leases.
pub const NAMESPACE: &str = "kube-system";

/// A `metav1.MicroTime` of now.
fn micro_now() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// One election.
pub struct Election {
    leases: Arc<Store>,
    name: String,
    identity: String,
    /// The holder record last seen and when it was first seen.
    observed: Option<(Value, Instant)>,
    last_renew: Option<Instant>,
}

fn write_options() -> WriteOptions {
    WriteOptions { kind: "UpdateOptions", dry_run: false, field_manager: Some("leader-election".into()), field_validation: crate::registry::rest::FieldValidation::Ignore, force: false }
}

impl Election {
    /// An election for the Lease `kube-system/<name>` in `leases` (the
    /// coordination.k8s.io Lease store), as `identity`.
    pub fn new(leases: Arc<Store>, name: &str, identity: &str) -> Self {
        Election { leases, name: name.into(), identity: identity.into(), observed: None, last_renew: None }
    }

    /// Runs the election until `stop`, publishing whether this node leads;
    /// on stop, a held Lease is released so another node takes over at once.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut stop: watch::Receiver<bool>) {
        loop {
            let held = match self.try_acquire_or_renew().await {
                Ok(held) => held,
                Err(e) => {
                    tracing::debug!("lease {NAMESPACE}/{}: {e}", self.name);
                    // A leader keeps leading through short store hiccups.
                    self.last_renew.is_some_and(|t| t.elapsed() < RENEW_DEADLINE) && *leading.borrow()
                }
            };
            if held {
                self.last_renew = Some(Instant::now());
            }
            leading.send_if_modified(|l| std::mem::replace(l, held) != held);
            tokio::select! {
                _ = tokio::time::sleep(RETRY_PERIOD) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        if *leading.borrow() {
            self.release().await;
        }
        leading.send_replace(false);
    }

    fn ctx<'a>(user: &'a crate::authn::UserInfo, warnings: &'a Warnings) -> Context<'a> {
        Context { namespace: NAMESPACE, user, user_agent: Some("leader-election"), warnings, audit: None }
    }

    /// One round: whether this node holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, Status> {
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Self::ctx(&user, &warnings);
        let now = micro_now();
        let duration = LEASE_DURATION.as_secs();
        let current = match self.leases.get(&ctx, &self.name, &GetOptions::default()).await {
            Ok(l) => l,
            Err(s) if s.is_not_found() => {
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": NAMESPACE},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": duration, "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
                });
                let mut opts = write_options();
                opts.kind = "CreateOptions";
                return match self.leases.create(&ctx, lease, &opts).await {
                    Ok(_) => Ok(true),
                    Err(s) if s.is_already_exists() => Ok(false),
                    Err(s) => Err(s),
                };
            }
            Err(s) => return Err(s),
        };
        let spec = &current["spec"];
        let holder = spec["holderIdentity"].as_str().unwrap_or("");
        let record = json!([spec["holderIdentity"], spec["renewTime"], spec["leaseTransitions"]]);
        let changed = self.observed.as_ref().is_none_or(|(r, _)| *r != record);
        if changed {
            self.observed = Some((record, Instant::now()));
        }
        let expired = self.observed.as_ref().is_some_and(|(_, t)| t.elapsed() >= LEASE_DURATION);
        let mut next = current.clone();
        if holder == self.identity {
            next["spec"]["renewTime"] = json!(now);
        } else if holder.is_empty() || expired {
            let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0) + 1;
            next["spec"] = json!({"holderIdentity": self.identity, "leaseDurationSeconds": duration, "acquireTime": now, "renewTime": now, "leaseTransitions": transitions});
        } else {
            return Ok(false);
        }
        match self.leases.update(&ctx, &self.name, &Replace(next), &write_options()).await {
            Ok(_) => Ok(true),
            Err(s) if s.is_conflict() => Ok(false),
            Err(s) => Err(s),
        }
    }

    /// Gives the Lease up (client-go's `ReleaseOnCancel`).
    async fn release(&mut self) {
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Self::ctx(&user, &warnings);
        let Ok(mut current) = self.leases.get(&ctx, &self.name, &GetOptions::default()).await else { return };
        if current["spec"]["holderIdentity"] != self.identity.as_str() {
            return;
        }
        if let Some(spec) = current["spec"].as_object_mut() {
            spec.remove("holderIdentity");
        }
        current["spec"]["leaseDurationSeconds"] = json!(1);
        let now = micro_now();
        current["spec"]["renewTime"] = json!(now);
        current["spec"]["acquireTime"] = json!(now);
        if let Err(e) = self.leases.update(&ctx, &self.name, &Replace(current), &write_options()).await {
            tracing::debug!("release lease {NAMESPACE}/{}: {e}", self.name);
        }
    }
}
