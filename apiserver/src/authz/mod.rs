//! Authorization: may this user do this (kube-apiserver
//! `staging/src/k8s.io/apiserver/pkg/authorization`).
//!
//! An [`Authorizer`] answers [`Attributes`] (kube's `authorizer.Attributes`:
//! user, verb, and either a resource with its group, version, namespace,
//! name and subresource, or a URL path) with Allow, Deny or NoOpinion and a
//! reason. [`Union`] asks its members in order until one decides, as
//! `--authorization-mode=A,B` does. An authorizer also lists the rules a
//! user has ([`Authorizer::rules_for`], kube's `RuleResolver`), which the
//! SelfSubjectRulesReview resource reports.
//!
//! Modes (`--authorization-mode`, parsed by [`Mode::parse_list`]) come in
//! kube's names; `AlwaysAllow` (the default), `AlwaysDeny`, `RBAC`
//! ([`rbac`]), `Node` ([`node`]) and `Webhook` ([`webhook`]) are
//! implemented; `ABAC` is refused. The HTTP filter (`endpoints/filters/authorization.rs`) and the
//! access-review resources (`registry/auth.rs`) ask the same authorizer.

pub mod always;
pub mod node;
pub mod rbac;
pub mod webhook;

use std::sync::Arc;

use async_trait::async_trait;

use crate::authn::UserInfo;

/// What a request wants to do (kube's `authorizer.AttributesRecord`).
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// Who.
    pub user: &'a UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; for non-resource requests the lowercase HTTP
    /// method.
    pub verb: &'a str,
    /// A request for an API resource (else for a URL path).
    pub resource_request: bool,
    /// The URL path (non-resource requests).
    pub path: &'a str,
    /// Namespace (empty for cluster-scoped and all-namespace requests).
    pub namespace: &'a str,
    /// API group (`""` for core).
    pub api_group: &'a str,
    /// API version.
    pub api_version: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
    /// Subresource.
    pub subresource: &'a str,
    /// Object name, if one.
    pub name: &'a str,
}

/// An authorizer's answer (kube's `authorizer.Decision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied; no later authorizer is asked.
    Deny,
    /// No opinion; the next authorizer decides, and a request nobody
    /// allows is forbidden.
    NoOpinion,
}

/// A decision with the reason shown to the user (appended to a 403's
/// message, and the `reason` of an access review).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized {
    /// The decision.
    pub decision: Decision,
    /// Why; may be empty.
    pub reason: String,
}

impl Authorized {
    /// A decision without a reason.
    pub fn new(decision: Decision) -> Self {
        Authorized { decision, reason: String::new() }
    }
}

/// A resource rule a user has (`authorizationv1.ResourceRule`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceRule {
    /// Verbs (`*` is every verb).
    pub verbs: Vec<String>,
    /// API groups (`*` is every group).
    pub api_groups: Vec<String>,
    /// Resources (`*` is every resource).
    pub resources: Vec<String>,
    /// Object names (empty is every name).
    pub resource_names: Vec<String>,
}

/// A non-resource rule a user has (`authorizationv1.NonResourceRule`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NonResourceRule {
    /// Verbs.
    pub verbs: Vec<String>,
    /// URL paths (`*` is every path; a trailing `*` a prefix).
    pub non_resource_urls: Vec<String>,
}

/// What a user may do in a namespace (kube's `RuleResolver.RulesFor`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rules {
    /// Resource rules.
    pub resource_rules: Vec<ResourceRule>,
    /// Non-resource rules.
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Whether the list may be missing rules (an authorizer that cannot
    /// list them says so).
    pub incomplete: bool,
    /// What could not be evaluated (RBAC: bindings to missing roles);
    /// empty when all was.
    pub evaluation_error: String,
}

/// Why an authorizer could not decide. The request is then treated as not
/// allowed by it; the text goes to access reviews' `evaluationError`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The authorizer's own data could not be read.
    #[error("{0}")]
    Evaluation(String),
    /// Several members of a [`Union`] failed.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    All(Vec<Error>),
    /// An `--authorization-mode` this server does not have.
    #[error("{0}")]
    Mode(String),
}

/// Result of this layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Decides requests (kube's `authorizer.Authorizer` and `RuleResolver`).
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// The decision for `attrs`.
    ///
    /// # Errors
    /// The authorizer could not evaluate the request; callers treat that as
    /// no opinion and report it.
    async fn authorize(&self, attrs: &Attributes<'_>) -> Result<Authorized>;

    /// The rules `user` has in `namespace` (`""`: cluster-wide rules only).
    /// By default none, marked incomplete.
    ///
    /// # Errors
    /// The rules could not be listed.
    async fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Result<Rules> {
        Ok(Rules { incomplete: true, ..Default::default() })
    }
}

/// Authorizers asked in order (kube's `union.New`): the first Allow or Deny
/// decides; when all have no opinion, the answer is NoOpinion with their
/// reasons joined by newlines and their errors together.
pub struct Union(Vec<Arc<dyn Authorizer>>);

