//! The checks of a CRD's `x-kubernetes-validations` rules when the CRD is
//! written (kube's `ValidateCustomResourceDefinitionOpenAPISchema`, its CEL
//! part), run once the schema is otherwise valid:
//!
//! - every `rule` and `messageExpression` compiles:
//!   `...x-kubernetes-validations[0].rule: Invalid value:
//!   apiextensions.ValidationRule{Rule:"self.replicas <=", ...}: compilation
//!   failed: ERROR: <input>:1:17: Syntax error: ...`;
//! - a rule names no variable but `self` and `oldSelf` (and those its
//!   macros bind): `undeclared reference to 'x' (in container '')`;
//! - a field selected from `self` or `oldSelf` (through a chain of
//!   selections) is declared by the schema: `undefined field 'replica'`.
//!   At a resource's root, `apiVersion`, `kind` and `metadata` are
//!   declared, `metadata` with only `name` and `generateName`;
//! - a rule that uses `oldSelf` is not inside the items of a list that is
//!   not `x-kubernetes-list-type: map` (`oldSelf cannot be used on the
//!   uncorrelatable portion of the schema within <path>`);
//! - `optionalOldSelf` is set only on rules that use `oldSelf`.
//!
//! What kube's CEL type checker does beyond this is not done: types of
//! expressions (`self.replicas == 'a'`, a rule that is not a bool),
//! function overloads, fields reached through indexing, comprehension
//! variables or function results, and the estimated cost limits (per rule
//! and per CRD). Those rules are accepted and fail, if at all, when they
//! run. Positions in messages are found in the rule's text (the first
//! occurrence of the name), where cel-go takes them from its parse.

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

use super::cel_values::escape;
use super::field::{BadValue, FieldError};
use crate::cel::Program;
use crate::errors::go_quote;

/// Checks every rule of `schema` (a CRD version's `openAPIV3Schema`, found
/// at `path`) and returns kube's field errors, children's before their
/// parent's, properties in name order.
pub(crate) fn check(path: &str, schema: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    walk(schema, path, None, true, &mut out, 0);
    out
}

fn walk(s: &Value, p: &str, uncorrelatable: Option<&str>, resource_root: bool, out: &mut Vec<FieldError>, depth: usize) {
    let Some(m) = s.as_object() else { return };
    if depth > 128 {
        return;
    }
    if let Some(ap) = m.get("additionalProperties").filter(|a| a.is_object()) {
        walk(ap, &format!("{p}.additionalProperties"), uncorrelatable, embedded(ap), out, depth + 1);
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut names: Vec<&String> = props.keys().collect();
        names.sort();
        for k in names {
            let c = &props[k];
            walk(c, &format!("{p}.properties[{k}]"), uncorrelatable, embedded(c), out, depth + 1);
        }
    }
    if let Some(items) = m.get("items").filter(|i| i.is_object()) {
        let own;
        let unc = match uncorrelatable {
            Some(u) => Some(u),
            None if m.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") => {
                own = p.to_string();
                Some(own.as_str())
            }
            None => None,
        };
        walk(items, &format!("{p}.items"), unc, embedded(items), out, depth + 1);
    }
    let rules = m.get("x-kubernetes-validations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{p}.x-kubernetes-validations[{i}]");
        check_rule(rule, s, resource_root, &at, uncorrelatable, out);
    }
}

fn embedded(s: &Value) -> bool {
    s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true))
}

