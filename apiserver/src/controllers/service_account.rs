//! The ServiceAccount loops of kube-controller-manager, under one Lease
//! (`kube-system/service-account-controllers`):
//!
//! - **serviceaccount** (kube `pkg/controller/serviceaccount`
//!   `serviceaccounts_controller.go`): every active namespace has a
//!   ServiceAccount `default`, recreated when deleted;
//! - **root-ca-cert-publisher** (kube `pkg/controller/certificates/rootcacertpublisher`):
//!   every active namespace has the ConfigMap `kube-root-ca.crt` whose
//!   `ca.crt` is the CA clients verify the API server with (the one in the
//!   admin kubeconfig), put back when deleted or changed;
//! - **serviceaccount-token** (kube `tokens_controller.go`, the legacy
//!   part): a Secret of type `kubernetes.io/service-account-token` whose
//!   annotation `kubernetes.io/service-account.name` names an existing
//!   ServiceAccount gets `data.token` (a legacy token), `data.ca.crt`,
//!   `data.namespace` and the ServiceAccount's uid annotation.
//!
//! Keys in the one queue are `ns/<namespace>` (the first two loops) and
//! `secret/<namespace>/<name>`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::informer::{self, internal_user, key_of, EventHandler, Lister};
use super::queue::Queue;
use crate::authn::service_account::{Tokens, SECRET_SA_NAME, SECRET_SA_UID, SECRET_TYPE};
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::{Context, Creater as _, FieldValidation, Replace, Updater as _, WriteOptions};
use crate::registry::store::Store;
use crate::registry::Registry;
use crate::warning::Warnings;

/// The Lease of the loops.
pub const LEASE: &str = "service-account-controllers";
/// The ConfigMap the root CA is published in.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// Its annotation (kube's wording).
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
/// Pause before a failed key is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// What the loops need besides the registry.
#[derive(Clone)]
pub struct Feed {
    /// Issues the legacy tokens.
    pub tokens: Arc<Tokens>,
    /// The CA certificate (PEM) published in `kube-root-ca.crt`.
    pub root_ca: String,
}

/// The stores the loops read and write.
struct Stores {
    namespaces: Arc<Store>,
    service_accounts: Arc<Store>,
    config_maps: Arc<Store>,
    secrets: Arc<Store>,
}

/// Queues the namespace of a changed object of one resource.
struct Enqueue {
    queue: Queue,
    what: What,
}

#[derive(Clone, Copy)]
enum What {
    Namespace,
    /// A ServiceAccount or ConfigMap: its namespace, when it is ours.
    InNamespace(&'static str),
    Secret,
}

impl Enqueue {
    fn consider(&self, obj: &Value) {
        match self.what {
            What::Namespace => self.queue.add(&format!("ns/{}", meta::name(obj))),
            What::InNamespace(name) if meta::name(obj) == name => self.queue.add(&format!("ns/{}", meta::namespace(obj))),
            What::InNamespace(_) => {}
            What::Secret if obj["type"] == SECRET_TYPE => self.queue.add(&format!("secret/{}", key_of(obj))),
            What::Secret => {}
        }
    }
}

impl EventHandler for Enqueue {
    fn on_add(&self, obj: &Value) {
        self.consider(obj);
    }
    fn on_update(&self, _old: &Value, new: &Value) {
        self.consider(new);
    }
    fn on_delete(&self, obj: &Value) {
        self.consider(obj);
    }
}

/// The loops.
pub struct ServiceAccountController {
    stores: Stores,
    namespaces: Lister,
    service_accounts: Lister,
    config_maps: Lister,
    secrets: Lister,
    queue: Queue,
    feed: Feed,
}

impl ServiceAccountController {
    /// Starts the informers; `None` when a store is not served.
    pub fn new(registry: &Registry, feed: Feed, stop: watch::Receiver<bool>) -> Option<Self> {
        let stores = Stores {
            namespaces: registry.store("", "v1", "namespaces")?,
            service_accounts: registry.store("", "v1", "serviceaccounts")?,
            config_maps: registry.store("", "v1", "configmaps")?,
            secrets: registry.store("", "v1", "secrets")?,
        };
        let queue = Queue::new();
        let inform = |store: &Arc<Store>, what| informer::start(store.clone(), Arc::new(Enqueue { queue: queue.clone(), what }), stop.clone());
        let namespaces = inform(&stores.namespaces, What::Namespace);
        let service_accounts = inform(&stores.service_accounts, What::InNamespace("default"));
        let config_maps = inform(&stores.config_maps, What::InNamespace(ROOT_CA_CONFIGMAP));
        let secrets = inform(&stores.secrets, What::Secret);
        Some(ServiceAccountController { stores, namespaces, service_accounts, config_maps, secrets, queue, feed })
    }

