//! CEL, the expression language of admission policies, webhook match
//! conditions and CRD `x-kubernetes-validations` rules.
//!
//! Parsing and evaluation are the `cel` crate's; the Kubernetes libraries
//! (strings, lists, sets, regex, url, ip/cidr, quantity, semver, format,
//! math, encoders) are `kube-cel`'s. This module adds what Kubernetes asks
//! of an evaluation on top of them:
//!
//! - **Object construction.** `Object{spec: Object.spec{replicas: 1}}` (the
//!   apply configurations of MutatingAdmissionPolicy) and
//!   `JSONPatch{op: "add", path: "/x", value: 1}` are typed object literals.
//!   Kubernetes' objects are maps of field names, so [`Program::compile`]
//!   rewrites each such literal into the map `{"spec": {"replicas": 1}}`
//!   before evaluation; the type names are kept only as a check that they
//!   are ones Kubernetes defines.
//! - **Runtime cost.** Every function call and every step of a
//!   comprehension (`all`, `exists`, `map`, `filter`) costs one unit, plus
//!   a tenth of a unit per byte or element of a string, bytes, list or map
//!   it produces; an evaluation stops with [`EvalError::CostLimit`] when
//!   its [`Budget`] runs out. This follows kube's runtime cost in the main
//!   (calls, iterations and sizes of what is built), not charge by charge.
//! - **Values.** [`to_cel`] and [`to_json`] map JSON objects to CEL values
//!   and back: JSON numbers that are integers become `int`, as Kubernetes'
//!   int64 fields are.
//!
//! Compiled programs are immutable and shared ([`Program`] is cheap to
//! clone); the caches that keep them per policy generation or per CRD
//! schema live with their users.

pub mod authorizer;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::common::ast::{CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr};

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, Value};
use kube_cel::KubeCelExt;

/// kube's per-expression runtime cost limit for admission policies and
/// CRD rules (`PerCallLimit`, 1,000,000).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// kube's runtime cost budget for all the CRD validation rules of one
/// object (`RuntimeCELCostBudget`, 10,000,000).
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// The name of the identity function that counts cost; it cannot clash
/// with a CEL identifier a user writes because `@` is not valid in one.
const COST: &str = "@cost";

/// A parsed, rewritten CEL expression, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Program {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    source: String,
    ast: IdedExpr,
}

/// Why an expression does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A syntax error, in the parser's words.
    #[error("compilation failed: {0}")]
    Syntax(String),
    /// An object literal of a type that is not an object of the request
    /// (`Object`, `Object.<field>…`) or `JSONPatch`.
    #[error("compilation failed: undeclared reference to '{0}'")]
    UnknownType(String),
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The budget ran out (kube: `operation cancelled: actual cost limit
    /// exceeded`).
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimit,
    /// Any other evaluation error (no such key, bad argument, …), in the
    /// interpreter's words.
    #[error("{0}")]
    Execution(String),
}

impl From<ExecutionError> for EvalError {
    fn from(e: ExecutionError) -> Self {
        match &e {
            ExecutionError::FunctionError { function, .. } if function == COST => EvalError::CostLimit,
            _ => EvalError::Execution(e.to_string()),
        }
    }
}

/// How much an evaluation (or a series of them) may still cost, in kube's
/// cost units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Units left.
    pub remaining: u64,
}

impl Budget {
    /// A budget of `limit` units.
    pub fn new(limit: u64) -> Self {
        Budget { remaining: limit }
    }
}

thread_local! {
    /// The units left for the evaluation running on this thread.
    static REMAINING: Cell<u64> = const { Cell::new(0) };
    /// A context holding the standard, Kubernetes and server functions,
    /// built once per thread; each evaluation adds its variables in a child
    /// scope of it.
    static BASE: Context<'static> = base_context();
}

/// The functions every evaluation sees.
fn base_context() -> Context<'static> {
    let mut ctx = Context::default();
    ctx.register_all();
    ctx.add_function(COST, |kube_cel::cel::extractors::Arguments(args): kube_cel::cel::extractors::Arguments| -> Result<Value, ExecutionError> {
        let result = args.first().cloned().unwrap_or(Value::Null);
        let cost = 1 + size_cost(&result);
        let left = REMAINING.with(Cell::get);
        if left < cost {
            REMAINING.with(|r| r.set(0));
            return Err(ExecutionError::function_error(COST, "cost limit"));
        }
        REMAINING.with(|r| r.set(left - cost));
        Ok(result)
    });
    for register in EXTRA_LIBRARIES {
        register(&mut ctx);
    }
    ctx
}

