//! Background loops the API server runs itself (kube's
//! kube-controller-manager loops that the API depends on, and the
//! apiserver's own post-start hooks).
//!
//! A controller is fed by [`informer`]s (a local copy of a resource kept by
//! a list and a watch through the registry's stores, hence the watch
//! cache), queues keys in a de-duplicating [`queue::Queue`], and writes
//! through the registry's stores, like any client: admission, validation and
//! finalizers apply. Controllers never call HTTP handlers.
//!
//! Every node starts every controller at boot. A loop that must run once
//! per cluster works only while its node holds the loop's Lease
//! ([`leader`]); when that node dies, another takes the Lease over and the
//! loop carries on there, from what its informer shows.
//!
//! | controller | Lease | what it does |
//! |---|---|---|
//! | [`namespace`] | `kube-system/namespace-controller` | empties and finalizes namespaces being deleted |
//! | [`crd`] (conditions, serving) | none: every node | sets CRDs' `NamesAccepted` and `Established`, serves their versions |
//! | [`crd`] (cleanup) | `kube-system/crd-finalizer` | deletes a deleted CRD's objects, then drops its finalizer |
//! | [`aggregation`] | `kube-system/clusterrole-aggregation-controller` | fills aggregating ClusterRoles' rules from the roles their selectors match |
//! | [`rbac`] | none: every node | feeds the RBAC authorizer; reconciles the bootstrap policy at start |
//! | [`admission`] | none: every node | keeps the local copies admission plugins read (webhook configurations, policies, namespaces, …) |
//! | [`service_account`] | `kube-system/service-account-controllers` | `default` ServiceAccounts, `kube-root-ca.crt` ConfigMaps, legacy token Secrets |
//! | [`resource_quota`] | `kube-system/resourcequota-controller` | ResourceQuotas' `status.hard` and `status.used`, recounted |
//! | [`storage_protection`] | `kube-system/storage-protection-controller` | drops the protection finalizers of deleted claims no Pod uses and of deleted volumes not bound |
//! | [`policy_status`] | `kube-system/validatingadmissionpolicy-status-controller` | ValidatingAdmissionPolicies' `status.typeChecking` |

pub mod admission;
pub mod aggregation;
pub mod crd;
pub mod informer;
pub mod leader;
pub mod namespace;
pub mod node;
pub mod policy_status;
pub mod queue;
pub mod rbac;
pub mod resource_quota;
pub mod service_account;
pub mod storage_protection;

use std::sync::Arc;

use tokio::sync::watch;

use crate::registry::Registry;

