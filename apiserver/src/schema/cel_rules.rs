//! `x-kubernetes-validations` of a CRD's schema, evaluated on every write
//! of its custom resources (kube's apiextensions-apiserver
//! `pkg/apiserver/schema/cel`, Kubernetes v1.33).
//!
//! [`Rules::compile`] compiles every rule and `messageExpression` of one
//! compiled schema layer once, when the CRD version is served
//! ([`super::compile_crd`]); [`Rules::validate`] walks an object (and on
//! update the old object) along the schema and evaluates the rules of
//! each node with:
//!
//! - `self`: the node's value, typed by the schema ([`super::cel_values`]);
//!   rules do not run on absent or null values.
//! - `oldSelf`: the old value at the same place, for rules that name it
//!   (transition rules). Old and new values are correlated through object
//!   fields, map keys and the keys of `x-kubernetes-list-type: map` lists,
//!   never through other lists. A transition rule runs only when the old
//!   value exists, unless `optionalOldSelf: true`, in which case `oldSelf`
//!   is an optional (`oldSelf.hasValue()`, `oldSelf.value()`,
//!   `oldSelf.orValue(x)`), `optional.none()` on create.
//!
//! A rule that is false gives a field error at the node's path (`<nil>` at
//! the root), or at `fieldPath` below it, with the value the node's schema
//! type (`spec: Invalid value: "object": replicas must be <= 8`), the
//! detail `message`, the `messageExpression`'s string, or
//! `failed rule: <rule>`, and the type `reason` says (FieldValueInvalid by
//! default; Forbidden and Required print no value, Duplicate no detail).
//!
//! Cost: each evaluation may cost [`crate::cel::PER_CALL_LIMIT`]; all the
//! evaluations of one object share [`crate::cel::RUNTIME_BUDGET`]. Past
//! either, validation stops with kube's error. Costs are counted as
//! [`crate::cel`] counts them (calls and comprehension steps).
//!
//! Ratcheting (kube's `CRDValidationRatcheting`): on update, a failing
//! rule that does not use `oldSelf` is ignored when the value at its node
//! (or, for a node without an old value, at its nearest correlated
//! ancestor) is unchanged. kube reports those as warnings; they are
//! dropped here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::Value as Cel;
use serde_json::Value;

use super::cel_values::typed;
use super::compiled::{Compiled, ListType, NodeId, SchemaRef};
use super::field::{self, BadValue, ErrorType, FieldError};
use crate::cel::{Activation, Budget, EvalError, Program, PER_CALL_LIMIT, RUNTIME_BUDGET};
use crate::errors::go_quote;

/// kube's longest accepted `messageExpression` result, in bytes
/// (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    /// `rule`, as written.
    source: String,
    /// The program, or why it does not compile.
    program: Result<Program, String>,
    uses_old_self: bool,
    optional_old_self: bool,
    /// `message`, trimmed; empty when not given.
    message: String,
    /// `messageExpression` and its program, when given and compiling.
    message_expression: Option<(String, Program)>,
    /// The field error type of `reason`.
    reason: ErrorType,
    /// `fieldPath`, normalized relative to the node.
    field_path: Option<String>,
}

impl Rule {
    fn compile(v: &Value, node: SchemaRef<'_>) -> Rule {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        let source = s("rule").to_string();
        let program = Program::compile(&source).map_err(|e| e.to_string());
        let uses_old_self = program.as_ref().is_ok_and(|p| p.references_variable("oldSelf"));
        let message_expression = Some(s("messageExpression")).filter(|m| !m.trim().is_empty()).and_then(|m| Program::compile(m).ok().map(|p| (m.to_string(), p)));
        let reason = match s("reason") {
            "FieldValueForbidden" => ErrorType::Forbidden,
            "FieldValueRequired" => ErrorType::Required,
            "FieldValueDuplicate" => ErrorType::Duplicate,
            _ => ErrorType::Invalid,
        };
        let field_path = Some(s("fieldPath").trim()).filter(|p| !p.is_empty()).and_then(|p| super::field_path::normalize(p, node).ok()).filter(|p| !p.is_empty());
        Rule {
            source,
            program,
            uses_old_self,
            optional_old_self: v.get("optionalOldSelf") == Some(&Value::Bool(true)),
            message: s("message").trim().to_string(),
            message_expression,
            reason,
            field_path,
        }
    }

