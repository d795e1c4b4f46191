//! `--authorization-mode=AlwaysAllow` and `AlwaysDeny` (kube
//! `authorizerfactory.NewAlwaysAllowAuthorizer` and
//! `NewAlwaysDenyAuthorizer`).

use async_trait::async_trait;

use super::{Attributes, Authorized, Authorizer, Decision, NonResourceRule, ResourceRule, Result, Rules};
use crate::authn::UserInfo;

/// Allows every request; its rules are `*` on everything.
pub struct AlwaysAllow;

#[async_trait]
impl Authorizer for AlwaysAllow {
    async fn authorize(&self, _attrs: &Attributes<'_>) -> Result<Authorized> {
        Ok(Authorized::new(Decision::Allow))
    }

    async fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Result<Rules> {
        let all = || vec!["*".to_string()];
        Ok(Rules {
            resource_rules: vec![ResourceRule { verbs: all(), api_groups: all(), resources: all(), resource_names: Vec::new() }],
            non_resource_rules: vec![NonResourceRule { verbs: all(), non_resource_urls: all() }],
            ..Default::default()
        })
    }
}

/// Denies every request, with kube's reason.
pub struct AlwaysDeny;

#[async_trait]
impl Authorizer for AlwaysDeny {
    async fn authorize(&self, _attrs: &Attributes<'_>) -> Result<Authorized> {
        Ok(Authorized { decision: Decision::Deny, reason: "Everything is forbidden.".into() })
    }

    async fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Result<Rules> {
        Ok(Rules::default())
    }
}

/// Has no opinion on anything and lists no rules: the `Node` mode until
/// the Node authorizer exists.
pub struct NoOpinion;

#[async_trait]
impl Authorizer for NoOpinion {
    async fn authorize(&self, _attrs: &Attributes<'_>) -> Result<Authorized> {
        Ok(Authorized::new(Decision::NoOpinion))
    }

    async fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Result<Rules> {
        Ok(Rules::default())
    }
}

/// The group whose members may do anything (kube's
/// `user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// Allows every request of a member of `system:masters` and has no opinion
/// on the others (kube's `authorizerfactory.NewPrivilegedGroups`, which
/// kube-apiserver puts ahead of every `--authorization-mode`, so the admin
/// keeps access whatever the modes say).
pub struct PrivilegedGroups;

#[async_trait]
impl Authorizer for PrivilegedGroups {
    async fn authorize(&self, attrs: &Attributes<'_>) -> Result<Authorized> {
        Ok(Authorized::new(if attrs.user.groups.iter().any(|g| g == SYSTEM_MASTERS) { Decision::Allow } else { Decision::NoOpinion }))
    }

    async fn rules_for(&self, user: &UserInfo, namespace: &str) -> Result<Rules> {
        if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            AlwaysAllow.rules_for(user, namespace).await
        } else {
            Ok(Rules::default())
        }
    }
}
