//! kube-apiserver's admission plugin names, their order and which are on
//! by default (kube `pkg/kubeapiserver/options/plugins.go`:
//! `AllOrderedPlugins`, `DefaultOffAdmissionPlugins`), and the chain built
//! from `--enable-admission-plugins` / `--disable-admission-plugins`.
//!
//! Every kube name is accepted. Plugins this server does not have yet are
//! skipped (and logged at start-up); the plugins it has run in kube's order.

use std::sync::Arc;

use super::always::{AlwaysAdmit, AlwaysDeny};
use super::config::AdmissionConfig;
use super::namespace_lifecycle::NamespaceLifecycle;
use super::node_restriction::NodeRestriction;
use super::{Chain, Error};
use crate::storage::Storage;

/// Every admission plugin of kube-apiserver, in the order it runs them.
pub const ORDERED: &[&str] = &[
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// The plugins kube-apiserver enables when no flag says otherwise: kube
/// 1.36's set, where MutatingAdmissionPolicy is stable and on (we serve its
/// v1 API, so a policy a user creates runs).
pub const DEFAULT_ON: &[&str] = &[
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
];

/// The plugins that run: the defaults plus `enable`, minus `disable`, in
/// [`ORDERED`] order.
///
/// # Errors
/// [`Error::UnknownPlugin`] for a name kube does not have;
/// [`Error::EnabledAndDisabled`] for a name in both lists.
pub fn enabled(enable: &[String], disable: &[String]) -> Result<Vec<&'static str>, Error> {
    let known = |flag: &'static str, names: &[String]| -> Result<Vec<&'static str>, Error> {
        names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).map(|n| ORDERED.iter().find(|k| **k == n).copied().ok_or_else(|| Error::UnknownPlugin { flag, name: n.to_string() })).collect()
    };
    let on = known("enable-admission-plugins", enable)?;
    let off = known("disable-admission-plugins", disable)?;
    let both: Vec<String> = on.iter().filter(|n| off.contains(n)).map(|n| n.to_string()).collect();
    if !both.is_empty() {
        return Err(Error::EnabledAndDisabled(both));
    }
    Ok(ORDERED.iter().copied().filter(|n| (DEFAULT_ON.contains(n) || on.contains(n)) && !off.contains(n)).collect())
}

/// What plugins are built with.
#[derive(Clone)]
pub struct Context {
    /// The store, read by plugins that look objects up (namespaces).
    pub storage: Arc<dyn Storage>,
    /// Local copies of the objects plugins read on every write (filled
    /// once the registry serves them; see [`super::sources`]).
    pub sources: Arc<super::sources::Sources>,
    /// The authorizer of `--authorization-mode`: the `authorizer` of CEL
    /// policies.
    pub authorizer: Arc<dyn crate::authz::Authorizer>,
    /// The plugins' entries of `--admission-control-config-file`.
    pub config: Arc<AdmissionConfig>,
    /// The kinds' schemas (MutatingAdmissionPolicy merges apply
    /// configurations along them).
    pub schemas: crate::schema::SchemaStore,
}

/// Checks the plugins' entries of the admission configuration file (at
/// start-up, before the store opens).
///
/// # Errors
/// [`Error::PluginConfig`] for the first bad entry.
pub fn check_config(config: &AdmissionConfig) -> Result<(), Error> {
    pod_security_config(config).map(|_| ())
}

/// PodSecurity's `PodSecurityConfiguration`, or the default without one.
fn pod_security_config(config: &AdmissionConfig) -> Result<super::pod_security::Config, Error> {
    let plugin = "PodSecurity";
    let parsed = config.plugin(plugin).map(super::pod_security::Config::from_value).transpose().map_err(|message| Error::PluginConfig { plugin, message })?;
    Ok(parsed.unwrap_or_default())
}

