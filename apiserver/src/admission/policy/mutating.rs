//! The `MutatingAdmissionPolicy` plugin (kube
//! `admission/plugin/policy/mutating`): every matching
//! (policy, binding, param) invocation, in policy then binding name order,
//! applies the policy's `mutations` in order to the object as the earlier
//! ones left it:
//!
//! - `ApplyConfiguration`: the expression yields `Object{…}`, merged into
//!   the object along the kind's schema ([`super::apply`]);
//! - `JSONPatch`: the expression yields a list of
//!   `JSONPatch{op, path, value, from}`, applied as RFC 6902 (the
//!   `json-patch` crate); a failed `test` leaves the object as it was, as
//!   kube does.
//!
//! Each mutation sees `object` as the previous mutations left it; the
//! policy's variables are evaluated anew for each mutation. A mutated
//! custom resource gets its schema's defaults again (kube runs the
//! defaulter after each patch); built-in objects get their defaults from
//! the strategy after admission, as before.
//!
//! Errors (a match condition or expression that fails, a patch that does
//! not apply, a configuration error) are collected; those of policies with
//! `failurePolicy: Ignore` are dropped, and any other refuses the request
//! as kube's policy dispatcher does: 403 with the first error's message,
//! `policy 'P' with binding 'B' denied request: <error>`, reason `Invalid`
//! for evaluation and patch errors (`Forbidden` for configuration errors),
//! and every error as a cause.
//!
//! `reinvocationPolicy: IfNeeded`: when a later policy of this plugin
//! changed the object after such a policy ran, the IfNeeded policies run
//! once more at the end of the plugin's run; and the plugin is reinvocable
//! while such a policy exists, so that on the chain's second run (a later
//! plugin, a webhook, changed the object) only those policies run again.
//!
//! Deletes and connects are not looked at (there is no object to mutate).

use std::sync::Arc;

use async_trait::async_trait;
use kube_cel::cel::Value as Cel;
use serde_json::Value;

use super::compile::{FailurePolicy, MutatingPolicy, Mutation};
use super::{binding_matches, collect_params, policy_matches, Cache, Evaluator, Inputs};
use crate::admission::sources::Sources;
use crate::admission::{Attributes, Mutating, Operation};
use crate::authz::Authorizer;
use crate::errors::Status;
use crate::meta;
use crate::schema::{Origin, Schema, SchemaStore};
use crate::storage::Storage;

/// The plugin.
pub struct MutatingAdmissionPolicy {
    sources: Arc<Sources>,
    storage: Arc<dyn Storage>,
    authorizer: Arc<dyn Authorizer>,
    schemas: SchemaStore,
    cache: Cache<MutatingPolicy>,
}

impl MutatingAdmissionPolicy {
    /// The plugin over the policies and bindings of `sources`, reading
    /// params from `storage`, asking `authorizer` for CEL's `authorizer`
    /// and merging apply configurations along `schemas`.
    pub fn new(sources: Arc<Sources>, storage: Arc<dyn Storage>, authorizer: Arc<dyn Authorizer>, schemas: SchemaStore) -> Self {
        MutatingAdmissionPolicy { sources, storage, authorizer, schemas, cache: Cache::new("mutatingadmissionpolicies", "mutatingadmissionpolicybindings", MutatingPolicy::compile) }
    }
}

/// An error of one policy, binding or param.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyError {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<&'static str>,
    ignore: bool,
}

impl PolicyError {
    /// kube's `PolicyError.Error()`.
    fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!("policy '{}' with binding '{b}' denied request: {}", self.policy, self.message),
            None => format!("policy {} denied request: {}", crate::errors::go_quote(&self.policy), self.message),
        }
    }
}

