//! The `ValidatingAdmissionPolicy` plugin (kube
//! `admission/plugin/policy/validating`): every matching
//! (policy, binding, param) invocation evaluates the policy's
//! `validations` and `auditAnnotations`, and the binding's
//! `validationActions` say what a failed validation does:
//!
//! - `Deny`: the request is refused with the first failure, as kube words
//!   it: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy 'P'
//!   with binding 'B' denied request: <message>`, with the validation's
//!   `reason` (default `Invalid`, 422) and the message as a cause;
//! - `Warn`: a `Warning` header `Validation failed for
//!   ValidatingAdmissionPolicy 'P' with binding 'B': <message>`;
//! - `Audit`: the audit annotation
//!   `validation.policy.admission.k8s.io/validation_failure`, a JSON list
//!   `[{"message", "policy", "binding", "expressionIndex", "validationActions"}]`.
//!
//! The message of a failed validation is its `messageExpression`'s string
//! (trimmed; dropped when empty, longer than 5 KiB or multi-line), else
//! its `message`, else `failed expression: <expression>`. An expression
//! that errs is a failure under `failurePolicy: Fail` (message: the
//! error) and is ignored under `Ignore`.
//!
//! `auditAnnotations` publish `<policy>/<key>` with the value the
//! expression yields (a string; `null` or empty publishes nothing);
//! values of several bindings are joined with `, `.
//!
//! A binding without `validationActions` (kube refuses to store one) acts
//! as `[Deny]`.

use std::sync::Arc;

use async_trait::async_trait;
use kube_cel::cel::Value as Cel;
use serde_json::Value;

use super::compile::{FailurePolicy, ValidatingPolicy};
use super::{binding_matches, collect_params, policy_matches, Cache, Evaluator, Inputs};
use crate::admission::sources::Sources;
use crate::admission::{Attributes, Operation, Validating};
use crate::authz::Authorizer;
use crate::errors::Status;
use crate::meta;
use crate::storage::Storage;

/// kube's limit on an evaluated `messageExpression`
/// (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// kube's limit on an audit annotation value.
const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

/// The audit annotation of the `Audit` action.
pub const VALIDATION_FAILURE_ANNOTATION: &str = "validation.policy.admission.k8s.io/validation_failure";

/// The plugin.
pub struct ValidatingAdmissionPolicy {
    sources: Arc<Sources>,
    storage: Arc<dyn Storage>,
    authorizer: Arc<dyn Authorizer>,
    schemas: crate::schema::SchemaStore,
    cache: Cache<ValidatingPolicy>,
}

impl ValidatingAdmissionPolicy {
    /// The plugin over the policies and bindings of `sources`, reading
    /// params from `storage` and asking `authorizer` for CEL's
    /// `authorizer`; a paramKind whose kind has no schema in `schemas` is
    /// not served.
    pub fn new(sources: Arc<Sources>, storage: Arc<dyn Storage>, authorizer: Arc<dyn Authorizer>, schemas: crate::schema::SchemaStore) -> Self {
        ValidatingAdmissionPolicy { sources, storage, authorizer, schemas, cache: Cache::new("validatingadmissionpolicies", "validatingadmissionpolicybindings", ValidatingPolicy::compile) }
    }
}

/// One validation's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Whether the validation failed (or erred under `Fail`).
    pub deny: bool,
    /// The failure's message.
    pub message: String,
    /// The validation's `reason`, if it failed (rather than erred) and had one.
    pub reason: Option<String>,
}

/// One audit annotation's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditAnnotation {
    /// Publish `<policy>/<key>` = value.
    Publish(String, String),
    /// The expression erred under `Fail`: the request is refused.
    Error(String),
    /// Nothing to publish.
    Exclude,
}

/// What one invocation decided.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    /// One per validation (or one for a match condition error).
    pub decisions: Vec<Decision>,
    /// One per audit annotation.
    pub audit: Vec<AuditAnnotation>,
}