/// The running controllers.
pub struct Controllers {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Controllers {
    /// Stops every controller and releases the Leases held.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// What the RBAC loop feeds and tells: the authorizer and the health
/// checks that wait for the bootstrap policy.
pub struct RbacFeed {
    /// The RBAC authorizer of `--authorization-mode`.
    pub rbac: Arc<crate::authz::rbac::Rbac>,
    /// The node's health.
    pub health: Arc<crate::health::Health>,
}

/// Starts every controller on this node, whose identity in Leases is
/// `identity` (its member name), the admission plugins' informers when
/// `admission` is given, the RBAC loop when `rbac` is given, the
/// Node authorizer's feed when `node` is and the ServiceAccount loops when
/// `service_accounts` is. Call it inside a Tokio runtime.
pub fn start(
    registry: Arc<Registry>,
    identity: &str,
    admission: Option<Arc<crate::admission::sources::Sources>>,
    rbac: Option<RbacFeed>,
    node: Option<Arc<crate::authz::node::Graph>>,
    service_accounts: Option<service_account::Feed>,
) -> Controllers {
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    if let Some(sources) = admission {
        admission::start(&registry, &sources, stopped.clone());
    }
    if let Some(graph) = node {
        node::start(&registry, graph, stopped.clone());
    }
    if let Some(f) = rbac {
        tasks.push(rbac::start(registry.clone(), f.rbac, f.health, stopped.clone()));
    }
    let stores = (registry.store("", "v1", "namespaces"), registry.store("coordination.k8s.io", "v1", "leases"));
    if let (Some(namespaces), Some(leases)) = stores {
        let (leading_tx, leading) = watch::channel(false);
        let election = leader::Election::new(leases, namespace::LEASE, identity);
        tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
        let c = namespace::NamespaceController::new(registry.clone(), namespaces, stopped.clone());
        tasks.push(tokio::spawn(c.run(leading, stopped.clone())));
    } else {
        tracing::warn!("namespaces or leases are not served: no namespace controller");
    }
    let stores = (registry.store(crate::registry::apiextensions::GROUP, "v1", "customresourcedefinitions"), registry.store("coordination.k8s.io", "v1", "leases"));
    if let (Some(crds), Some(leases)) = stores {
        let c = crd::CrdController::new(registry.clone(), crds, stopped.clone());
        tasks.push(tokio::spawn(c.clone().run_serving(stopped.clone())));
        let (leading_tx, leading) = watch::channel(false);
        let election = leader::Election::new(leases, crd::LEASE, identity);
        tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
        tasks.push(tokio::spawn(c.run_cleanup(leading, stopped.clone())));
    } else {
        tracing::warn!("customresourcedefinitions or leases are not served: no CRD controller");
    }
    let stores = (registry.store(crate::authz::rbac::GROUP, "v1", "clusterroles"), registry.store("coordination.k8s.io", "v1", "leases"));
    if let (Some(roles), Some(leases)) = stores {
        let (leading_tx, leading) = watch::channel(false);
        let election = leader::Election::new(leases, aggregation::LEASE, identity);
        tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
        let c = aggregation::AggregationController::new(roles, stopped.clone());
        tasks.push(tokio::spawn(c.run(leading, stopped.clone())));
    } else {
        tracing::warn!("clusterroles or leases are not served: no ClusterRole aggregation");
    }
    let stores = (registry.store(crate::admission::policy::GROUP, "v1", "validatingadmissionpolicies"), registry.store("coordination.k8s.io", "v1", "leases"));
    if let (Some(policies), Some(leases)) = stores {
        let (leading_tx, leading) = watch::channel(false);
        let election = leader::Election::new(leases, policy_status::LEASE, identity);
        tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
        let c = policy_status::PolicyStatusController::new(registry.clone(), policies, stopped.clone());
        tasks.push(tokio::spawn(c.run(leading, stopped.clone())));
    } else {
        tracing::warn!("validatingadmissionpolicies or leases are not served: no policy status controller");
    }
    if let Some(feed) = service_accounts {
        match (service_account::ServiceAccountController::new(&registry, feed, stopped.clone()), registry.store("coordination.k8s.io", "v1", "leases")) {
            (Some(c), Some(leases)) => {
                let (leading_tx, leading) = watch::channel(false);
                let election = leader::Election::new(leases, service_account::LEASE, identity);
                tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
                tasks.push(tokio::spawn(c.run(leading, stopped.clone())));
            }
            _ => tracing::warn!("namespaces, serviceaccounts, configmaps, secrets or leases are not served: no service account controllers"),
        }
    }
    match (resource_quota::QuotaController::new(registry.clone(), stopped.clone()), registry.store("coordination.k8s.io", "v1", "leases")) {
        (Some(c), Some(leases)) => {
            let (leading_tx, leading) = watch::channel(false);
            let election = leader::Election::new(leases, resource_quota::LEASE, identity);
            tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
            tasks.push(tokio::spawn(c.run(leading, stopped.clone())));
        }
        _ => tracing::warn!("resourcequotas or leases are not served: no resource quota controller"),
    }
    match (storage_protection::ProtectionController::new(&registry, stopped.clone()), registry.store("coordination.k8s.io", "v1", "leases")) {
        (Some(c), Some(leases)) => {
            let (leading_tx, leading) = watch::channel(false);
            let election = leader::Election::new(leases, storage_protection::LEASE, identity);
            tasks.push(tokio::spawn(election.run(leading_tx, stopped.clone())));
            tasks.push(tokio::spawn(c.run(leading, stopped.clone())));
        }
        _ => tracing::warn!("persistentvolumeclaims, pods or leases are not served: no storage protection controller"),
    }
    Controllers { stop, tasks }
}
