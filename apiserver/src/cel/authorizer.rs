//! The `authorizer` variable of admission policies: kube's CEL
//! authorizer library (`k8s.io/apiserver/pkg/cel/library/authz.go`), over
//! a [`Checker`] that the caller supplies (the admission policies answer
//! with the server's authorizer, as the request's user).
//!
//! ```text
//! authorizer.group('apps').resource('deployments').subresource('scale')
//!           .namespace('ns').name('web').check('update').allowed()     → bool
//! authorizer.path('/healthz').check('get').reason()                     → string
//! authorizer.serviceAccount('ns', 'sa').group('').resource('pods')…     (asks as that ServiceAccount)
//! authorizer.requestResource.check('delete').errored()                  (the resource of the request)
//! ```
//!
//! Types (kube's names): `Authorizer`, `PathCheck`, `GroupCheck`,
//! `ResourceCheck` and `Decision`, each an opaque CEL value. A Decision has
//! `allowed()` (the authorizer said Allow), `reason()`, `errored()` and
//! `error()` (the authorizer failed; its message, else `''`). A resource
//! check asks about every version (`apiVersion: *`) as kube does, except
//! `requestResource`, which names the request's version.
//!
//! The variable itself is a map `{requestResource: ResourceCheck}` whose
//! hidden entry holds the `Authorizer`: the interpreter selects fields only
//! from maps, and `authorizer.requestResource` is a field. Methods accept
//! the map or an `Authorizer` (what `serviceAccount` returns).
//!
//! `check` is synchronous, as CEL evaluation is: a [`Checker`] over an
//! async authorizer must block (the admission policies evaluate on Tokio's
//! blocking pool for that).
//!
//! Not implemented: `fieldSelector`/`labelSelector` on resource checks
//! (kube 1.31+), and kube's per-call cost of a check.

use std::fmt;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map, Opaque};
use kube_cel::cel::{Context, ExecutionError, Value};

/// The key of the hidden entry holding the `Authorizer` in the variable's
/// map; `@` cannot start a CEL identifier, so no expression can name it.
const HIDDEN: &str = "@authorizer";

/// What a `check` asks (kube's authorizer attributes; who asks is the
/// [`Checker`]'s business).
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The verb (`get`, `create`, …; for a path, the lowercase HTTP verb).
    pub verb: &'a str,
    /// A resource check (else a path check).
    pub resource_request: bool,
    /// The URL path (path checks).
    pub path: &'a str,
    /// API group.
    pub group: &'a str,
    /// API version (`*` for every version).
    pub version: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
    /// Subresource, or empty.
    pub subresource: &'a str,
    /// Namespace, or empty.
    pub namespace: &'a str,
    /// Object name, or empty.
    pub name: &'a str,
}

/// An answer to a [`Check`] (kube's `Decision`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// The authorizer allowed it.
    pub allowed: bool,
    /// Why, in the authorizer's words; may be empty.
    pub reason: String,
    /// The authorizer failed, with this message.
    pub error: Option<String>,
}

/// Answers checks for one user.
pub trait Checker: Send + Sync {
    /// The decision for `check`, made as this checker's user.
    fn check(&self, check: &Check<'_>) -> Decision;

    /// A checker asking as the ServiceAccount `namespace/name` instead.
    fn service_account(&self, namespace: &str, name: &str) -> Arc<dyn Checker>;
}

/// Who asks.
#[derive(Clone)]
struct Principal(Arc<dyn Checker>);

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Authorizer")
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl Eq for Principal {}

/// kube's `Authorizer` type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AuthorizerVal(Principal);

/// kube's `PathCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathCheck {
    principal: Principal,
    path: String,
}

/// kube's `GroupCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupCheck {
    principal: Principal,
    group: String,
}

/// kube's `ResourceCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceCheck {
    principal: Principal,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

/// kube's `Decision` type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DecisionVal(Decision);

impl Opaque for AuthorizerVal {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Authorizer"
    }
}

impl Opaque for PathCheck {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.PathCheck"
    }
}

impl Opaque for GroupCheck {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.GroupCheck"
    }
}

impl Opaque for ResourceCheck {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.ResourceCheck"
    }
}