    /// How kube names the rule in evaluation errors (`ruleErrorString`):
    /// its message, else its source.
    fn name(&self) -> &str {
        if self.message.is_empty() {
            self.source.trim()
        } else {
            &self.message
        }
    }

    /// The detail when no messageExpression gives one
    /// (`ruleMessageOrDefault`).
    fn default_detail(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.source.trim())
        } else {
            self.message.clone()
        }
    }
}

/// The compiled rules of one schema layer, by node.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    by_node: HashMap<NodeId, Vec<Rule>>,
    /// Nodes with rules at or below them: the walk skips the others.
    relevant: HashSet<NodeId>,
}

impl Rules {
    /// Compiles the rules of every node of `layer`; `None` when it has
    /// none (the walk is then skipped entirely).
    pub(crate) fn compile(layer: &Compiled) -> Option<Arc<Rules>> {
        let mut by_node = HashMap::new();
        for id in 0..layer.node_count() {
            let Ok(id) = NodeId::try_from(id) else { break };
            let node = layer.at(id);
            // A field's own node (not the definition it names).
            let own = &node.node().validations;
            if own.is_empty() || node.id() != id {
                continue;
            }
            by_node.insert(id, own.iter().map(|v| Rule::compile(v, node)).collect::<Vec<_>>());
        }
        if by_node.is_empty() {
            return None;
        }
        let mut rules = Rules { by_node, relevant: HashSet::new() };
        let mut memo = HashMap::new();
        for id in 0..layer.node_count() {
            let Ok(id) = NodeId::try_from(id) else { break };
            if rules.mark(layer.at(id), &mut memo, 0) {
                rules.relevant.insert(id);
            }
        }
        Some(Arc::new(rules))
    }

    /// Whether `node` or anything below it has rules.
    fn mark(&self, node: SchemaRef<'_>, memo: &mut HashMap<NodeId, bool>, depth: usize) -> bool {
        let id = node.id();
        if let Some(&m) = memo.get(&id) {
            return m;
        }
        // Cycles cannot occur in a CRD's schema (no $ref); bound the walk anyway.
        if depth > 256 {
            return false;
        }
        memo.insert(id, false);
        let mut any = self.by_node.contains_key(&id);
        let children = node.properties().map(|(_, p)| p).chain(node.additional_properties()).chain(node.items());
        for c in children.collect::<Vec<_>>() {
            any |= self.mark(c, memo, depth + 1);
        }
        memo.insert(id, any);
        any
    }

    /// Evaluates the rules on `obj` (its root at `root`), with `old` on
    /// update, and returns kube's field errors in walk order.
    pub(crate) fn validate(&self, root: SchemaRef<'_>, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut w = Walk { rules: self, budget: RUNTIME_BUDGET, errors: Vec::new(), stopped: false };
        w.node(root, obj, old, old.map(|o| (o, obj)), "", true);
        w.errors
    }
}

/// One object's walk.
struct Walk<'r> {
    rules: &'r Rules,
    /// What is left of [`RUNTIME_BUDGET`].
    budget: u64,
    errors: Vec<FieldError>,
    /// Set once an error ends validation (a cost limit).
    stopped: bool,
}

/// `field.Path.String()` of a path under construction: `<nil>` at the root.
fn shown(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_string()
    }
}

/// kube's `fieldErrorForReason`.
fn reason_error(kind: ErrorType, path: String, ty: &str, detail: String) -> FieldError {
    let value = BadValue::Json(Value::String(ty.to_string()));
    match kind {
        ErrorType::Forbidden => FieldError::forbidden(path, detail),
        ErrorType::Required => FieldError::required(path, detail),
        ErrorType::Duplicate => FieldError { kind, field: path, value, detail: String::new() },
        _ => FieldError { kind: ErrorType::Invalid, field: path, value, detail },
    }
}