/// What a call's result adds to its cost: kube charges string, bytes and
/// list results by size (a tenth of a unit per byte or element, rounded
/// up), so that building a large value costs what it weighs.
fn size_cost(v: &Value) -> u64 {
    let size = match v {
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        _ => 0,
    };
    (size as u64).div_ceil(10)
}

/// Libraries of this server registered into every context (the
/// `authorizer` of admission policies, for one).
const EXTRA_LIBRARIES: &[fn(&mut Context<'static>)] = &[authorizer::register];

impl Program {
    /// Parses `source` and prepares it for evaluation.
    ///
    /// # Errors
    /// [`CompileError::Syntax`] for a parse error; [`CompileError::UnknownType`]
    /// for an object literal of a type other than `Object…` or `JSONPatch`.
    pub fn compile(source: &str) -> Result<Program, CompileError> {
        let parsed = kube_cel::cel::parser::Parser::default().parse(source).map_err(|e| CompileError::Syntax(e.to_string()))?;
        let mut next_id = max_id(&parsed) + 1;
        let ast = rewrite(parsed, &mut next_id)?;
        Ok(Program { inner: Arc::new(Inner { source: source.to_string(), ast }) })
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Whether the expression names the variable `name` (`oldSelf`,
    /// `params`, `authorizer`).
    pub fn references_variable(&self, name: &str) -> bool {
        self.inner.ast.references().has_variable(name)
    }

    /// Evaluates with the variables `vars`, charging `budget`.
    ///
    /// # Errors
    /// [`EvalError::CostLimit`] when the budget runs out;
    /// [`EvalError::Execution`] for any other failure.
    pub fn eval(&self, vars: &Activation, budget: &mut Budget) -> Result<Value, EvalError> {
        BASE.with(|base| {
            let mut ctx = base.new_inner_scope();
            for (name, value) in &vars.vars {
                ctx.add_variable_from_value(name.as_str(), value.clone());
            }
            REMAINING.with(|r| r.set(budget.remaining));
            // The interpreter has a few unfinished paths that panic; a
            // panic is an evaluation error here, never a crashed request.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Value::resolve(&self.inner.ast, &ctx)))
                .unwrap_or_else(|_| Err(ExecutionError::function_error("eval", "the CEL interpreter failed on this expression")));
            budget.remaining = REMAINING.with(Cell::get);
            if budget.remaining == 0 && result.is_err() {
                return Err(EvalError::CostLimit);
            }
            result.map_err(EvalError::from)
        })
    }

    /// Evaluates to a bool, as validations and match conditions must.
    ///
    /// # Errors
    /// As [`Program::eval`], and [`EvalError::Execution`] when the result is
    /// not a bool.
    pub fn eval_bool(&self, vars: &Activation, budget: &mut Budget) -> Result<bool, EvalError> {
        match self.eval(vars, budget)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::Execution(format!("expected a bool, got {}", type_name(&other)))),
        }
    }
}

/// The CEL type name of a value, for messages (`int`, `string`, `map`).
pub fn type_name(v: &Value) -> String {
    v.type_of().to_string()
}

/// The variables of one evaluation.
#[derive(Debug, Clone, Default)]
pub struct Activation {
    vars: Vec<(String, Value)>,
}

impl Activation {
    /// An empty activation.
    pub fn new() -> Self {
        Activation::default()
    }

    /// Binds `name` to a JSON value (converted by [`to_cel`]).
    pub fn bind_json(&mut self, name: &str, value: &serde_json::Value) -> &mut Self {
        self.bind(name, to_cel(value))
    }

    /// Binds `name` to a CEL value.
    pub fn bind(&mut self, name: &str, value: Value) -> &mut Self {
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name.to_string(), value)),
        }
        self
    }

    /// The value bound to `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// A JSON value as CEL sees it: objects are maps with string keys, arrays
/// lists, integers `int` (`uint` above i64's range), other numbers
/// `double`, and `null` null.
pub fn to_cel(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(a) => Value::List(Arc::new(a.iter().map(to_cel).collect())),
        serde_json::Value::Object(o) => {
            let map: HashMap<Key, Value> = o.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v))).collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// A CEL value as JSON: the inverse of [`to_cel`]; durations and