    /// Works the queue while `leading` is true, until `stop`.
    pub async fn run(self, mut leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
        for l in [&self.namespaces, &self.service_accounts, &self.config_maps, &self.secrets] {
            let mut l = l.clone();
            tokio::select! {
                _ = l.wait_synced() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
        loop {
            let Some(key) = self.queue.next_while_leading(&mut leading, &mut stop).await else { return };
            let r = if let Some(ns) = key.strip_prefix("ns/") {
                self.sync_namespace(ns).await
            } else if let Some(k) = key.strip_prefix("secret/") {
                self.sync_secret(k).await
            } else {
                Ok(())
            };
            if let Err(e) = r {
                tracing::warn!("service account controllers, {key}: {}", e.message);
                self.queue.add_after(&key, RETRY);
            }
            self.queue.done(&key);
        }
    }

    /// The default ServiceAccount and the root CA ConfigMap of `ns`.
    async fn sync_namespace(&self, ns: &str) -> Result<(), Status> {
        let Some(namespace) = self.namespaces.get(ns) else { return Ok(()) };
        if meta::is_deleting(&namespace) || namespace["status"]["phase"] == "Terminating" {
            return Ok(());
        }
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: ns, user: &user, user_agent: Some("service-account-controllers"), warnings: &warnings, audit: None };
        if self.service_accounts.get(&format!("{ns}/default")).is_none() {
            let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
            ignore_exists(self.stores.service_accounts.create(&ctx, sa, &opts("CreateOptions", "service-account-controller")).await)?;
        }
        let data = json!({"ca.crt": self.feed.root_ca});
        match self.config_maps.get(&format!("{ns}/{ROOT_CA_CONFIGMAP}")) {
            None => {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns, "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}}, "data": data});
                ignore_exists(self.stores.config_maps.create(&ctx, cm, &opts("CreateOptions", "root-ca-cert-publisher")).await)?;
            }
            Some(cm) if cm["data"] != data => {
                let mut cm = (*cm).clone();
                cm["data"] = data;
                ignore_gone(self.stores.config_maps.update(&ctx, ROOT_CA_CONFIGMAP, &Replace(cm), &opts("UpdateOptions", "root-ca-cert-publisher")).await)?;
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Fills a legacy token Secret (`<ns>/<name>`).
    async fn sync_secret(&self, key: &str) -> Result<(), Status> {
        let Some(secret) = self.secrets.get(key) else { return Ok(()) };
        if secret["type"] != SECRET_TYPE || meta::is_deleting(&secret) || secret["data"]["token"].as_str().is_some_and(|t| !t.is_empty()) {
            return Ok(());
        }
        let ns = meta::namespace(&secret);
        let sa_name = secret["metadata"]["annotations"][SECRET_SA_NAME].as_str().unwrap_or("");
        let Some(sa) = self.service_accounts.get(&format!("{ns}/{sa_name}")) else {
            // kube deletes such Secrets; here they wait for their account.
            tracing::debug!("token secret {key}: service account {ns}/{sa_name:?} not found");
            return Ok(());
        };
        let uid = sa["metadata"]["uid"].as_str().unwrap_or("");
        if secret["metadata"]["annotations"][SECRET_SA_UID].as_str().is_some_and(|u| !u.is_empty() && u != uid) {
            return Ok(());
        }
        let token = self.feed.tokens.issue_legacy(&sa, meta::name(&secret)).map_err(Status::internal)?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut updated = (*secret).clone();
        updated["metadata"]["annotations"][SECRET_SA_UID] = json!(uid);
        if !updated["data"].is_object() {
            updated["data"] = json!({});
        }
        updated["data"]["token"] = json!(b64(&token));
        updated["data"]["ca.crt"] = json!(b64(&self.feed.root_ca));
        updated["data"]["namespace"] = json!(b64(ns));
        let (user, warnings) = (internal_user(), Warnings::default());
        let ctx = Context { namespace: ns, user: &user, user_agent: Some("tokens-controller"), warnings: &warnings, audit: None };
        ignore_gone(self.stores.secrets.update(&ctx, meta::name(&secret), &Replace(updated), &opts("UpdateOptions", "tokens-controller")).await)
    }
}

fn opts(kind: &'static str, manager: &str) -> WriteOptions {
    WriteOptions { kind, dry_run: false, field_manager: Some(manager.into()), field_validation: FieldValidation::Ignore, force: false }
}

fn ignore_exists<T>(r: Result<T, Status>) -> Result<(), Status> {
    match r {
        Ok(_) => Ok(()),
        Err(s) if s.is_already_exists() => Ok(()),
        // A namespace that began terminating meanwhile.
        Err(s) if s.code == 403 => Ok(()),
        Err(s) => Err(s),
    }
}

fn ignore_gone<T>(r: Result<T, Status>) -> Result<(), Status> {
    match r {
        Ok(_) => Ok(()),
        Err(s) if s.is_not_found() => Ok(()),
        Err(s) => Err(s),
    }
}