fn check_rule(rule: &Value, node: &Value, resource_root: bool, at: &str, uncorrelatable: Option<&str>, out: &mut Vec<FieldError>) {
    let str_of = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or("");
    let source = str_of("rule");
    let optional = rule.get("optionalOldSelf").and_then(Value::as_bool);
    let struct_value = || BadValue::Go(go_rule(rule));
    let mut uses_old_self = false;
    match Program::compile(source) {
        Err(e) => out.push(FieldError { value: struct_value(), ..FieldError::invalid(format!("{at}.rule"), Value::Null, cel_go_text(&e.to_string())) }),
        Ok(p) => {
            uses_old_self = p.references_variable("oldSelf");
            let problems = analyze(source, node, resource_root, optional == Some(true));
            if !problems.is_empty() {
                out.push(FieldError { value: struct_value(), ..FieldError::invalid(format!("{at}.rule"), Value::Null, format!("compilation failed: {problems}")) });
            }
        }
    }
    let expr = str_of("messageExpression");
    if !expr.trim().is_empty() {
        let detail = match Program::compile(expr) {
            Err(e) => Some(cel_go_text(&e.to_string()).replacen("compilation failed: ", "", 1)),
            Ok(_) => Some(analyze(expr, node, resource_root, optional == Some(true))).filter(|p| !p.is_empty()),
        };
        if let Some(d) = detail {
            out.push(FieldError { value: struct_value(), ..FieldError::invalid(format!("{at}.messageExpression"), Value::Null, format!("messageExpression compilation failed: {d}")) });
        }
    }
    if uses_old_self {
        if let Some(u) = uncorrelatable {
            out.push(FieldError::invalid(format!("{at}.rule"), Value::String(source.to_string()), format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {u}")));
        }
    } else if let Some(b) = optional {
        out.push(FieldError::invalid(format!("{at}.optionalOldSelf"), Value::Bool(b), "may not be set if oldSelf is not used in rule"));
    }
}

/// The parser's error in cel-go's layout (`\n | line\n | ....^`).
fn cel_go_text(s: &str) -> String {
    s.replace("\n| ", "\n | ")
}

/// A rule as Go's `%#v` prints kube's internal `ValidationRule`. Pointers
/// (a set `reason` or `optionalOldSelf`) print an address in Go; a fixed
/// one is printed here.
fn go_rule(rule: &Value) -> String {
    let s = |k: &str| go_quote(rule.get(k).and_then(Value::as_str).unwrap_or(""));
    let ptr = |k: &str, ty: &str| if rule.get(k).is_some_and(|v| !v.is_null()) { format!("({ty})(0xc000010000)") } else { format!("({ty})(nil)") };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        ptr("reason", "*apiextensions.FieldValueErrorReason"),
        s("fieldPath"),
        ptr("optionalOldSelf", "*bool")
    )
}

/// A problem the checks found, and the name to point at in the source.
#[derive(Debug, PartialEq)]
enum Problem {
    Undeclared(String),
    UndefinedField(String),
}

/// The schema type of an expression, as far as the checks follow it.
#[derive(Clone, Copy)]
enum Ty<'a> {
    /// A schema node; `true` at a resource root (or embedded resource).
    Node(&'a Value, bool),
    /// A resource's `metadata`: `name` and `generateName`.
    Meta,
    /// Anything.
    Dyn,
}

/// Identifiers CEL declares: type names, usable as values.
const DECLARED: &[&str] = &["self", "oldSelf", "int", "uint", "double", "bool", "string", "bytes", "list", "map", "type", "null_type", "dyn", "duration", "timestamp"];

struct Analysis<'a> {
    node: &'a Value,
    resource_root: bool,
    optional_old_self: bool,
    problems: Vec<Problem>,
}

/// Scope and field checks of `source` at schema `node`: kube's
/// compilation error text after `compilation failed: `, or empty.
fn analyze(source: &str, node: &Value, resource_root: bool, optional_old_self: bool) -> String {
    let Ok(ast) = kube_cel::cel::parser::Parser::new().parse(source) else { return String::new() };
    let mut a = Analysis { node, resource_root, optional_old_self, problems: Vec::new() };
    a.expr(&ast, &mut Vec::new());
    let mut found: Vec<(usize, String)> = a
        .problems
        .iter()
        .map(|p| match p {
            Problem::Undeclared(n) => (find_ident(source, n), format!("undeclared reference to '{n}' (in container '')")),
            Problem::UndefinedField(f) => (find_field(source, f), format!("undefined field '{f}'")),
        })
        .collect();
    found.sort();
    found.dedup();
    found.iter().map(|(at, msg)| located(source, *at, msg)).collect::<Vec<_>>().join("\n")
}