impl Opaque for DecisionVal {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

/// The resource of the request being admitted, for
/// `authorizer.requestResource`.
#[derive(Debug, Clone, Default)]
pub struct RequestResource {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource, or empty.
    pub subresource: String,
    /// Namespace, or empty.
    pub namespace: String,
    /// Object name, or empty.
    pub name: String,
}

/// The `authorizer` variable asking `checker`, with
/// `authorizer.requestResource` set to `request`.
pub fn variable(checker: Arc<dyn Checker>, request: RequestResource) -> Value {
    let principal = Principal(checker);
    let rr = ResourceCheck {
        principal: principal.clone(),
        group: request.group,
        version: request.version,
        resource: request.resource,
        subresource: request.subresource,
        namespace: request.namespace,
        name: request.name,
    };
    let mut map = std::collections::HashMap::new();
    map.insert(Key::String(Arc::new(HIDDEN.to_string())), Value::Opaque(Arc::new(AuthorizerVal(principal))));
    map.insert(Key::String(Arc::new("requestResource".to_string())), Value::Opaque(Arc::new(rr)));
    Value::Map(Map { map: Arc::new(map) })
}

/// Registers the library's functions into `ctx`.
pub(super) fn register(ctx: &mut Context<'static>) {
    ctx.add_function("path", path);
    ctx.add_function("group", group);
    ctx.add_function("serviceAccount", service_account);
    ctx.add_function("resource", resource);
    ctx.add_function("subresource", subresource);
    ctx.add_function("namespace", namespace);
    ctx.add_function("name", name);
    ctx.add_function("check", check);
    ctx.add_function("allowed", allowed);
    ctx.add_function("reason", reason);
    ctx.add_function("errored", errored);
    ctx.add_function("error", error);
}

fn no_overload(function: &str, target: &Value) -> ExecutionError {
    ExecutionError::function_error(function, format!("no such overload for {}", super::type_name(target)))
}

fn opaque<T: 'static>(v: &Value) -> Option<&T> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    }
}

/// The principal of the `authorizer` map or of an `Authorizer`.
fn principal(function: &str, this: &Value) -> Result<Principal, ExecutionError> {
    let inner = match this {
        Value::Map(m) => m.map.get(&Key::String(Arc::new(HIDDEN.to_string()))),
        other => Some(other),
    };
    inner.and_then(opaque::<AuthorizerVal>).map(|a| a.0.clone()).ok_or_else(|| no_overload(function, this))
}

fn path(This(this): This<Value>, p: Arc<String>) -> Result<Value, ExecutionError> {
    let principal = principal("path", &this)?;
    Ok(Value::Opaque(Arc::new(PathCheck { principal, path: p.to_string() })))
}

fn group(This(this): This<Value>, g: Arc<String>) -> Result<Value, ExecutionError> {
    let principal = principal("group", &this)?;
    Ok(Value::Opaque(Arc::new(GroupCheck { principal, group: g.to_string() })))
}

/// `serviceAccount(namespace, name)`: an `Authorizer` asking as that
/// ServiceAccount.
fn service_account(This(this): This<Value>, ns: Arc<String>, name: Arc<String>) -> Result<Value, ExecutionError> {
    let p = principal("serviceAccount", &this)?;
    Ok(Value::Opaque(Arc::new(AuthorizerVal(Principal(p.0.service_account(&ns, &name))))))
}

fn resource(This(this): This<Value>, r: Arc<String>) -> Result<Value, ExecutionError> {
    let g = opaque::<GroupCheck>(&this).ok_or_else(|| no_overload("resource", &this))?;
    Ok(Value::Opaque(Arc::new(ResourceCheck {
        principal: g.principal.clone(),
        group: g.group.clone(),
        version: "*".to_string(),
        resource: r.to_string(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
    })))
}

/// A copy of the resource check `this` with one field changed.
fn with(function: &str, this: &Value, set: impl FnOnce(&mut ResourceCheck)) -> Result<Value, ExecutionError> {
    let mut r = opaque::<ResourceCheck>(this).ok_or_else(|| no_overload(function, this))?.clone();
    set(&mut r);
    Ok(Value::Opaque(Arc::new(r)))
}

fn subresource(This(this): This<Value>, s: Arc<String>) -> Result<Value, ExecutionError> {
    with("subresource", &this, |r| r.subresource = s.to_string())
}

fn namespace(This(this): This<Value>, ns: Arc<String>) -> Result<Value, ExecutionError> {
    with("namespace", &this, |r| r.namespace = ns.to_string())
}

fn name(This(this): This<Value>, n: Arc<String>) -> Result<Value, ExecutionError> {
    with("name", &this, |r| r.name = n.to_string())
}

/// `check(verb)` on a PathCheck or a ResourceCheck: asks the checker.
fn check(This(this): This<Value>, verb: Arc<String>) -> Result<Value, ExecutionError> {
    let decision = if let Some(p) = opaque::<PathCheck>(&this) {
        let c = Check { verb: &verb, resource_request: false, path: &p.path, group: "", version: "", resource: "", subresource: "", namespace: "", name: "" };
        p.principal.0.check(&c)
    } else if let Some(r) = opaque::<ResourceCheck>(&this) {
        let c =
            Check { verb: &verb, resource_request: true, path: "", group: &r.group, version: &r.version, resource: &r.resource, subresource: &r.subresource, namespace: &r.namespace, name: &r.name };
        r.principal.0.check(&c)
    } else {
        return Err(no_overload("check", &this));
    };
    Ok(Value::Opaque(Arc::new(DecisionVal(decision))))
}

fn decision<'a>(function: &str, this: &'a Value) -> Result<&'a Decision, ExecutionError> {
    opaque::<DecisionVal>(this).map(|d| &d.0).ok_or_else(|| no_overload(function, this))
}

