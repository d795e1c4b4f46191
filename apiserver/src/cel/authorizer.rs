//! The `authorizer` variable of admission policies: kube's CEL
//! authorizer library (`k8s.io/apiserver/pkg/cel/library/authz.go`), over
//! this server's [`crate::authz::Authorizer`].
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
//! `check` is synchronous, as CEL evaluation is, and the authorizer is
//! async: it runs the authorizer's future with [`tokio::runtime::Handle::block_on`]
//! on the runtime the variable was made on. Evaluations that may call it
//! must therefore run off the async workers, inside
//! `tokio::task::spawn_blocking` and [`blocking`], as the admission policy
//! plugins do; anywhere else `check` answers an errored Decision instead of
//! blocking a worker.
//!
//! Not implemented: `fieldSelector`/`labelSelector` on resource checks
//! (kube 1.31+), and kube's per-call cost of a check.

use std::fmt;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map, Opaque};
use kube_cel::cel::{Context, ExecutionError, Value};

use crate::authn::UserInfo;
use crate::authz::{Attributes, Authorizer, Decision};

/// The key of the hidden entry holding the `Authorizer` in the variable's
/// map; `@` cannot start a CEL identifier, so no expression can name it.
const HIDDEN: &str = "@authorizer";

/// Who asks, and whom.
#[derive(Clone)]
struct Principal {
    user: UserInfo,
    authorizer: Arc<dyn Authorizer>,
    runtime: tokio::runtime::Handle,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Authorizer({})", self.user.name)
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        self.user == other.user && std::ptr::addr_eq(Arc::as_ptr(&self.authorizer), Arc::as_ptr(&other.authorizer))
    }
}

impl Eq for Principal {}

/// kube's `Authorizer` type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AuthorizerVal(Arc<Principal>);

/// kube's `PathCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathCheck {
    principal: Arc<Principal>,
    path: String,
}

/// kube's `GroupCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupCheck {
    principal: Arc<Principal>,
    group: String,
}

/// kube's `ResourceCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceCheck {
    principal: Arc<Principal>,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

/// kube's `Decision`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DecisionVal {
    allowed: bool,
    reason: String,
    error: Option<String>,
}

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