impl<'a> Analysis<'a> {
    fn expr(&mut self, e: &IdedExpr, bound: &mut Vec<String>) {
        match &e.expr {
            Expr::Ident(name) => {
                if !bound.iter().any(|b| b == name) && !DECLARED.contains(&name.as_str()) && !name.starts_with('@') {
                    self.problems.push(Problem::Undeclared(name.clone()));
                }
            }
            Expr::Select(s) => {
                if let Err(p) = self.ty(&s.operand, bound).and_then(|t| field_ty(t, &s.field)) {
                    self.problems.push(p);
                }
                self.expr(&s.operand, bound);
            }
            Expr::Call(c) => {
                // A receiver that is a bare name may be a namespace of
                // functions (`math.greatest`, `optional.none`).
                if let Some(t) = &c.target {
                    if !matches!(t.expr, Expr::Ident(_)) {
                        self.expr(t, bound);
                    }
                }
                for a in &c.args {
                    self.expr(a, bound);
                }
            }
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range, bound);
                let n = bound.len();
                bound.push(c.iter_var.clone());
                if let Some(v2) = &c.iter_var2 {
                    bound.push(v2.clone());
                }
                bound.push(c.accu_var.clone());
                for x in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                    self.expr(x, bound);
                }
                bound.truncate(n);
            }
            Expr::List(l) => l.elements.iter().for_each(|x| self.expr(x, bound)),
            Expr::Map(m) => self.entries(&m.entries, bound),
            Expr::Struct(s) => self.entries(&s.entries, bound),
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entries(&mut self, es: &[kube_cel::cel::common::ast::IdedEntryExpr], bound: &mut Vec<String>) {
        for e in es {
            match &e.expr {
                EntryExpr::StructField(f) => self.expr(&f.value, bound),
                EntryExpr::MapEntry(m) => {
                    self.expr(&m.key, bound);
                    self.expr(&m.value, bound);
                }
            }
        }
    }

    /// The type of `e` when it is `self`, `oldSelf` or a chain of field
    /// selections from them; `Dyn` otherwise. `Err` for an undefined field
    /// on the way (reported where that selection is visited).
    fn ty(&self, e: &IdedExpr, bound: &[String]) -> Result<Ty<'a>, Problem> {
        match &e.expr {
            Expr::Ident(n) if bound.iter().any(|b| b == n) => Ok(Ty::Dyn),
            Expr::Ident(n) if n == "self" || (n == "oldSelf" && !self.optional_old_self) => Ok(Ty::Node(self.node, self.resource_root)),
            Expr::Select(s) if !s.test => match self.ty(&s.operand, bound) {
                Ok(t) => field_ty(t, &s.field).or(Ok(Ty::Dyn)),
                Err(_) => Ok(Ty::Dyn),
            },
            _ => Ok(Ty::Dyn),
        }
    }
}

/// The type of field `f` of a value of type `t`, or the undefined-field
/// problem.
fn field_ty<'a>(t: Ty<'a>, f: &str) -> Result<Ty<'a>, Problem> {
    let undefined = || Problem::UndefinedField(f.to_string());
    let (s, root) = match t {
        Ty::Dyn => return Ok(Ty::Dyn),
        Ty::Meta => return if f == "name" || f == "generateName" { Ok(Ty::Dyn) } else { Err(undefined()) },
        Ty::Node(s, root) => (s, root),
    };
    let flag = |k: &str| s.get(k) == Some(&Value::Bool(true));
    if flag("x-kubernetes-int-or-string") {
        return Ok(Ty::Dyn);
    }
    match s.get("additionalProperties") {
        Some(ap @ Value::Object(_)) => return Ok(Ty::Node(ap, embedded(ap))),
        Some(Value::Bool(true)) => return Ok(Ty::Dyn),
        _ => {}
    }
    if root || embedded(s) {
        match f {
            "apiVersion" | "kind" => return Ok(Ty::Dyn),
            "metadata" => return Ok(Ty::Meta),
            _ => {}
        }
    }
    let props = match s.get("properties").and_then(Value::as_object) {
        Some(p) if !p.is_empty() && s.get("type").and_then(Value::as_str) == Some("object") => p,
        // Not an object with declared fields: nothing to hold it to.
        _ => return Ok(Ty::Dyn),
    };
    if let Some((_, p)) = props.iter().find(|(k, _)| escape(k).as_deref() == Some(f)) {
        return Ok(Ty::Node(p, embedded(p)));
    }
    if flag("x-kubernetes-preserve-unknown-fields") {
        return Ok(Ty::Dyn);
    }
    Err(undefined())
}

/// Byte offsets of `source` outside string literals.
fn code_positions(source: &str) -> Vec<bool> {
    let b = source.as_bytes();
    let mut code = vec![true; b.len()];
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        match quote {
            Some(q) => {
                code[i] = false;
                if b[i] == b'\\' {
                    if let Some(c) = code.get_mut(i + 1) {
                        *c = false;
                    }
                    i += 1;
                } else if b[i] == q {
                    quote = None;
                }
            }
            None if b[i] == b'\'' || b[i] == b'"' => {
                quote = Some(b[i]);
                code[i] = false;
            }
            None => {}
        }
        i += 1;
    }
    code
}

fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Offsets of whole-word, out-of-string occurrences of `word`.
fn occurrences<'s>(source: &'s str, word: &'s str) -> impl Iterator<Item = usize> + 's {
    let code = code_positions(source);
    let b = source.as_bytes();
    source.match_indices(word).map(|(i, _)| i).filter(move |&i| {
        let end = i + word.len();
        code.get(i).copied().unwrap_or(false) && (i == 0 || !is_ident_byte(b[i - 1])) && (end >= b.len() || !is_ident_byte(b[end]))
    })
}

/// Where an undeclared name is first used (not as a field).
fn find_ident(source: &str, name: &str) -> usize {
    let b = source.as_bytes();
    occurrences(source, name).find(|&i| !source[..i].trim_end().ends_with('.') || i == 0).or_else(|| occurrences(source, name).next()).unwrap_or(0).min(b.len())
}

