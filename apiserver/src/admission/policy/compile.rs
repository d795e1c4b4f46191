//! Compiling admission policies: every CEL expression of a
//! ValidatingAdmissionPolicy or MutatingAdmissionPolicy parsed once, when
//! the policy (uid, generation) is first seen, with what evaluation needs
//! to know about it beforehand: the `variables.<name>` it reads (so
//! variables are evaluated only when used, as kube's composition does) and
//! whether it calls the `authorizer` (so the evaluation runs where it may
//! block on the authorizer).
//!
//! A policy whose expression does not compile is still compiled: the
//! expression carries its error, which evaluation reports under the
//! policy's `failurePolicy`, as kube does (`compilation error: …`).

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

use crate::cel::Program;

/// One CEL expression of a policy.
#[derive(Debug, Clone)]
pub struct Expression {
    /// The expression as written.
    pub source: String,
    /// The program, or the compile error in kube's words
    /// (`compilation failed: ERROR: <input>:1:5: …`).
    pub program: Result<Program, String>,
    /// The names `variables.<name>` reads, in order of first use.
    pub variables: Vec<String>,
    /// Whether it reads `authorizer` (directly; variables it reads are
    /// looked at separately).
    pub uses_authorizer: bool,
}

impl Expression {
    /// Compiles `source`.
    pub fn compile(source: &str) -> Expression {
        match Program::compile(source) {
            Ok(p) => {
                let variables = match kube_cel::cel::parser::Parser::default().parse(source) {
                    Ok(ast) => variable_refs(&ast),
                    Err(_) => Vec::new(),
                };
                let uses_authorizer = p.references_variable("authorizer");
                Expression { source: source.to_string(), program: Ok(p), variables, uses_authorizer }
            }
            Err(e) => Expression { source: source.to_string(), program: Err(e.to_string()), variables: Vec::new(), uses_authorizer: false },
        }
    }

    /// The compile error, if any.
    pub fn error(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }
}

/// Calls `f` on `e` and every expression inside it.
pub fn visit(e: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    f(e);
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                visit(t, f);
            }
            for a in &c.args {
                visit(a, f);
            }
        }
        Expr::Comprehension(c) => {
            for x in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                visit(x, f);
            }
        }
        Expr::List(l) => {
            for x in &l.elements {
                visit(x, f);
            }
        }
        Expr::Map(m) => visit_entries(&m.entries, f),
        Expr::Struct(s) => visit_entries(&s.entries, f),
        Expr::Select(s) => visit(&s.operand, f),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn visit_entries(es: &[kube_cel::cel::common::ast::IdedEntryExpr], f: &mut dyn FnMut(&IdedExpr)) {
    for e in es {
        match &e.expr {
            EntryExpr::StructField(s) => visit(&s.value, f),
            EntryExpr::MapEntry(m) => {
                visit(&m.key, f);
                visit(&m.value, f);
            }
        }
    }
}

/// The `<name>` of every `variables.<name>` in `e`, once each.
fn variable_refs(e: &IdedExpr) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    visit(e, &mut |x| {
        if let Expr::Select(s) = &x.expr {
            if matches!(&s.operand.expr, Expr::Ident(i) if i == "variables") && !out.contains(&s.field) {
                out.push(s.field.clone());
            }
        }
    });
    out
}

/// `failurePolicy`: what an error (a compile or evaluation error, a
/// missing param, an unknown namespace) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is refused (the default).
    Fail,
    /// The policy is skipped.
    Ignore,
}

impl FailurePolicy {
    fn of(spec: &Value) -> FailurePolicy {
        if spec["failurePolicy"] == "Ignore" {
            FailurePolicy::Ignore
        } else {
            FailurePolicy::Fail
        }
    }
}