/// The `authorizer` variable for `user`, asking `authorizer`, with
/// `authorizer.requestResource` set to `request`. Call it inside a Tokio
/// runtime: checks run on that runtime.
///
/// # Panics
/// Outside a Tokio runtime.
pub fn variable(user: &UserInfo, authorizer: Arc<dyn Authorizer>, request: RequestResource) -> Value {
    let principal = Arc::new(Principal { user: user.clone(), authorizer, runtime: tokio::runtime::Handle::current() });
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
fn principal(function: &str, this: &Value) -> Result<Arc<Principal>, ExecutionError> {
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
/// ServiceAccount (its user name and kube's two ServiceAccount groups).
fn service_account(This(this): This<Value>, ns: Arc<String>, name: Arc<String>) -> Result<Value, ExecutionError> {
    let p = principal("serviceAccount", &this)?;
    let user = UserInfo { name: crate::authn::service_account_user(&ns, &name), groups: vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{ns}")], ..Default::default() };
    Ok(Value::Opaque(Arc::new(AuthorizerVal(Arc::new(Principal { user, authorizer: p.authorizer.clone(), runtime: p.runtime.clone() })))))
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

/// `check(verb)` on a PathCheck or a ResourceCheck: asks the authorizer.
fn check(This(this): This<Value>, verb: Arc<String>) -> Result<Value, ExecutionError> {
    let decision = if let Some(p) = opaque::<PathCheck>(&this) {
        let attrs = Attributes { user: &p.principal.user, verb: &verb, resource_request: false, path: &p.path, namespace: "", api_group: "", api_version: "", resource: "", subresource: "", name: "" };
        ask(&p.principal, &attrs)
    } else if let Some(r) = opaque::<ResourceCheck>(&this) {
        let attrs = Attributes {
            user: &r.principal.user,
            verb: &verb,
            resource_request: true,
            path: "",
            namespace: &r.namespace,
            api_group: &r.group,
            api_version: &r.version,
            resource: &r.resource,
            subresource: &r.subresource,
            name: &r.name,
        };
        ask(&r.principal, &attrs)
    } else {
        return Err(no_overload("check", &this));
    };
    Ok(Value::Opaque(Arc::new(decision)))
}

thread_local! {
    /// Whether this thread may block on the authorizer (see [`blocking`]).
    static MAY_BLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, in which `check` may block this thread on the authorizer.
/// Call it only off the async workers (inside `spawn_blocking`): there
/// `Handle::block_on` is sound. Elsewhere `check` answers an errored
/// Decision rather than block a worker.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let before = MAY_BLOCK.with(|b| b.replace(true));
    let out = f();
    MAY_BLOCK.with(|b| b.set(before));
    out
}

/// Runs the authorizer on the principal's runtime.
fn ask(p: &Principal, attrs: &Attributes<'_>) -> DecisionVal {
    if !MAY_BLOCK.with(std::cell::Cell::get) {
        return DecisionVal { allowed: false, reason: String::new(), error: Some("authorizer checks are not available here".into()) };
    }
    match p.runtime.block_on(p.authorizer.authorize(attrs)) {
        Ok(a) => DecisionVal { allowed: a.decision == Decision::Allow, reason: a.reason, error: None },
        Err(e) => DecisionVal { allowed: false, reason: String::new(), error: Some(e.to_string()) },
    }
}

fn decision<'a>(function: &str, this: &'a Value) -> Result<&'a DecisionVal, ExecutionError> {
    opaque::<DecisionVal>(this).ok_or_else(|| no_overload(function, this))
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

    /// Allows alice everything in namespace `a` and `/healthz`, nothing else.
    struct Alice;

    #[async_trait::async_trait]
    impl Authorizer for Alice {
        async fn authorize(&self, attrs: &Attributes<'_>) -> crate::authz::Result<crate::authz::Authorized> {
            if attrs.resource == "boom" {
                return Err(crate::authz::Error::Evaluation("the authorizer failed".into()));
            }
            let ok = attrs.user.name == "alice" && ((attrs.resource_request && attrs.namespace == "a") || attrs.path == "/healthz");
            Ok(crate::authz::Authorized { decision: if ok { Decision::Allow } else { Decision::NoOpinion }, reason: format!("asked {} {}", attrs.verb, attrs.api_version) })
        }
    }

    fn eval(src: &str, user: &str) -> Result<serde_json::Value, String> {
        let p = Program::compile(src).map_err(|e| e.to_string())?;
        let mut a = Activation::new();
        let request = RequestResource { group: "apps".into(), version: "v1".into(), resource: "deployments".into(), namespace: "a".into(), ..Default::default() };
        a.bind("authorizer", variable(&UserInfo { name: user.into(), ..Default::default() }, Arc::new(Alice), request));
        blocking(|| p.eval(&a, &mut Budget::new(PER_CALL_LIMIT))).map_err(|e| e.to_string()).and_then(|v| crate::cel::to_json(&v))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn checks_ask_the_authorizer_as_the_user_or_a_service_account() {
        let cases: Vec<(&str, &str, serde_json::Value)> = vec![
            ("authorizer.group('').resource('pods').namespace('a').check('get').allowed()", "alice", serde_json::json!(true)),
            ("authorizer.group('').resource('pods').namespace('b').name('x').subresource('log').check('get').allowed()", "alice", serde_json::json!(false)),
            ("authorizer.group('').resource('pods').namespace('a').check('get').reason()", "alice", serde_json::json!("asked get *")),
            ("authorizer.requestResource.check('create').reason()", "alice", serde_json::json!("asked create v1")),
            ("authorizer.requestResource.check('create').allowed()", "bob", serde_json::json!(false)),
            ("authorizer.path('/healthz').check('get').allowed()", "alice", serde_json::json!(true)),
            ("authorizer.serviceAccount('a', 'robot').group('').resource('pods').namespace('a').check('get').allowed()", "alice", serde_json::json!(false)),
            ("authorizer.group('').resource('boom').check('get').errored()", "alice", serde_json::json!(true)),
            ("authorizer.group('').resource('boom').check('get').error()", "alice", serde_json::json!("the authorizer failed")),
            ("authorizer.group('').resource('pods').check('get').error()", "alice", serde_json::json!("")),
        ];
        for (src, user, want) in cases {
            let got = tokio::task::spawn_blocking(move || eval(src, user)).await.unwrap_or_else(|e| Err(e.to_string()));
            assert_eq!(got, Ok(want), "{src}");
        }
        // Off the blocking pool a check does not block: it errs.
        let p = Program::compile("authorizer.path('/healthz').check('get').errored()").unwrap_or_else(|e| panic!("{e}"));
        let mut a = Activation::new();
        a.bind("authorizer", variable(&UserInfo::default(), Arc::new(Alice), RequestResource::default()));
        assert_eq!(p.eval(&a, &mut Budget::new(PER_CALL_LIMIT)), Ok(Value::Bool(true)));
        assert!(eval("authorizer.check('get')", "alice").is_err());
    }
}