/// Evaluates `policy` for one invocation (kube's `validator.Validate`).
pub fn evaluate(policy: &ValidatingPolicy, inputs: &Inputs, params: Option<&Value>) -> Outcome {
    let fail = policy.common.failure_policy == FailurePolicy::Fail;
    let mut ev = Evaluator::new(inputs, params, &policy.common.variables);
    match ev.match_conditions(&policy.common.match_conditions) {
        Ok(true) => {}
        Ok(false) => return Outcome::default(),
        Err(e) => return Outcome { decisions: vec![Decision { deny: fail, message: e, reason: None }], audit: Vec::new() },
    }
    let mut decisions = Vec::with_capacity(policy.validations.len());
    for v in &policy.validations {
        let d = match ev.eval(&v.expression) {
            Err(e) => Decision { deny: fail, message: e, reason: None },
            Ok(Cel::Bool(true)) => Decision { deny: false, message: String::new(), reason: None },
            Ok(_) => {
                let from_expression = v.message_expression.as_ref().and_then(|m| match ev.eval(m) {
                    Ok(Cel::String(s)) => Some(s.trim().to_string()).filter(|s| !s.is_empty() && s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n')),
                    _ => None,
                });
                let message = from_expression.or_else(|| Some(v.message.trim().to_string()).filter(|m| !m.is_empty())).unwrap_or_else(|| format!("failed expression: {}", v.expression.source.trim()));
                Decision { deny: true, message, reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".to_string())) }
            }
        };
        decisions.push(d);
    }
    let mut audit = Vec::with_capacity(policy.audit_annotations.len());
    for (key, e) in &policy.audit_annotations {
        let a = match ev.eval(e) {
            Err(err) if fail => AuditAnnotation::Error(err),
            Err(_) => AuditAnnotation::Exclude,
            Ok(Cel::String(s)) => {
                let mut value = s.trim().to_string();
                if value.is_empty() {
                    AuditAnnotation::Exclude
                } else {
                    if value.len() > MAX_AUDIT_VALUE_BYTES {
                        let mut cut = MAX_AUDIT_VALUE_BYTES;
                        while !value.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        value.truncate(cut);
                    }
                    AuditAnnotation::Publish(key.clone(), value)
                }
            }
            Ok(Cel::Null) => AuditAnnotation::Exclude,
            Ok(other) => {
                AuditAnnotation::Error(format!("valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.", e.source, crate::cel::type_name(&other)))
            }
        };
        audit.push(a);
    }
    Outcome { decisions, audit }
}

/// A reason to refuse the request.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

/// What selecting produced, in kube's order.
enum Step {
    /// A configuration error under `failurePolicy: Fail`.
    Denied(Denial),
    /// Evaluate hook `hook` for `binding` with `param`.
    Invoke { hook: usize, binding: Arc<Value>, param: Option<Value> },
    /// The bindings of hook `hook` are done: publish its audit annotations.
    PolicyDone(usize),
}

/// The binding's `validationActions` (`[Deny]` when none).
fn actions(binding: &Value) -> Vec<String> {
    let a: Vec<String> = binding["spec"]["validationActions"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
    if a.is_empty() {
        vec!["Deny".to_string()]
    } else {
        a
    }
}

/// The value of the `Audit` action's annotation (kube's
/// `ValidationFailureValue`, in its field order).
fn failure_annotation(message: &str, policy: &str, binding: &str, index: usize, actions: &[String]) -> String {
    let q = |s: &str| Value::String(s.to_string()).to_string();
    let acts: Vec<String> = actions.iter().map(|a| q(a)).collect();
    format!(r#"[{{"message":{},"policy":{},"binding":{},"expressionIndex":{index},"validationActions":[{}]}}]"#, q(message), q(policy), q(binding), acts.join(","))
}

#[async_trait]
impl Validating for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    /// Every operation, while some policy has a binding (so that writes
    /// skip building admission attributes when there is none) or the
    /// copies are not complete yet.
    fn handles(&self, _op: Operation) -> bool {
        self.cache.waiting(&self.sources) || !self.cache.hooks(&self.sources).is_empty()
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        if super::ignored(attrs) {
            return Ok(());
        }
        self.sources.wait_ready(&self.cache.needs(), attrs).await?;
        let hooks = self.cache.hooks(&self.sources);
        if hooks.is_empty() {
            return Ok(());
        }
        let mut steps = Vec::new();
        for (i, hook) in hooks.iter().enumerate() {
            let common = &hook.policy.common;
            let fail = common.failure_policy == FailurePolicy::Fail;
            let config = |binding: Option<&Value>, err: String| Denial {
                policy: common.name.clone(),
                binding: binding.map(|b| meta::name(b).to_string()),
                message: if binding.is_some() { format!("failed to configure binding: {err}") } else { format!("failed to configure policy: {err}") },
                reason: None,
            };
            match policy_matches(common, attrs, &self.sources) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    if fail {
                        steps.push(Step::Denied(config(None, e)));
                    }
                    continue;
                }
            }
            if let Some(e) = super::param_kind_error(common.param_kind.as_ref(), &self.schemas) {
                if fail {
                    steps.push(Step::Denied(config(None, e)));
                }
                continue;
            }
            for b in &hook.bindings {
                match binding_matches(b, attrs, &self.sources) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        if fail {
                            steps.push(Step::Denied(config(Some(b), e)));
                        }
                        continue;
                    }
                }
                match collect_params(&*self.storage, common.param_kind.as_ref(), b, attrs.namespace).await {
                    Ok(params) => steps.extend(params.into_iter().map(|param| Step::Invoke { hook: i, binding: b.clone(), param })),
                    Err(e) if fail => steps.push(Step::Denied(config(Some(b), e))),
                    Err(_) => {}
                }
            }
            steps.push(Step::PolicyDone(i));
        }

        let invocations: Vec<(Arc<ValidatingPolicy>, Option<Value>)> =
            steps.iter().filter_map(|s| if let Step::Invoke { hook, param, .. } = s { Some((hooks[*hook].policy.clone(), param.clone())) } else { None }).collect();
        let mut outcomes = Vec::new().into_iter();
        if !invocations.is_empty() {
            let blocking = invocations.iter().any(|(p, _)| p.common.uses_authorizer);
            let inputs = Inputs::of(attrs, &self.sources, blocking.then_some(&self.authorizer))?;
            let results = super::run(blocking, move || invocations.iter().map(|(p, param)| evaluate(p, &inputs, param.as_ref())).collect::<Vec<_>>()).await?;
            outcomes = results.into_iter();
        }

        let mut denied = Vec::new();
        let mut published: Vec<(String, Vec<String>)> = Vec::new();
        for step in steps {
            match step {
                Step::Denied(d) => denied.push(d),
                Step::Invoke { hook, binding, .. } => {
                    let Some(outcome) = outcomes.next() else { break };
                    let policy = &hooks[hook].policy.common.name;
                    let bname = meta::name(&binding).to_string();
                    let acts = actions(&binding);
                    for (index, d) in outcome.decisions.iter().enumerate().filter(|(_, d)| d.deny) {
                        for a in &acts {
                            match a.as_str() {
                                "Deny" => denied.push(Denial { policy: policy.clone(), binding: Some(bname.clone()), message: d.message.clone(), reason: d.reason.clone() }),
                                "Warn" => attrs.warnings.add(format!("Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{bname}': {}", d.message)),
                                "Audit" => attrs.add_audit_annotation(VALIDATION_FAILURE_ANNOTATION, &failure_annotation(&d.message, policy, &bname, index, &acts)),
                                _ => {}
                            }
                        }
                    }
                    for a in outcome.audit {
                        match a {
                            AuditAnnotation::Publish(key, value) => match published.iter_mut().find(|(k, _)| *k == key) {
                                Some((_, values)) if !values.contains(&value) => values.push(value),
                                Some(_) => {}
                                None => published.push((key, vec![value])),
                            },
                            AuditAnnotation::Error(message) => denied.push(Denial { policy: policy.clone(), binding: Some(bname.clone()), message, reason: None }),
                            AuditAnnotation::Exclude => {}
                        }
                    }
                }
                Step::PolicyDone(hook) => {
                    let policy = &hooks[hook].policy.common.name;
                    for (key, values) in published.drain(..) {
                        attrs.add_audit_annotation(&format!("{policy}/{key}"), &values.join(", "));
                    }
                }
            }
        }

        let Some(d) = denied.first() else { return Ok(()) };
        let message = match &d.binding {
            Some(b) => format!("ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}", d.policy, d.message),
            None => format!("ValidatingAdmissionPolicy '{}' denied request: {}", d.policy, d.message),
        };
        let mut status = super::forbidden(attrs, &message);
        let reason = d.reason.clone().unwrap_or_else(|| "Invalid".to_string());
        status.code = super::reason_code(&reason);
        status.reason = reason;
        super::add_cause(&mut status, &message);
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

    fn inputs(obj: Value) -> Inputs {
        Inputs { object: crate::cel::to_cel(&obj), old_object: Cel::Null, request: Cel::Null, namespace_object: Cel::Null, authorizer: None }
    }

    fn policy(spec: Value) -> ValidatingPolicy {
        ValidatingPolicy::compile(&json!({"metadata": {"name": "p"}, "spec": spec}))
    }

    #[test]
    fn messages_come_from_the_expression_the_message_or_the_source() {
        let p = policy(json!({"validations": [
            {"expression": "object.n < 5", "messageExpression": "'n is ' + string(object.n)"},
            {"expression": "object.n < 5", "messageExpression": "'two\\nlines'", "message": " fixed ", "reason": "Forbidden"},
            {"expression": " object.n < 5 "},
            {"expression": "object.n > 5"},
        ]}));
        let out = evaluate(&p, &inputs(json!({"n": 6})), None);
        let msgs: Vec<(bool, &str, Option<&str>)> = out.decisions.iter().map(|d| (d.deny, d.message.as_str(), d.reason.as_deref())).collect();
        assert_eq!(msgs, [(true, "n is 6", Some("Invalid")), (true, "fixed", Some("Forbidden")), (true, "failed expression: object.n < 5", Some("Invalid")), (false, "", None)]);
    }

    #[test]
    fn errors_follow_the_failure_policy() {
        let spec = |fp: &str| json!({"failurePolicy": fp, "validations": [{"expression": "object.missing > 1"}], "auditAnnotations": [{"key": "k", "valueExpression": "object.missing"}]});
        let out = evaluate(&policy(spec("Fail")), &inputs(json!({})), None);
        assert!(out.decisions[0].deny);
        assert!(out.decisions[0].message.starts_with("expression 'object.missing > 1' resulted in error: "), "{:?}", out.decisions);
        assert!(matches!(&out.audit[0], AuditAnnotation::Error(_)));
        let out = evaluate(&policy(spec("Ignore")), &inputs(json!({})), None);
        assert!(!out.decisions[0].deny);
        assert_eq!(out.audit[0], AuditAnnotation::Exclude);
    }

    #[test]
    fn match_conditions_and_params() {
        let p = policy(json!({
            "matchConditions": [{"name": "big", "expression": "object.n > params.data.min"}],
            "validations": [{"expression": "object.n <= int(params.data.max)", "message": "too big"}],
            "auditAnnotations": [{"key": "n", "valueExpression": "string(object.n)"}, {"key": "none", "valueExpression": "null"}],
        }));
        let params = json!({"data": {"min": 1, "max": "3"}});
        assert_eq!(evaluate(&p, &inputs(json!({"n": 0})), Some(&params)), Outcome::default());
        let out = evaluate(&p, &inputs(json!({"n": 4})), Some(&params));
        assert_eq!(out.decisions[0].message, "too big");
        assert_eq!(out.audit, [AuditAnnotation::Publish("n".into(), "4".into()), AuditAnnotation::Exclude]);
    }

    #[test]
    fn failure_annotation_is_kubes_json() {
        let v = failure_annotation("m \"q\"", "p", "b", 2, &["Audit".into(), "Warn".into()]);
        assert_eq!(v, r#"[{"message":"m \"q\"","policy":"p","binding":"b","expressionIndex":2,"validationActions":["Audit","Warn"]}]"#);
    }

    #[tokio::test]
    async fn the_plugin_denies_warns_and_skips_what_does_not_match() {
        let sources = Sources::new();
        let vap = json!({"metadata": {"name": "limit", "uid": "u1", "generation": 1}, "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5", "message": "Deployment replicas must not exceed 5"}],
        }});
        let deny = json!({"metadata": {"name": "deny"}, "spec": {"policyName": "limit", "validationActions": ["Deny"]}});
        let warn = json!({"metadata": {"name": "warn"}, "spec": {"policyName": "limit", "validationActions": ["Warn"], "matchResources": {"namespaceSelector": {"matchLabels": {"env": "test"}}}}});
        sources.set(super::super::GROUP, "validatingadmissionpolicies", Fixed::of([vap]));
        sources.set(super::super::GROUP, "validatingadmissionpolicybindings", Fixed::of([deny, warn]));
        sources.set(
            "",
            "namespaces",
            Fixed::of([json!({"metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}}), json!({"metadata": {"name": "t", "labels": {"env": "test"}}})]),
        );
        let storage: Arc<dyn Storage> = Arc::new(super::super::testing::Fixed(Default::default()));
        let plugin = ValidatingAdmissionPolicy::new(sources.clone(), storage, Arc::new(crate::authz::always::AlwaysAllow), crate::schema::SchemaStore::builtin());
        let req = TestRequest::default();
        let attrs = |ns: &'static str, replicas: i64, op: Operation| Attributes {
            operation: op,
            ..req.create(
                Resource { group: "apps", version: "v1", resource: "deployments" },
                Kind { group: "apps", version: "v1", kind: "Deployment" },
                "web",
                ns,
                json!({"metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": replicas}}),
            )
        };
        assert!(plugin.validate(&attrs("default", 5, Operation::Create)).await.is_ok());
        let err = plugin.validate(&attrs("default", 6, Operation::Create)).await.unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
        assert_eq!(err.message, "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'limit' with binding 'deny' denied request: Deployment replicas must not exceed 5");
        assert!(plugin.validate(&attrs("default", 6, Operation::Delete)).await.is_ok(), "DELETE is not in the rules");
        assert!(plugin.validate(&attrs("t", 6, Operation::Create)).await.is_err());
        assert_eq!(req.warnings.texts(), ["Validation failed for ValidatingAdmissionPolicy 'limit' with binding 'warn': Deployment replicas must not exceed 5"]);
        // An unknown namespace: kube answers 404 before evaluating.
        let err = plugin.validate(&attrs("nowhere", 1, Operation::Create)).await.unwrap_err();
        assert_eq!(err.code, 404, "{err:?}");
    }
}