/// timestamps become their Kubernetes string forms, bytes base64.
///
/// # Errors
/// A message for values JSON cannot hold (functions, opaque values,
/// non-string map keys other than ints and bools, NaN).
pub fn to_json(v: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map(J::Number).ok_or_else(|| format!("{f} is not a JSON number"))?,
        Value::String(s) => J::String(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine as _;
            J::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        Value::List(l) => J::Array(l.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            J::Object(out)
        }
        Value::Duration(d) => J::String(format!("{}s", d.num_milliseconds() as f64 / 1000.0)),
        Value::Timestamp(t) => J::String(t.naive_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        Value::Function(name, _) => return Err(format!("function {name} is not a JSON value")),
        Value::Opaque(o) => return Err(format!("{} is not a JSON value", o.runtime_type_name())),
    })
}

/// The largest node id of `e`, so that rewritten nodes get fresh ones.
fn max_id(e: &IdedExpr) -> u64 {
    let mut max = e.id;
    let mut visit = |c: &IdedExpr| max = max.max(max_id(c));
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                visit(t);
            }
            c.args.iter().for_each(&mut visit);
        }
        Expr::Comprehension(c) => {
            for x in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                visit(x);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(&mut visit),
        Expr::Map(m) => entries(&m.entries, &mut visit),
        Expr::Struct(s) => entries(&s.entries, &mut visit),
        Expr::Select(s) => visit(&s.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
    max
}

fn entries(es: &[IdedEntryExpr], visit: &mut impl FnMut(&IdedExpr)) {
    for e in es {
        match &e.expr {
            EntryExpr::StructField(f) => visit(&f.value),
            EntryExpr::MapEntry(m) => {
                visit(&m.key);
                visit(&m.value);
            }
        }
    }
}

/// Rewrites object literals into maps and wraps every call and every
/// comprehension step in the cost counter.
fn rewrite(e: IdedExpr, next_id: &mut u64) -> Result<IdedExpr, CompileError> {
    let id = e.id;
    let expr = match e.expr {
        Expr::Call(mut c) => {
            c.target = match c.target {
                Some(t) => Some(Box::new(rewrite(*t, next_id)?)),
                None => None,
            };
            c.args = c.args.into_iter().map(|a| rewrite(a, next_id)).collect::<Result<_, _>>()?;
            return Ok(charge(IdedExpr { id, expr: Expr::Call(c) }, next_id));
        }
        Expr::Comprehension(mut c) => {
            c.iter_range = rewrite(c.iter_range, next_id)?;
            c.accu_init = rewrite(c.accu_init, next_id)?;
            c.loop_cond = rewrite(c.loop_cond, next_id)?;
            c.loop_step = charge(rewrite(c.loop_step, next_id)?, next_id);
            c.result = rewrite(c.result, next_id)?;
            Expr::Comprehension(c)
        }
        Expr::List(mut l) => {
            l.elements = l.elements.into_iter().map(|x| rewrite(x, next_id)).collect::<Result<_, _>>()?;
            Expr::List(l)
        }
        Expr::Map(m) => Expr::Map(MapExpr { entries: rewrite_entries(m.entries, next_id)? }),
        Expr::Struct(s) => {
            if !(s.type_name == "Object" || s.type_name.starts_with("Object.") || s.type_name == "JSONPatch") {
                return Err(CompileError::UnknownType(s.type_name));
            }
            Expr::Map(MapExpr { entries: rewrite_entries(s.entries, next_id)? })
        }
        Expr::Select(mut s) => {
            s.operand = Box::new(rewrite(*s.operand, next_id)?);
            Expr::Select(s)
        }
        other => other,
    };
    Ok(IdedExpr { id, expr })
}

/// Map entries, with struct fields turned into string-keyed entries.
fn rewrite_entries(es: Vec<IdedEntryExpr>, next_id: &mut u64) -> Result<Vec<IdedEntryExpr>, CompileError> {
    es.into_iter()
        .map(|e| {
            let expr = match e.expr {
                EntryExpr::StructField(f) => {
                    let key = IdedExpr { id: fresh(next_id), expr: Expr::Literal(LiteralValue::String(f.field.into())) };
                    EntryExpr::MapEntry(MapEntryExpr { key, value: rewrite(f.value, next_id)?, optional: f.optional })
                }
                EntryExpr::MapEntry(m) => EntryExpr::MapEntry(MapEntryExpr { key: rewrite(m.key, next_id)?, value: rewrite(m.value, next_id)?, optional: m.optional }),
            };
            Ok(IdedEntryExpr { id: e.id, expr })
        })
        .collect()
}

fn fresh(next_id: &mut u64) -> u64 {
    let id = *next_id;
    *next_id += 1;
    id
}

/// `e` wrapped in a call of the cost counter.
fn charge(e: IdedExpr, next_id: &mut u64) -> IdedExpr {
    IdedExpr { id: fresh(next_id), expr: Expr::Call(CallExpr { func_name: COST.to_string(), target: None, args: vec![e] }) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(src: &str, vars: &[(&str, serde_json::Value)]) -> Result<serde_json::Value, EvalError> {
        let p = Program::compile(src).map_err(|e| EvalError::Execution(e.to_string()))?;
        let mut a = Activation::new();
        for (n, v) in vars {
            a.bind_json(n, v);
        }
        let v = p.eval(&a, &mut Budget::new(PER_CALL_LIMIT))?;
        to_json(&v).map_err(EvalError::Execution)
    }

    #[test]
    fn integers_are_ints_and_compare_with_literals() {
        let obj = json!({"spec": {"replicas": 6}});
        assert_eq!(eval("object.spec.replicas <= 5", &[("object", obj.clone())]), Ok(json!(false)));
        assert_eq!(eval("object.spec.replicas + 1", &[("object", obj)]), Ok(json!(7)));
    }

    #[test]
    fn object_literals_become_maps() {
        let v = eval(r#"Object{metadata: Object.metadata{annotations: {"a": "b"}}}"#, &[]);
        assert_eq!(v, Ok(json!({"metadata": {"annotations": {"a": "b"}}})));
        let v = eval(r#"[JSONPatch{op: "add", path: "/x", value: 1}]"#, &[]);
        assert_eq!(v, Ok(json!([{"op": "add", "path": "/x", "value": 1}])));
        assert!(matches!(Program::compile("Foo{a: 1}"), Err(CompileError::UnknownType(t)) if t == "Foo"));
    }

    #[test]
    fn kubernetes_libraries_are_there() {
        assert_eq!(eval("'a,b'.split(',')", &[]), Ok(json!(["a", "b"])));
        assert_eq!(eval("quantity('1Gi').isGreaterThan(quantity('1Mi'))", &[]), Ok(json!(true)));
        assert_eq!(eval("isURL('https://x.example/y')", &[]), Ok(json!(true)));
        assert_eq!(eval("[1, 2, 3].all(x, x > 0)", &[]), Ok(json!(true)));
    }

    #[test]
    fn the_budget_stops_long_evaluations() {
        let p = Program::compile("[1,2,3,4,5,6,7,8,9,10].all(x, [1,2,3,4,5,6,7,8,9,10].all(y, x + y > 0))").unwrap_or_else(|e| panic!("{e}"));
        let a = Activation::new();
        let mut big = Budget::new(PER_CALL_LIMIT);
        assert_eq!(p.eval(&a, &mut big), Ok(Value::Bool(true)));
        let used = PER_CALL_LIMIT - big.remaining;
        assert!(used > 100, "{used}");
        assert_eq!(p.eval(&a, &mut Budget::new(50)), Err(EvalError::CostLimit));
    }

    #[test]
    fn building_large_strings_runs_out_of_budget() {
        // A concatenation costs a tenth of a unit per byte it builds: 32 MiB
        // is over the per-call limit, 128 bytes far under it.
        let vars = |n: usize| {
            let mut a = Activation::new();
            a.bind("s0", Value::String(Arc::new("a".repeat(16))));
            for i in 1..=n {
                let prev = match a.get(&format!("s{}", i - 1)) {
                    Some(Value::String(s)) => s.to_string(),
                    _ => String::new(),
                };
                a.bind(&format!("s{i}"), Value::String(Arc::new(prev.repeat(2))));
            }
            a
        };
        let p = Program::compile("size(s20 + s20) > 0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.eval(&vars(20), &mut Budget::new(PER_CALL_LIMIT)), Err(EvalError::CostLimit));
        let small = Program::compile("size(s2 + s2) > 0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(small.eval(&vars(2), &mut Budget::new(PER_CALL_LIMIT)), Ok(Value::Bool(true)));
    }

    #[test]
    fn syntax_errors_are_compile_errors() {
        assert!(matches!(Program::compile("object.spec.replicas <="), Err(CompileError::Syntax(_))));
    }
}