/// The chain of the plugins `enable`/`disable` select (see [`enabled`]).
/// The names of selected plugins this server does not have are returned
/// with it.
///
/// # Errors
/// As [`enabled`]; [`Error::PluginConfig`] for a plugin's bad entry in
/// the admission configuration file.
pub fn build(enable: &[String], disable: &[String], ctx: &Context) -> Result<(Chain, Vec<&'static str>), Error> {
    let mut chain = Chain::default();
    let mut missing = Vec::new();
    for name in enabled(enable, disable)? {
        match name {
            "AlwaysAdmit" => chain.mutating.push(Arc::new(AlwaysAdmit)),
            "NamespaceLifecycle" => chain.mutating.push(Arc::new(NamespaceLifecycle::new(ctx.storage.clone()))),
            "NodeRestriction" => chain.validating.push(Arc::new(NodeRestriction)),
            "ServiceAccount" => chain.mutating.push(Arc::new(super::service_account::ServiceAccount::new(ctx.storage.clone()))),
            "LimitRanger" => {
                let p = Arc::new(super::limit_ranger::LimitRanger::new(ctx.storage.clone(), ctx.sources.clone()));
                chain.mutating.push(p.clone());
                chain.validating.push(p);
            }
            "Priority" => {
                let p = Arc::new(super::priority::Priority::new(ctx.storage.clone(), ctx.sources.clone()));
                chain.mutating.push(p.clone());
                chain.validating.push(p);
            }
            "DefaultTolerationSeconds" => chain.mutating.push(Arc::new(super::default_toleration_seconds::DefaultTolerationSeconds)),
            "DefaultStorageClass" => chain.mutating.push(Arc::new(super::default_storage_class::DefaultStorageClass::new(ctx.storage.clone(), ctx.sources.clone()))),
            "StorageObjectInUseProtection" => chain.mutating.push(Arc::new(super::storage_object_in_use_protection::StorageObjectInUseProtection)),
            "RuntimeClass" => {
                let p = Arc::new(super::runtime_class::RuntimeClass::new(ctx.storage.clone(), ctx.sources.clone()));
                chain.mutating.push(p.clone());
                chain.validating.push(p);
            }
            "ResourceQuota" => chain.validating.push(Arc::new(super::resource_quota::ResourceQuota::new(ctx.storage.clone(), ctx.sources.clone()))),
            "PodSecurity" => {
                let config = pod_security_config(&ctx.config)?;
                chain.validating.push(Arc::new(super::pod_security::PodSecurity::with_config(ctx.storage.clone(), ctx.sources.clone(), config)))
            }
            "MutatingAdmissionPolicy" => {
                chain.mutating.push(Arc::new(super::policy::mutating::MutatingAdmissionPolicy::new(ctx.sources.clone(), ctx.storage.clone(), ctx.authorizer.clone(), ctx.schemas.clone())))
            }
            "ValidatingAdmissionPolicy" => {
                chain.validating.push(Arc::new(super::policy::validating::ValidatingAdmissionPolicy::new(ctx.sources.clone(), ctx.storage.clone(), ctx.authorizer.clone(), ctx.schemas.clone())))
            }
            "MutatingAdmissionWebhook" => chain.mutating.push(Arc::new(super::webhook::MutatingWebhooks::new(ctx))),
            "ValidatingAdmissionWebhook" => chain.validating.push(Arc::new(super::webhook::ValidatingWebhooks::new(ctx))),
            "AlwaysDeny" => {
                chain.mutating.push(Arc::new(AlwaysDeny));
                chain.validating.push(Arc::new(AlwaysDeny));
            }
            other => missing.push(other),
        }
    }
    Ok((chain, missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_select_plugins_in_kubes_order() {
        let on = enabled(&[], &[]).unwrap_or_default();
        assert_eq!(on.len(), DEFAULT_ON.len());
        assert_eq!(on.first(), Some(&"NamespaceLifecycle"));
        assert!(on.contains(&"MutatingAdmissionPolicy"), "{on:?}");
        let on = enabled(&s(&["AlwaysDeny", "AlwaysAdmit"]), &s(&["NamespaceLifecycle", "ResourceQuota"])).unwrap_or_default();
        assert_eq!(on.first(), Some(&"AlwaysAdmit"));
        assert_eq!(on.last(), Some(&"AlwaysDeny"));
        assert!(!on.contains(&"NamespaceLifecycle") && !on.contains(&"ResourceQuota"));
        assert_eq!(enabled(&s(&["Foo"]), &[]), Err(Error::UnknownPlugin { flag: "enable-admission-plugins", name: "Foo".into() }));
        assert_eq!(enabled(&[], &s(&["Bar"])).err().map(|e| e.to_string()), Some("disable-admission-plugins plugin \"Bar\" is unknown".into()));
        assert_eq!(enabled(&s(&["AlwaysDeny"]), &s(&["AlwaysDeny"])), Err(Error::EnabledAndDisabled(vec!["AlwaysDeny".into()])));
        let overlap = enabled(&s(&["AlwaysDeny", "LimitRanger"]), &s(&["LimitRanger", "AlwaysDeny"])).err().map(|e| e.to_string());
        assert_eq!(overlap.as_deref(), Some("[AlwaysDeny LimitRanger] in enable-admission-plugins and disable-admission-plugins overlapped"));
        for n in DEFAULT_ON {
            assert!(ORDERED.contains(n), "{n}");
        }
    }
}