/// Applies one mutation to `obj`.
///
/// # Errors
/// The expression's error or why the patch did not apply, in kube's words.
fn mutate(obj: &mut Value, mutation: &Mutation, ev: &mut Evaluator<'_>, schema: Option<&Schema>) -> Result<(), String> {
    match mutation {
        Mutation::ApplyConfiguration(e) => {
            let v = ev.eval(e)?;
            let patch = crate::cel::to_json(&v).map_err(|m| format!("unsupported return type from ApplyConfiguration expression: {m}"))?;
            super::apply::merge(obj, &patch, schema.map(Schema::root)).map_err(|m| format!("error applying patch: {m}"))
        }
        Mutation::JsonPatch(e) => {
            let v = ev.eval(e)?;
            if !matches!(v, Cel::List(_)) {
                return Err("type mismatch: JSONPatchType.expression should evaluate to array".into());
            }
            let ops = crate::cel::to_json(&v).map_err(|m| format!("JSONPath valueExpression evaluated to a type that could not marshal to JSON: {m}"))?;
            let patch: json_patch::Patch = serde_json::from_value(ops).map_err(|m| format!("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: {m}"))?;
            match json_patch::patch(obj, &patch.0) {
                Ok(()) => Ok(()),
                Err(e) if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) => Ok(()),
                Err(e) => Err(format!("JSONPath: {e}")),
            }
        }
        Mutation::Unsupported(t) => Err(format!("unsupported patchType {}", crate::errors::go_quote(t))),
    }
}

/// One invocation's result: the errors it met (the object is changed in place).
fn invoke(policy: &MutatingPolicy, binding: &str, inputs: &Inputs, params: Option<&Value>, obj: &mut Value, schema: Option<&Schema>) -> Vec<PolicyError> {
    let ignore = policy.common.failure_policy == FailurePolicy::Ignore;
    let err = |message: String| PolicyError { policy: policy.common.name.clone(), binding: Some(binding.to_string()), message, reason: Some("Invalid"), ignore };
    let mut errors = Vec::new();
    let at = |o: &Value| Inputs { object: crate::cel::to_cel(o), ..inputs.clone() };
    let mut ev = Evaluator::new(&at(obj), params, &policy.common.variables);
    match ev.match_conditions(&policy.common.match_conditions) {
        Ok(true) => {}
        Ok(false) => return errors,
        Err(e) => return vec![err(e)],
    }
    for (i, m) in policy.mutations.iter().enumerate() {
        if i > 0 {
            ev = Evaluator::new(&at(obj), params, &policy.common.variables);
        }
        let mut next = obj.clone();
        match mutate(&mut next, m, &mut ev, schema) {
            Ok(()) => {
                if let Some(s) = schema.filter(|s| s.origin() == Origin::Custom) {
                    s.apply_defaults(&mut next);
                }
                *obj = next;
            }
            Err(e) => errors.push(err(e)),
        }
    }
    errors
}

/// What selecting produced, in kube's order.
enum Step {
    /// A configuration error.
    Error(PolicyError),
    /// Invoke hook `hook` for `binding` with `param`.
    Invoke { hook: usize, binding: String, param: Option<Value> },
}