impl Union {
    /// A union of `members`, asked in this order.
    pub fn new(members: Vec<Arc<dyn Authorizer>>) -> Self {
        Union(members)
    }
}

#[async_trait]
impl Authorizer for Union {
    async fn authorize(&self, attrs: &Attributes<'_>) -> Result<Authorized> {
        let mut reasons = Vec::new();
        let mut errors = Vec::new();
        for m in &self.0 {
            match m.authorize(attrs).await {
                Ok(a) if a.decision != Decision::NoOpinion => return Ok(a),
                Ok(a) => reasons.push(a.reason),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(if errors.len() == 1 { errors.remove(0) } else { Error::All(errors) });
        }
        reasons.retain(|r| !r.is_empty());
        Ok(Authorized { decision: Decision::NoOpinion, reason: reasons.join("\n") })
    }

    async fn rules_for(&self, user: &UserInfo, namespace: &str) -> Result<Rules> {
        let mut out = Rules::default();
        let mut errors = Vec::new();
        for m in &self.0 {
            match m.rules_for(user, namespace).await {
                Ok(r) => {
                    out.resource_rules.extend(r.resource_rules);
                    out.non_resource_rules.extend(r.non_resource_rules);
                    out.incomplete |= r.incomplete;
                    if !r.evaluation_error.is_empty() {
                        if !out.evaluation_error.is_empty() {
                            out.evaluation_error.push_str(", ");
                        }
                        out.evaluation_error.push_str(&r.evaluation_error);
                    }
                }
                Err(e) => {
                    out.incomplete = true;
                    errors.push(e);
                }
            }
        }
        match errors.len() {
            0 => Ok(out),
            _ if !out.resource_rules.is_empty() || !out.non_resource_rules.is_empty() => Ok(out),
            1 => Err(errors.remove(0)),
            _ => Err(Error::All(errors)),
        }
    }
}

/// An `--authorization-mode` (kube's `authorizer/modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Allow everything.
    AlwaysAllow,
    /// Deny everything.
    AlwaysDeny,
    /// Roles and bindings ([`rbac`]).
    Rbac,
    /// The Node authorizer ([`node`]).
    Node,
    /// A remote SubjectAccessReview service ([`webhook`]).
    Webhook,
}

/// Every mode name kube-apiserver knows, in its documentation's order.
pub const KUBE_MODES: &[&str] = &["AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node"];

impl Mode {
    /// Parses `--authorization-mode`: kube's comma-separated names, each at
    /// most once.
    ///
    /// # Errors
    /// [`Error::Mode`] for an unknown name (kube's wording), a name given
    /// twice, or a mode this server does not implement yet.
    pub fn parse_list(modes: &[String]) -> Result<Vec<Mode>> {
        let mut out = Vec::new();
        for name in modes.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
            let mode = match name {
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "RBAC" => Mode::Rbac,
                "Node" => Mode::Node,
                "Webhook" => Mode::Webhook,
                known if KUBE_MODES.contains(&known) => {
                    return Err(Error::Mode(format!("authorization-mode {known:?} is not supported yet (supported: AlwaysAllow, AlwaysDeny, RBAC, Node, Webhook)")))
                }
                unknown => return Err(Error::Mode(format!("authorization-mode {unknown:?} is not a valid mode"))),
            };
            if out.contains(&mode) {
                return Err(Error::Mode(format!("authorization-mode {name:?} has mode specified more than once")));
            }
            out.push(mode);
        }
        if out.is_empty() {
            return Err(Error::Mode("at least one authorization-mode must be passed".into()));
        }
        Ok(out)
    }

    /// The authorizer of this mode; RBAC's is `rbac`, Node's reads
    /// `graph`, Webhook's is `webhook`.
    ///
    /// # Errors
    /// [`Error::Mode`]: Webhook without a webhook (kube's message).
    pub fn authorizer(self, rbac: &Arc<rbac::Rbac>, graph: &Arc<node::Graph>, webhook: Option<&Arc<dyn Authorizer>>) -> Result<Arc<dyn Authorizer>> {
        Ok(match self {
            Mode::AlwaysAllow => Arc::new(always::AlwaysAllow),
            Mode::AlwaysDeny => Arc::new(always::AlwaysDeny),
            Mode::Rbac => rbac.clone(),
            Mode::Node => Arc::new(node::NodeAuthorizer::new(graph.clone())),
            Mode::Webhook => webhook.cloned().ok_or_else(|| Error::Mode("authorization-mode Webhook's authorization config file not passed".into()))?,
        })
    }
}

/// The authorizer of `--authorization-mode`, and the RBAC authorizer when
/// RBAC is one of the modes (start-up feeds it and reconciles the
/// bootstrap policy).
pub struct FromModes {
    /// The union of the modes.
    pub authorizer: Arc<dyn Authorizer>,
    /// The RBAC authorizer, if `RBAC` is a mode.
    pub rbac: Option<Arc<rbac::Rbac>>,
    /// The Node authorizer's graph, if `Node` is a mode (start-up feeds
    /// it).
    pub node: Option<Arc<node::Graph>>,
}