fn allowed(This(this): This<Value>) -> Result<bool, ExecutionError> {
    Ok(decision("allowed", &this)?.allowed)
}

fn reason(This(this): This<Value>) -> Result<Arc<String>, ExecutionError> {
    Ok(Arc::new(decision("reason", &this)?.reason.clone()))
}

fn errored(This(this): This<Value>) -> Result<bool, ExecutionError> {
    Ok(decision("errored", &this)?.error.is_some())
}

fn error(This(this): This<Value>) -> Result<Arc<String>, ExecutionError> {
    Ok(Arc::new(decision("error", &this)?.error.clone().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::{Activation, Budget, Program, PER_CALL_LIMIT};

    /// Allows alice everything in namespace `a` and `/healthz`; fails on
    /// resource `boom`; tells what it was asked.
    struct Alice(String);

    impl Checker for Alice {
        fn check(&self, c: &Check<'_>) -> Decision {
            if c.resource == "boom" {
                return Decision { error: Some("the authorizer failed".into()), ..Default::default() };
            }
            let allowed = self.0 == "alice" && ((c.resource_request && c.namespace == "a") || c.path == "/healthz");
            Decision { allowed, reason: format!("{} asked {} {}", self.0, c.verb, c.version), error: None }
        }
        fn service_account(&self, namespace: &str, name: &str) -> Arc<dyn Checker> {
            Arc::new(Alice(format!("system:serviceaccount:{namespace}:{name}")))
        }
    }

    fn eval(src: &str, user: &str) -> Result<serde_json::Value, String> {
        let p = Program::compile(src).map_err(|e| e.to_string())?;
        let mut a = Activation::new();
        let request = RequestResource { group: "apps".into(), version: "v1".into(), resource: "deployments".into(), namespace: "a".into(), ..Default::default() };
        a.bind("authorizer", variable(Arc::new(Alice(user.into())), request));
        p.eval(&a, &mut Budget::new(PER_CALL_LIMIT)).map_err(|e| e.to_string()).and_then(|v| crate::cel::to_json(&v))
    }

    #[test]
    fn checks_ask_the_checker_as_the_user_or_a_service_account() {
        let cases: Vec<(&str, &str, serde_json::Value)> = vec![
            ("authorizer.group('').resource('pods').namespace('a').check('get').allowed()", "alice", serde_json::json!(true)),
            ("authorizer.group('').resource('pods').namespace('b').name('x').subresource('log').check('get').allowed()", "alice", serde_json::json!(false)),
            ("authorizer.group('').resource('pods').namespace('a').check('get').reason()", "alice", serde_json::json!("alice asked get *")),
            ("authorizer.requestResource.check('create').reason()", "alice", serde_json::json!("alice asked create v1")),
            ("authorizer.requestResource.check('create').allowed()", "bob", serde_json::json!(false)),
            ("authorizer.path('/healthz').check('get').allowed()", "alice", serde_json::json!(true)),
            ("authorizer.serviceAccount('a', 'robot').group('').resource('pods').namespace('a').check('get').reason()", "alice", serde_json::json!("system:serviceaccount:a:robot asked get *")),
            ("authorizer.group('').resource('boom').check('get').errored()", "alice", serde_json::json!(true)),
            ("authorizer.group('').resource('boom').check('get').error()", "alice", serde_json::json!("the authorizer failed")),
            ("authorizer.group('').resource('pods').check('get').error()", "alice", serde_json::json!("")),
        ];
        for (src, user, want) in cases {
            assert_eq!(eval(src, user), Ok(want), "{src}");
        }
        assert!(eval("authorizer.check('get')", "alice").is_err());
        assert!(eval("authorizer.group('').allowed()", "alice").is_err());
    }
}