#[async_trait]
impl Mutating for MutatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "MutatingAdmissionPolicy"
    }

    /// Creates and updates, while some policy has a binding or the copies
    /// are not complete yet.
    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update) && (self.cache.waiting(&self.sources) || !self.cache.hooks(&self.sources).is_empty())
    }

    fn reinvocable(&self) -> bool {
        self.cache.last().is_some_and(|hooks| hooks.iter().any(|h| h.policy.reinvoke_if_needed))
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        if super::ignored(attrs) {
            return Ok(());
        }
        self.sources.wait_ready(&self.cache.needs(), attrs).await?;
        let hooks = self.cache.hooks(&self.sources);
        if hooks.is_empty() || attrs.object.is_none() {
            return Ok(());
        }
        let mut steps = Vec::new();
        for (i, hook) in hooks.iter().enumerate() {
            let common = &hook.policy.common;
            if attrs.reinvocation && !hook.policy.reinvoke_if_needed {
                continue;
            }
            let ignore = common.failure_policy == FailurePolicy::Ignore;
            let config = |binding: Option<&Value>, err: String| {
                Step::Error(PolicyError {
                    policy: common.name.clone(),
                    binding: binding.map(|b| meta::name(b).to_string()),
                    message: if binding.is_some() { format!("failed to configure binding: {err}") } else { format!("failed to configure policy: {err}") },
                    reason: None,
                    ignore,
                })
            };
            match policy_matches(common, attrs, &self.sources) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    steps.push(config(None, e));
                    continue;
                }
            }
            if let Some(e) = super::param_kind_error(common.param_kind.as_ref(), &self.schemas) {
                steps.push(config(None, e));
                continue;
            }
            for b in &hook.bindings {
                match binding_matches(b, attrs, &self.sources) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        steps.push(config(Some(b), e));
                        continue;
                    }
                }
                match collect_params(&*self.storage, common.param_kind.as_ref(), b, attrs.namespace).await {
                    Ok(params) => steps.extend(params.into_iter().map(|param| Step::Invoke { hook: i, binding: meta::name(b).to_string(), param })),
                    Err(e) => steps.push(config(Some(b), e)),
                }
            }
        }
        if steps.is_empty() {
            return Ok(());
        }

        let invoking = steps.iter().any(|s| matches!(s, Step::Invoke { .. }));
        let blocking = steps.iter().any(|s| matches!(s, Step::Invoke { hook, .. } if hooks[*hook].policy.common.uses_authorizer));
        let mut errors = Vec::new();
        if invoking {
            let inputs = Inputs::of(attrs, &self.sources, blocking.then_some(&self.authorizer))?;
            let schema = self.schemas.of_kind(attrs.kind.group, attrs.kind.version, attrs.kind.kind);
            let obj = attrs.object.take().unwrap_or(Value::Null);
            let hooks = hooks.clone();
            let reinvoking = attrs.reinvocation;
            let (obj, found) = super::run(blocking, move || {
                let mut obj = obj;
                let mut errors = Vec::new();
                // (step, object as it left the step) of IfNeeded policies.
                let mut left_by_reinvocable: Vec<(usize, Value)> = Vec::new();
                for (i, step) in steps.iter().enumerate() {
                    match step {
                        Step::Error(e) => errors.push(e.clone()),
                        Step::Invoke { hook, binding, param } => {
                            errors.extend(invoke(&hooks[*hook].policy, binding, &inputs, param.as_ref(), &mut obj, schema.as_ref()));
                            if hooks[*hook].policy.reinvoke_if_needed {
                                left_by_reinvocable.push((i, obj.clone()));
                            }
                        }
                    }
                }
                // A later policy changed the object after an IfNeeded one
                // ran: those run once more (kube's policy reinvocation).
                if !reinvoking && left_by_reinvocable.iter().any(|(_, o)| *o != obj) {
                    for (i, _) in &left_by_reinvocable {
                        if let Step::Invoke { hook, binding, param } = &steps[*i] {
                            for e in invoke(&hooks[*hook].policy, binding, &inputs, param.as_ref(), &mut obj, schema.as_ref()) {
                                if !errors.contains(&e) {
                                    errors.push(e);
                                }
                            }
                        }
                    }
                }
                (obj, errors)
            })
            .await?;
            attrs.object = Some(obj);
            errors = found;
        } else {
            errors.extend(steps.into_iter().filter_map(|s| if let Step::Error(e) = s { Some(e) } else { None }));
        }

        errors.retain(|e| !e.ignore);
        let Some(first) = errors.first() else { return Ok(()) };
        let mut status = super::forbidden(attrs, "admission request denied by policy");
        status.message = first.text();
        if let Some(r) = first.reason {
            status.reason = r.to_string();
        }
        for e in &errors {
            super::add_cause(&mut status, &e.text());
        }
        Err(status)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::admission::sources::Fixed;
    use crate::admission::testing::TestRequest;
    use crate::admission::{Kind, Resource};
    use serde_json::json;

    fn plugin(policies: Vec<Value>, bindings: Vec<Value>) -> MutatingAdmissionPolicy {
        let sources = Sources::new();
        sources.set(super::super::GROUP, "mutatingadmissionpolicies", Fixed::of(policies));
        sources.set(super::super::GROUP, "mutatingadmissionpolicybindings", Fixed::of(bindings));
        sources.set("", "namespaces", Fixed::of([json!({"metadata": {"name": "default"}})]));
        let storage: Arc<dyn Storage> = Arc::new(super::super::testing::Fixed(Default::default()));
        MutatingAdmissionPolicy::new(sources, storage, Arc::new(crate::authz::always::AlwaysAllow), SchemaStore::builtin())
    }

    fn policy(name: &str, failure: &str, mutations: Value) -> Value {
        json!({"metadata": {"name": name, "uid": name, "generation": 1}, "spec": {
            "failurePolicy": failure,
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
            "mutations": mutations,
        }})
    }

    fn binding(policy: &str) -> Value {
        json!({"metadata": {"name": format!("{policy}-b")}, "spec": {"policyName": policy}})
    }

    async fn admit(p: &MutatingAdmissionPolicy, obj: Value) -> Result<Value, Status> {
        let req = TestRequest::default();
        let mut attrs = req.create(Resource { group: "apps", version: "v1", resource: "deployments" }, Kind { group: "apps", version: "v1", kind: "Deployment" }, "web", "default", obj);
        p.admit(&mut attrs).await?;
        Ok(attrs.object.unwrap_or_default())
    }

    #[tokio::test]
    async fn apply_configurations_and_json_patches_apply_in_order() {
        let apply = json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{annotations: {\"a\": \"1\"}}}"}}]);
        let patch = json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: \"add\", path: \"/metadata/labels\", value: {\"b\": object.metadata.annotations[\"a\"]}}]"}}]);
        let p = plugin(vec![policy("a", "Fail", apply), policy("b", "Fail", patch)], vec![binding("a"), binding("b")]);
        let out = admit(&p, json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 1}})).await.unwrap();
        assert_eq!(out["metadata"]["annotations"], json!({"a": "1"}));
        assert_eq!(out["metadata"]["labels"], json!({"b": "1"}));
        assert!(!p.reinvocable());
    }

    #[tokio::test]
    async fn if_needed_policies_run_again_after_a_later_change() {
        let copy = json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{annotations: {\"copied\": \"labels\" in object.metadata && \"b\" in object.metadata.labels ? object.metadata.labels[\"b\"] : \"none\"}}}"}}]);
        let label = json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: \"add\", path: \"/metadata/labels\", value: {\"b\": \"set\"}}]"}}]);
        let mut a = policy("a", "Fail", copy);
        let obj = json!({"metadata": {"name": "web", "namespace": "default"}});
        let p = plugin(vec![a.clone(), policy("b", "Fail", label.clone())], vec![binding("a"), binding("b")]);
        assert_eq!(admit(&p, obj.clone()).await.unwrap()["metadata"]["annotations"]["copied"], "none", "Never: not run again");
        a["spec"]["reinvocationPolicy"] = json!("IfNeeded");
        let p = plugin(vec![a, policy("b", "Fail", label)], vec![binding("a"), binding("b")]);
        let out = admit(&p, obj).await.unwrap();
        assert_eq!((&out["metadata"]["annotations"]["copied"], &out["metadata"]["labels"]["b"]), (&json!("set"), &json!("set")));
        assert!(p.reinvocable());
    }

    #[tokio::test]
    async fn errors_follow_the_failure_policy() {
        let bad = json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: \"replace\", path: \"/nope/x\", value: 1}]"}}]);
        let p = plugin(vec![policy("bad", "Fail", bad.clone())], vec![binding("bad")]);
        let err = admit(&p, json!({"metadata": {"name": "web"}})).await.unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (403, "Invalid"));
        assert!(err.message.starts_with("policy 'bad' with binding 'bad-b' denied request: JSONPath: "), "{err:?}");
        let p = plugin(vec![policy("bad", "Ignore", bad)], vec![binding("bad")]);
        assert_eq!(admit(&p, json!({"metadata": {"name": "web"}})).await.unwrap(), json!({"metadata": {"name": "web"}}));
    }
}
