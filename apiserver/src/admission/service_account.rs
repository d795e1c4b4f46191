//! `ServiceAccount` (kube `plugin/pkg/admission/serviceaccount`), on Pod
//! creates:
//!
//! - `spec.serviceAccountName` defaults to `default`;
//! - a Pod whose ServiceAccount does not exist is refused (403, `error
//!   looking up service account <ns>/<name>: serviceaccount "<name>" not
//!   found`);
//! - unless `automountServiceAccountToken` is false on the Pod (or, when
//!   the Pod does not say, on the ServiceAccount), the Pod gets a projected
//!   volume `kube-api-access-<5 random characters>` (a token of 3607 s, the
//!   `ca.crt` of the `kube-root-ca.crt` ConfigMap and the namespace) mounted
//!   read-only at `/var/run/secrets/kubernetes.io/serviceaccount` in every
//!   container and init container that has nothing mounted there yet.
//!
//! Mirror pods (annotation `kubernetes.io/config.mirror`) are left alone,
//! as in kube. The ServiceAccount is read from the store.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Attributes, Mutating, Operation};
use crate::errors::Status;
use crate::storage::{keys, Storage};

/// Where the token, CA and namespace are mounted.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The projected token's lifetime (kube's 3607 s, which the API server may
/// extend).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The name prefix of the projected volume.
const VOLUME_PREFIX: &str = "kube-api-access-";
/// The characters of the random suffix (kube `utilrand.String`).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The plugin.
pub struct ServiceAccount {
    storage: Arc<dyn Storage>,
}

impl ServiceAccount {
    /// The plugin over the store holding ServiceAccounts.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        ServiceAccount { storage }
    }
}

/// How often, and how far apart, a missing ServiceAccount is looked up
/// again before the Pod is refused (kube's admission retries its live
/// lookup too); `default` gets longer, since the controller makes it for a
/// namespace (or a server) that came up a moment ago.
const LOOKUP_TRIES: usize = 10;
const DEFAULT_LOOKUP_TRIES: usize = 50;
const LOOKUP_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

impl ServiceAccount {
    async fn lookup(&self, ns: &str, name: &str) -> Result<Value, crate::storage::Error> {
        let key = keys::object("", "serviceaccounts", Some(ns), name);
        let most = if name == "default" { DEFAULT_LOOKUP_TRIES } else { LOOKUP_TRIES };
        let mut tries = 0;
        loop {
            match self.storage.get(&key).await {
                Err(crate::storage::Error::NotFound) if tries + 1 < most => {
                    tries += 1;
                    tokio::time::sleep(LOOKUP_DELAY).await;
                }
                r => return r,
            }
        }
    }
}

fn volume_name() -> String {
    let suffix: String = (0..5).map(|_| ALPHANUMS[rand::random_range(0..ALPHANUMS.len())] as char).collect();
    format!("{VOLUME_PREFIX}{suffix}")
}

/// The projected volume kube adds.
pub fn projected_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
}

/// Adds the volume and its mounts to a pod `spec`.
fn mount(spec: &mut Value) {
    // A pod that already has a kube-api-access volume keeps it.
    let has = spec["volumes"].as_array().is_some_and(|vs| vs.iter().any(|v| v["name"].as_str().is_some_and(|n| n.starts_with(VOLUME_PREFIX))));
    let name = match spec["volumes"].as_array().and_then(|vs| vs.iter().find_map(|v| v["name"].as_str().filter(|n| n.starts_with(VOLUME_PREFIX)))) {
        Some(n) => n.to_string(),
        None => volume_name(),
    };
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for c in cs.iter_mut() {
            let mounts = c.as_object_mut().map(|m| m.entry("volumeMounts").or_insert_with(|| json!([])));
            let Some(mounts) = mounts.and_then(Value::as_array_mut) else { continue };
            if mounts.iter().any(|m| m["mountPath"] == MOUNT_PATH) {
                continue;
            }
            mounts.push(json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH}));
            mounted = true;
        }
    }
    if mounted && !has {
        if !spec["volumes"].is_array() {
            spec["volumes"] = json!([]);
        }
        if let Some(vs) = spec["volumes"].as_array_mut() {
            vs.push(projected_volume(&name));
        }
    }
}

#[async_trait]
impl Mutating for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if !(attrs.resource.group.is_empty() && attrs.resource.resource == "pods" && attrs.subresource.is_empty()) {
            return Ok(());
        }
        let Some(pod) = attrs.object.as_mut() else { return Ok(()) };
        if pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string() {
            return Ok(());
        }
        if !pod["spec"].is_object() {
            return Ok(());
        }
        let sa_name = match pod["spec"]["serviceAccountName"].as_str().filter(|s| !s.is_empty()) {
            Some(s) => s.to_string(),
            None => {
                pod["spec"]["serviceAccountName"] = json!("default");
                // The deprecated field follows, as kube's conversion writes it.
                pod["spec"]["serviceAccount"] = json!("default");
                "default".to_string()
            }
        };
        let ns = attrs.namespace;
        let sa = match self.lookup(ns, &sa_name).await {
            Ok(sa) => sa,
            Err(crate::storage::Error::NotFound) => {
                let why = format!("error looking up service account {ns}/{sa_name}: serviceaccount {sa_name:?} not found");
                return Err(Status::forbidden_because("", "pods", attrs.name, &why));
            }
            Err(e) => return Err(Status::internal(e)),
        };
        let automount = match pod["spec"]["automountServiceAccountToken"].as_bool() {
            Some(b) => b,
            None => sa["automountServiceAccountToken"].as_bool().unwrap_or(true),
        };
        if automount {
            mount(&mut pod["spec"]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_in_every_container_once() {
        let mut spec = json!({"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "x", "mountPath": MOUNT_PATH}]}]});
        mount(&mut spec);
        let vol = spec["volumes"][0]["name"].as_str().unwrap_or("").to_string();
        assert!(vol.starts_with(VOLUME_PREFIX) && vol.len() == VOLUME_PREFIX.len() + 5, "{vol}");
        assert_eq!(spec["initContainers"][0]["volumeMounts"][0], json!({"name": vol, "readOnly": true, "mountPath": MOUNT_PATH}));
        assert_eq!(spec["containers"][0]["volumeMounts"][0]["name"], json!(vol));
        assert_eq!(spec["containers"][1]["volumeMounts"].as_array().map(Vec::len), Some(1));
        assert_eq!(spec["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3607);
        mount(&mut spec);
        assert_eq!(spec["volumes"].as_array().map(Vec::len), Some(1));
    }
}