/// What both kinds of policy have: matching, match conditions, params and
/// variables.
#[derive(Debug)]
pub struct Common {
    /// `metadata.name`.
    pub name: String,
    /// `spec.failurePolicy` (default Fail).
    pub failure_policy: FailurePolicy,
    /// `spec.matchConstraints`.
    pub match_constraints: Value,
    /// `spec.paramKind` (`{apiVersion, kind}`), if set.
    pub param_kind: Option<Value>,
    /// `spec.matchConditions`: (name, expression).
    pub match_conditions: Vec<(String, Expression)>,
    /// `spec.variables`: (name, expression), in order.
    pub variables: Vec<(String, Expression)>,
    /// Whether any expression of the policy may call the authorizer.
    pub uses_authorizer: bool,
}

impl Common {
    fn compile(policy: &Value) -> Common {
        let spec = &policy["spec"];
        let named = |field: &str| -> Vec<(String, Expression)> {
            spec[field].as_array().into_iter().flatten().map(|c| (c["name"].as_str().unwrap_or("").to_string(), Expression::compile(c["expression"].as_str().unwrap_or("")))).collect()
        };
        let match_conditions = named("matchConditions");
        let variables = named("variables");
        let uses_authorizer = match_conditions.iter().chain(&variables).any(|(_, e)| e.uses_authorizer);
        Common {
            name: crate::meta::name(policy).to_string(),
            failure_policy: FailurePolicy::of(spec),
            match_constraints: spec["matchConstraints"].clone(),
            param_kind: spec["paramKind"].as_object().map(|_| spec["paramKind"].clone()),
            match_conditions,
            variables,
            uses_authorizer,
        }
    }

    /// Every expression with its field path (`spec.variables[0].expression`).
    fn expressions(&self) -> impl Iterator<Item = (String, &Expression)> {
        let conds = self.match_conditions.iter().enumerate().map(|(i, (_, e))| (format!("spec.matchConditions[{i}].expression"), e));
        let vars = self.variables.iter().enumerate().map(|(i, (_, e))| (format!("spec.variables[{i}].expression"), e));
        conds.chain(vars)
    }
}

/// One of `spec.validations`.
#[derive(Debug)]
pub struct Validation {
    /// `expression`.
    pub expression: Expression,
    /// `message`, or empty.
    pub message: String,
    /// `messageExpression`, if set.
    pub message_expression: Option<Expression>,
    /// `reason` (`Unauthorized`, `Forbidden`, `Invalid`,
    /// `RequestEntityTooLarge`), if set; kube answers `Invalid` without one.
    pub reason: Option<String>,
}

/// A compiled ValidatingAdmissionPolicy.
#[derive(Debug)]
pub struct ValidatingPolicy {
    /// Matching, conditions, params, variables.
    pub common: Common,
    /// `spec.validations`.
    pub validations: Vec<Validation>,
    /// `spec.auditAnnotations`: (key, valueExpression).
    pub audit_annotations: Vec<(String, Expression)>,
}

impl ValidatingPolicy {
    /// Compiles every expression of `policy`.
    pub fn compile(policy: &Value) -> ValidatingPolicy {
        let mut common = Common::compile(policy);
        let spec = &policy["spec"];
        let validations: Vec<Validation> = spec["validations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| Validation {
                expression: Expression::compile(v["expression"].as_str().unwrap_or("")),
                message: v["message"].as_str().unwrap_or("").to_string(),
                message_expression: v["messageExpression"].as_str().filter(|s| !s.is_empty()).map(Expression::compile),
                reason: v["reason"].as_str().filter(|s| !s.is_empty()).map(str::to_string),
            })
            .collect();
        let audit_annotations: Vec<(String, Expression)> = spec["auditAnnotations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| (a["key"].as_str().unwrap_or("").to_string(), Expression::compile(a["valueExpression"].as_str().unwrap_or(""))))
            .collect();
        common.uses_authorizer |= validations.iter().any(|v| v.expression.uses_authorizer || v.message_expression.as_ref().is_some_and(|m| m.uses_authorizer));
        common.uses_authorizer |= audit_annotations.iter().any(|(_, e)| e.uses_authorizer);
        ValidatingPolicy { common, validations, audit_annotations }
    }