/// The authorizer of `--authorization-mode`: a [`Union`] of
/// [`always::PrivilegedGroups`] (`system:masters` may do anything, as in
/// kube) and then the modes in their order.
///
/// # Errors
/// As [`Mode::parse_list`].
pub fn from_modes(modes: &[String]) -> Result<FromModes> {
    from_modes_with_webhook(modes, None)
}

/// [`from_modes`] with the authorizer of the `Webhook` mode (built from
/// [`webhook::Flags`]).
///
/// # Errors
/// As [`Mode::parse_list`] and [`Mode::authorizer`].
pub fn from_modes_with_webhook(modes: &[String], webhook: Option<Arc<dyn Authorizer>>) -> Result<FromModes> {
    let modes = Mode::parse_list(modes)?;
    let rbac = Arc::new(rbac::Rbac::new());
    let graph = Arc::new(node::Graph::new());
    let mut members: Vec<Arc<dyn Authorizer>> = vec![Arc::new(always::PrivilegedGroups)];
    for m in &modes {
        members.push(m.authorizer(&rbac, &graph, webhook.as_ref())?);
    }
    Ok(FromModes { authorizer: Arc::new(Union::new(members)), rbac: modes.contains(&Mode::Rbac).then_some(rbac), node: modes.contains(&Mode::Node).then_some(graph) })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Decision, &'static str);

    #[async_trait]
    impl Authorizer for Fixed {
        async fn authorize(&self, _attrs: &Attributes<'_>) -> Result<Authorized> {
            Ok(Authorized { decision: self.0, reason: self.1.into() })
        }
    }

    fn attrs(user: &UserInfo) -> Attributes<'_> {
        Attributes { user, verb: "get", resource_request: true, path: "/api/v1/namespaces/a/pods/b", namespace: "a", api_group: "", api_version: "v1", resource: "pods", subresource: "", name: "b" }
    }

    /// `system:masters` is allowed ahead of every mode; others get the
    /// modes' answer.
    #[tokio::test]
    async fn privileged_groups_come_first() {
        let deny = from_modes(&["AlwaysDeny".to_string()]).ok().map(|m| m.authorizer);
        let Some(deny) = deny else { panic!("AlwaysDeny parses") };
        let admin = UserInfo { name: "kubernetes-admin".into(), groups: vec![always::SYSTEM_MASTERS.into()], ..Default::default() };
        let other = UserInfo { name: "jane".into(), groups: vec!["system:authenticated".into()], ..Default::default() };
        assert_eq!(deny.authorize(&attrs(&admin)).await.map(|a| a.decision).ok(), Some(Decision::Allow));
        assert_eq!(deny.authorize(&attrs(&other)).await.map(|a| a.decision).ok(), Some(Decision::Deny));
    }

    #[tokio::test]
    async fn union_first_decision_wins() {
        use Decision::*;
        let user = UserInfo::default();
        // (the authorizers' answers in order, the union's decision, its reason)
        type Case = (Vec<(Decision, &'static str)>, Decision, &'static str);
        let cases: Vec<Case> = vec![
            (vec![], NoOpinion, ""),
            (vec![(NoOpinion, "a"), (Allow, "b"), (Deny, "c")], Allow, "b"),
            (vec![(Deny, "no"), (Allow, "")], Deny, "no"),
            (vec![(NoOpinion, "a"), (NoOpinion, ""), (NoOpinion, "c")], NoOpinion, "a\nc"),
        ];
        for (members, want, reason) in cases {
            let u = Union::new(members.into_iter().map(|(d, r)| Arc::new(Fixed(d, r)) as Arc<dyn Authorizer>).collect());
            let got = u.authorize(&attrs(&user)).await.unwrap_or(Authorized::new(NoOpinion));
            assert_eq!((got.decision, got.reason.as_str()), (want, reason));
        }
    }

    #[test]
    fn modes_parse_as_kube() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(Mode::parse_list(&s(&["AlwaysAllow"])).ok(), Some(vec![Mode::AlwaysAllow]));
        assert_eq!(Mode::parse_list(&s(&["AlwaysDeny", "AlwaysAllow"])).ok(), Some(vec![Mode::AlwaysDeny, Mode::AlwaysAllow]));
        let err = |v: &[&str]| Mode::parse_list(&s(v)).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(err(&["Foo"]), "authorization-mode \"Foo\" is not a valid mode");
        assert_eq!(Mode::parse_list(&s(&["Node", "RBAC"])).ok(), Some(vec![Mode::Node, Mode::Rbac]));
        assert!(err(&["ABAC"]).contains("not supported yet"));
        assert_eq!(Mode::parse_list(&s(&["RBAC", "Webhook"])).ok(), Some(vec![Mode::Rbac, Mode::Webhook]));
        assert_eq!(from_modes(&s(&["Webhook"])).err().map(|e| e.to_string()).unwrap_or_default(), "authorization-mode Webhook's authorization config file not passed");
        assert!(err(&["AlwaysAllow", "AlwaysAllow"]).contains("more than once"));
        assert!(err(&[]).contains("at least one"));
    }
}