/// Where a field is first selected (`.name`): the name's offset.
fn find_field(source: &str, name: &str) -> usize {
    occurrences(source, name).find(|&i| source[..i].trim_end().ends_with('.')).unwrap_or(0)
}

/// cel-go's error layout: `ERROR: <input>:LINE:COL: msg`, the line, and a
/// caret under the column.
fn located(source: &str, at: usize, msg: &str) -> String {
    let at = at.min(source.len());
    let before = &source[..at];
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..at].chars().count();
    let line = source[line_start..].lines().next().unwrap_or("");
    format!("ERROR: <input>:{line_no}:{}: {msg}\n | {line}\n | {}^", col + 1, ".".repeat(col))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const P: &str = "spec.validation.openAPIV3Schema";

    fn rendered(schema: serde_json::Value) -> Vec<String> {
        check(P, &schema).iter().map(ToString::to_string).collect()
    }

    fn spec_rule(rule: serde_json::Value) -> serde_json::Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "model": {"type": "object", "properties": {"name": {"type": "string"}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}, "foo-bar": {"type": "string"}
        }, "x-kubernetes-validations": [rule]}}})
    }

    #[test]
    fn good_rules_pass() {
        for rule in [
            "self.replicas <= 8",
            "self.model.name == oldSelf.model.name",
            "has(self.model) && self.labels.all(k, k.size() < 10 && self.labels[k] != '')",
            "self.labels.anything == 'x'",
            "self.foo__dash__bar.startsWith('a')",
            "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
            "[1, 2].exists(x, x == self.replicas) || math.greatest([1, 2]) == 2",
            "type(self.replicas) == int",
        ] {
            assert_eq!(rendered(spec_rule(json!({"rule": rule}))), Vec::<String>::new(), "{rule}");
        }
    }

    #[test]
    fn bad_rules_are_refused_with_kube_messages() {
        let s = r#"apiextensions.ValidationRule{Rule:"RULE", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}"#;
        let at = format!("{P}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ");
        let cases = [
            ("self.replica <= 8", "compilation failed: ERROR: <input>:1:6: undefined field 'replica'\n | self.replica <= 8\n | .....^"),
            ("self.model.nam == 'a'", "compilation failed: ERROR: <input>:1:12: undefined field 'nam'\n | self.model.nam == 'a'\n | ...........^"),
            ("other.x > 1", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'other' (in container '')\n | other.x > 1\n | ^"),
        ];
        for (rule, detail) in cases {
            let got = rendered(spec_rule(json!({"rule": rule})));
            assert_eq!(got, vec![format!("{at}{}: {detail}", s.replace("RULE", rule))], "{rule}");
        }
        let syntax = rendered(spec_rule(json!({"rule": "self.replicas <="})));
        assert_eq!(syntax.len(), 1);
        assert!(syntax[0].starts_with(&format!("{at}{}: compilation failed: ERROR: <input>:1:", s.replace("RULE", "self.replicas <="))), "{syntax:?}");
        assert!(syntax[0].contains("\n | self.replicas <=\n | "), "{syntax:?}");
    }

    #[test]
    fn message_expressions_compile() {
        let got = rendered(spec_rule(json!({"rule": "self.replicas <= 8", "messageExpression": "'x' +"})));
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with(&format!("{P}.properties[spec].x-kubernetes-validations[0].messageExpression: Invalid value: apiextensions.ValidationRule{{")), "{got:?}");
        assert!(got[0].contains(": messageExpression compilation failed: ERROR: <input>:1:"), "{got:?}");
    }

    #[test]
    fn metadata_has_only_name_and_generate_name() {
        let schema = |rule: &str| json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]});
        assert!(rendered(schema("self.metadata.name.startsWith('a') && self.kind == 'K'")).is_empty());
        let got = rendered(schema("has(self.metadata.labels)"));
        assert_eq!(got.len(), 1);
        assert!(got[0].ends_with("undefined field 'labels'\n | has(self.metadata.labels)\n | ..................^"), "{got:?}");
    }

    #[test]
    fn old_self_rules_need_a_correlatable_place() {
        let item = |rule: serde_json::Value| json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}, "x-kubernetes-validations": [rule]}}}});
        assert_eq!(
            rendered(item(json!({"rule": "self.a == oldSelf.a"}))),
            [format!(
                r#"{P}.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: "self.a == oldSelf.a": oldSelf cannot be used on the uncorrelatable portion of the schema within {P}.properties[l]"#
            )]
        );
        assert_eq!(
            rendered(spec_rule(json!({"rule": "self.replicas > 0", "optionalOldSelf": true}))),
            [format!("{P}.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule")]
        );
        let map_list = json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
            "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}, "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}}}});
        assert!(rendered(map_list).is_empty());
    }
}