    /// Every expression with its field path, for status and checks.
    pub fn expressions(&self) -> Vec<(String, &Expression)> {
        let mut out: Vec<(String, &Expression)> = self.common.expressions().collect();
        for (i, v) in self.validations.iter().enumerate() {
            out.push((format!("spec.validations[{i}].expression"), &v.expression));
            if let Some(m) = &v.message_expression {
                out.push((format!("spec.validations[{i}].messageExpression"), m));
            }
        }
        for (i, (_, e)) in self.audit_annotations.iter().enumerate() {
            out.push((format!("spec.auditAnnotations[{i}].valueExpression"), e));
        }
        out
    }
}

/// One of a MutatingAdmissionPolicy's `spec.mutations`.
#[derive(Debug)]
pub enum Mutation {
    /// `patchType: ApplyConfiguration`: the expression yields an
    /// `Object{…}` merged into the object.
    ApplyConfiguration(Expression),
    /// `patchType: JSONPatch`: the expression yields a list of
    /// `JSONPatch{op, path, value, from}` applied to the object.
    JsonPatch(Expression),
    /// Any other patch type (refused when the policy runs).
    Unsupported(String),
}

/// A compiled MutatingAdmissionPolicy.
#[derive(Debug)]
pub struct MutatingPolicy {
    /// Matching, conditions, params, variables.
    pub common: Common,
    /// `spec.mutations`, in order.
    pub mutations: Vec<Mutation>,
    /// `spec.reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
}

impl MutatingPolicy {
    /// Compiles every expression of `policy`.
    pub fn compile(policy: &Value) -> MutatingPolicy {
        let mut common = Common::compile(policy);
        let spec = &policy["spec"];
        let mutations: Vec<Mutation> = spec["mutations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| match m["patchType"].as_str().unwrap_or("") {
                "ApplyConfiguration" => Mutation::ApplyConfiguration(Expression::compile(m["applyConfiguration"]["expression"].as_str().unwrap_or(""))),
                "JSONPatch" => Mutation::JsonPatch(Expression::compile(m["jsonPatch"]["expression"].as_str().unwrap_or(""))),
                other => Mutation::Unsupported(other.to_string()),
            })
            .collect();
        common.uses_authorizer |= mutations.iter().any(|m| matches!(m, Mutation::ApplyConfiguration(e) | Mutation::JsonPatch(e) if e.uses_authorizer));
        MutatingPolicy { common, mutations, reinvoke_if_needed: spec["reinvocationPolicy"] == "IfNeeded" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_know_their_variables_and_the_authorizer() {
        let e = Expression::compile("variables.a + variables.b > size(variables.a)");
        assert_eq!(e.variables, vec!["a".to_string(), "b".to_string()]);
        assert!(!e.uses_authorizer);
        let e = Expression::compile("authorizer.group('').resource('pods').check('get').allowed()");
        assert!(e.uses_authorizer && e.error().is_none());
        let e = Expression::compile("object.spec.replicas <=");
        assert!(e.error().is_some_and(|m| m.starts_with("compilation failed: ")), "{e:?}");
    }

    #[test]
    fn a_policy_compiles_with_its_defaults() {
        let p = ValidatingPolicy::compile(&json!({
            "metadata": {"name": "p"},
            "spec": {
                "validations": [{"expression": "object.x", "messageExpression": "'m'", "reason": "Forbidden"}],
                "variables": [{"name": "v", "expression": "authorizer.path('/x').check('get').allowed()"}],
                "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}],
            }
        }));
        assert_eq!(p.common.failure_policy, FailurePolicy::Fail);
        assert!(p.common.uses_authorizer);
        assert_eq!(p.validations[0].reason.as_deref(), Some("Forbidden"));
        let paths: Vec<String> = p.expressions().into_iter().map(|(f, _)| f).collect();
        assert_eq!(paths, ["spec.variables[0].expression", "spec.validations[0].expression", "spec.validations[0].messageExpression", "spec.auditAnnotations[0].valueExpression"]);
    }
}