/// An interpreter error in cel-go's words where they differ.
fn eval_error_text(msg: &str) -> String {
    if let Some(k) = msg.strip_prefix("No such key: ") {
        return format!("no such key: {k}");
    }
    if msg.starts_with("Division by zero") {
        return "division by zero".into();
    }
    msg.to_string()
}

impl<'r> Walk<'r> {
    /// `v` at `node`, with its correlated old value `old`; `nearest` is the
    /// (old, new) pair of the nearest correlated node at or above this one,
    /// what ratcheting compares.
    fn node(&mut self, node: SchemaRef<'_>, v: &Value, old: Option<&Value>, nearest: Option<(&Value, &Value)>, path: &str, resource_root: bool) {
        if self.stopped || v.is_null() || !self.rules.relevant.contains(&node.id()) {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        let nearest = match old {
            Some(o) => Some((o, v)),
            None => nearest,
        };
        if let Some(rules) = self.rules.by_node.get(&node.id()) {
            self.evaluate(rules, node, v, old, nearest, path, resource_root);
            if self.stopped {
                return;
            }
        }
        match v {
            Value::Object(o) => {
                if let Some(values) = node.additional_properties() {
                    for (k, child) in o {
                        let old_child = old.and_then(|x| x.get(k));
                        self.node(values, child, old_child, nearest, &field::index(path, k), values.embedded_resource());
                    }
                }
                for (k, child) in o {
                    let Some(p) = node.property(k) else { continue };
                    let old_child = old.and_then(|x| x.get(k));
                    self.node(p, child, old_child, nearest, &field::child(path, k), p.embedded_resource());
                }
            }
            Value::Array(items) => {
                let Some(is) = node.items() else { return };
                let keys = node.list_map_keys();
                let old_items = if node.list_type() == Some(ListType::Map) && !keys.is_empty() { old.and_then(Value::as_array) } else { None };
                let index: HashMap<String, &Value> = old_items.map(|a| a.iter().map(|o| (map_key(o, keys), o)).collect()).unwrap_or_default();
                for (i, item) in items.iter().enumerate() {
                    let old_item = if index.is_empty() { None } else { index.get(&map_key(item, keys)).copied() };
                    self.node(is, item, old_item, nearest, &field::index(path, i), is.embedded_resource());
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)] // one node's whole context
    fn evaluate(&mut self, rules: &[Rule], node: SchemaRef<'_>, v: &Value, old: Option<&Value>, nearest: Option<(&Value, &Value)>, path: &str, resource_root: bool) {
        let ty = node.ty().map_or("", |t| t.as_str());
        if self.budget == 0 {
            self.errors.push(reason_error(ErrorType::Invalid, shown(path), ty, "validation failed due to running out of cost budget, no further validation rules will be run".into()));
            self.stopped = true;
            return;
        }
        let this = typed(node, v, resource_root);
        let before = if rules.iter().any(|r| r.uses_old_self) { old.map(|o| typed(node, o, resource_root)) } else { None };
        // Whether this node's part of the object is what it was (ratcheting).
        let mut unchanged: Option<bool> = None;
        for rule in rules {
            let program = match &rule.program {
                Ok(p) => p,
                Err(e) => {
                    self.errors.push(reason_error(ErrorType::Invalid, shown(path), ty, format!("rule compile error: {e}")));
                    continue;
                }
            };
            if rule.uses_old_self && before.is_none() && !rule.optional_old_self {
                continue;
            }
            let mut vars = Activation::new();
            vars.bind("self", this.clone());
            if rule.uses_old_self {
                let old_self = match (&before, rule.optional_old_self) {
                    (Some(b), false) => b.clone(),
                    (b, _) => Cel::Opaque(Arc::new(match b {
                        Some(b) => OptionalValue::of(b.clone()),
                        None => OptionalValue::none(),
                    })),
                };
                vars.bind("oldSelf", old_self);
            }
            let limit = PER_CALL_LIMIT.min(self.budget);
            let mut budget = Budget::new(limit);
            let result = program.eval(&vars, &mut budget);
            let cost = limit - budget.remaining;
            match result {
                Err(EvalError::CostLimit) => {
                    let detail = if limit == PER_CALL_LIMIT {
                        format!("'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}", EvalError::CostLimit, rule.name())
                    } else {
                        "validation failed due to running out of cost budget, no further validation rules will be run".into()
                    };
                    self.errors.push(reason_error(ErrorType::Invalid, shown(path), ty, detail));
                    self.stopped = true;
                    return;
                }
                Err(EvalError::Execution(e)) => {
                    self.budget -= cost;
                    let detail = if e.starts_with("No such overload") {
                        format!("'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}", rule.name())
                    } else {
                        format!("{} evaluating rule: {}", eval_error_text(&e), rule.name())
                    };
                    self.errors.push(reason_error(ErrorType::Invalid, shown(path), ty, detail));
                    continue;
                }
                Ok(Cel::Bool(true)) => {
                    self.budget -= cost;
                    continue;
                }
                Ok(_) => self.budget -= cost,
            }
            if !rule.uses_old_self {
                let same = *unchanged.get_or_insert_with(|| nearest.is_some_and(|(o, n)| o == n));
                if same {
                    continue;
                }
            }
            let at = match &rule.field_path {
                Some(p) => field::child(path, p),
                None => shown(path),
            };
            let detail = match &rule.message_expression {
                Some((src, expr)) => match self.message(src, expr, &vars) {
                    Ok(Some(m)) => m,
                    Ok(None) => rule.default_detail(),
                    Err(stop) => {
                        self.errors.push(reason_error(ErrorType::Invalid, at, ty, stop));
                        self.stopped = true;
                        return;
                    }
                },
                None => rule.default_detail(),
            };
            self.errors.push(reason_error(rule.reason, at, ty, detail));
        }
    }

    /// A messageExpression's message (`evalMessageExpression`): `Ok(None)`
    /// when it fails or gives no usable string (the rule's message is used
    /// instead); `Err` with kube's detail when a cost limit ends
    /// validation.
    fn message(&mut self, src: &str, expr: &Program, vars: &Activation) -> Result<Option<String>, String> {
        let limit = PER_CALL_LIMIT.min(self.budget);
        let mut budget = Budget::new(limit);
        let result = expr.eval(vars, &mut budget);
        let cost = limit - budget.remaining;
        match result {
            Err(EvalError::CostLimit) if limit == PER_CALL_LIMIT => Err(format!("no further validation rules will be run due to call cost exceeds limit for messageExpression: {}", go_quote(src))),
            Err(EvalError::CostLimit) => Err("messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into()),
            Err(EvalError::Execution(_)) => {
                self.budget -= cost;
                Ok(None)
            }
            Ok(v) => {
                self.budget -= cost;
                let Cel::String(s) = v else { return Ok(None) };
                let m = s.trim();
                Ok((!m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n')).then(|| m.to_string()))
            }
        }
    }
}

/// An item's identity in a map list: its key fields' values.
fn map_key(item: &Value, keys: &[String]) -> String {
    let vals: Vec<&Value> = keys.iter().map(|k| item.get(k).unwrap_or(&Value::Null)).collect();
    serde_json::to_string(&vals).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::schema::compile_crd;

    /// `schema`'s rules on `obj` (and `old`), rendered as kube prints them.
    fn run(schema: serde_json::Value, obj: serde_json::Value, old: Option<serde_json::Value>) -> Vec<String> {
        let s = compile_crd("g.example.com", "v1", "K", &schema);
        let Some(rules) = s.rules.clone() else { return Vec::new() };
        rules.validate(s.root(), &obj, old.as_ref()).iter().map(ToString::to_string).collect()
    }

    fn spec(props: serde_json::Value, rules: serde_json::Value) -> serde_json::Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props, "x-kubernetes-validations": rules}}})
    }

    #[test]
    fn failing_rules_give_kube_errors() {
        let props = json!({"replicas": {"type": "integer"}, "name": {"type": "string"}});
        let cases: &[(serde_json::Value, &str)] = &[
            (json!([{"rule": "self.replicas <= 8", "message": "replicas must be <= 8"}]), r#"spec: Invalid value: "object": replicas must be <= 8"#),
            (json!([{"rule": "self.replicas <= 8"}]), r#"spec: Invalid value: "object": failed rule: self.replicas <= 8"#),
            (json!([{"rule": "self.replicas <= 8", "reason": "FieldValueForbidden", "message": "too many"}]), "spec: Forbidden: too many"),
            (json!([{"rule": "self.replicas <= 8", "reason": "FieldValueRequired", "message": "too many"}]), "spec: Required value: too many"),
            (json!([{"rule": "self.replicas <= 8", "reason": "FieldValueDuplicate", "message": "too many"}]), r#"spec: Duplicate value: "object""#),
            (json!([{"rule": "self.replicas <= 8", "fieldPath": ".replicas", "message": "too many"}]), r#"spec.replicas: Invalid value: "object": too many"#),
            (json!([{"rule": "self.replicas <= 8", "messageExpression": "'replicas is ' + string(self.replicas) + ', at most 8'"}]), r#"spec: Invalid value: "object": replicas is 9, at most 8"#),
            // A messageExpression that fails, or gives an empty string, falls back.
            (json!([{"rule": "self.replicas <= 8", "message": "m", "messageExpression": "self.nope"}]), r#"spec: Invalid value: "object": m"#),
            (json!([{"rule": "self.replicas <= 8", "messageExpression": "'  '"}]), r#"spec: Invalid value: "object": failed rule: self.replicas <= 8"#),
            (json!([{"rule": "self.missing > 0", "message": "m"}]), r#"spec: Invalid value: "object": no such key: missing evaluating rule: m"#),
        ];
        for (rules, want) in cases {
            let got = run(spec(props.clone(), rules.clone()), json!({"spec": {"replicas": 9, "name": "a"}}), None);
            assert_eq!(got, vec![want.to_string()], "{rules}");
        }
    }

    #[test]
    fn root_rules_are_at_nil_and_see_name_but_not_labels() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('ok-')", "message": "bad name"},
            {"rule": "!has(self.metadata.labels)", "message": "labels are not visible"}
        ]});
        let obj = json!({"apiVersion": "g.example.com/v1", "kind": "K", "metadata": {"name": "x", "labels": {"a": "b"}}});
        assert_eq!(run(schema.clone(), obj, None), [r#"<nil>: Invalid value: "object": bad name"#]);
        assert!(run(schema, json!({"metadata": {"name": "ok-1"}}), None).is_empty());
    }

    #[test]
    fn transition_rules_run_on_update_only() {
        let rules = json!([
            {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
            {"rule": "self.replicas >= oldSelf.replicas", "messageExpression": "'replicas may not drop from ' + string(oldSelf.replicas)"}
        ]);
        let schema = spec(json!({"replicas": {"type": "integer"}, "name": {"type": "string"}}), rules);
        let old = json!({"spec": {"replicas": 3, "name": "a"}});
        assert!(run(schema.clone(), json!({"spec": {"replicas": 1, "name": "b"}}), None).is_empty(), "no old object on create");
        assert_eq!(
            run(schema.clone(), json!({"spec": {"replicas": 1, "name": "b"}}), Some(old.clone())),
            [r#"spec: Invalid value: "object": name is immutable"#, r#"spec: Invalid value: "object": replicas may not drop from 3"#]
        );
        assert!(run(schema.clone(), json!({"spec": {"replicas": 4, "name": "a"}}), Some(old)).is_empty());
        // No old value at the node (spec added by this update): not run.
        assert!(run(schema, json!({"spec": {"replicas": 1, "name": "b"}}), Some(json!({}))).is_empty());
    }

    #[test]
    fn optional_old_self_runs_on_create_with_an_optional() {
        let rules = json!([{"rule": "!oldSelf.hasValue() || self.name == oldSelf.value().name", "optionalOldSelf": true, "message": "immutable"},
                           {"rule": "oldSelf.hasValue() || self.name != 'forbidden'", "optionalOldSelf": true, "message": "not on create"}]);
        let schema = spec(json!({"name": {"type": "string"}}), rules);
        assert_eq!(run(schema.clone(), json!({"spec": {"name": "forbidden"}}), None), [r#"spec: Invalid value: "object": not on create"#]);
        assert_eq!(run(schema.clone(), json!({"spec": {"name": "b"}}), Some(json!({"spec": {"name": "a"}}))), [r#"spec: Invalid value: "object": immutable"#]);
        assert!(run(schema, json!({"spec": {"name": "a"}}), Some(json!({"spec": {"name": "a"}}))).is_empty());
    }

    #[test]
    fn map_lists_correlate_by_key_and_other_lists_not_at_all() {
        let item = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                          "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]});
        let schema = json!({"type": "object", "properties": {"ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": item}}});
        let old = json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]});
        // Reordered and one new item: only a changed port of a known key fails.
        let new = json!({"ports": [{"name": "b", "port": 2}, {"name": "c", "port": 9}, {"name": "a", "port": 5}]});
        assert_eq!(run(schema, new, Some(old)), [r#"ports[2]: Invalid value: "object": port is immutable"#]);
    }

    #[test]
    fn unchanged_values_are_ratcheted_but_transition_rules_are_not() {
        let rules = json!([{"rule": "self.replicas <= 8", "message": "too many"}, {"rule": "self.replicas < oldSelf.replicas", "message": "must drop"}]);
        let schema = spec(json!({"replicas": {"type": "integer"}, "other": {"type": "string"}}), rules);
        let old = json!({"spec": {"replicas": 9}, "x": 1});
        // spec is unchanged: the first rule is ratcheted, the transition rule is not.
        assert_eq!(run(schema.clone(), old.clone(), Some(old.clone())), [r#"spec: Invalid value: "object": must drop"#]);
        let changed = json!({"spec": {"replicas": 9, "other": "y"}});
        assert_eq!(run(schema, changed, Some(old)), [r#"spec: Invalid value: "object": too many"#, r#"spec: Invalid value: "object": must drop"#]);
    }

    #[test]
    fn the_cost_limit_stops_validation() {
        let rules = json!([{"rule": "self.all(x, self.all(y, self.all(z, x + y + z >= 0)))"}, {"rule": "false", "message": "not reached"}]);
        let schema = json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}, "x-kubernetes-validations": rules}}});
        let big: Vec<i64> = (0..120).collect();
        let got = run(schema, json!({"l": big}), None);
        assert_eq!(
            got,
            [
                r#"l: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, self.all(z, x + y + z >= 0)))"#
            ]
        );
    }

    #[test]
    fn formatted_strings_are_timestamps_durations_and_quantities_parse() {
        let props = json!({"start": {"type": "string", "format": "date-time"}, "timeout": {"type": "string", "format": "duration"},
                           "memory": {"x-kubernetes-int-or-string": true}});
        let rules = json!([
            {"rule": "self.start < timestamp('2030-01-01T00:00:00Z')", "message": "starts too late"},
            {"rule": "self.timeout <= duration('1h')", "message": "timeout too long"},
            {"rule": "quantity(string(self.memory)).isLessThan(quantity('4Gi'))", "message": "too much memory"}
        ]);
        let schema = spec(props, rules);
        assert!(run(schema.clone(), json!({"spec": {"start": "2026-12-04T08:00:00Z", "timeout": "30m", "memory": "2Gi"}}), None).is_empty());
        assert_eq!(
            run(schema, json!({"spec": {"start": "2031-01-01T00:00:00Z", "timeout": "1h30m", "memory": "8Gi"}}), None),
            [r#"spec: Invalid value: "object": starts too late"#, r#"spec: Invalid value: "object": timeout too long"#, r#"spec: Invalid value: "object": too much memory"#]
        );
    }

    #[test]
    fn schemas_without_rules_compile_none() {
        let s = compile_crd("g.example.com", "v1", "K", &json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
        assert!(s.rules.is_none());
    }
}
