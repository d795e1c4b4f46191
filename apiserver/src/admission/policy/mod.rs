//! CEL admission policies: `ValidatingAdmissionPolicy` ([`validating`]) and
//! `MutatingAdmissionPolicy` ([`mutating`]) with their bindings, as
//! kube-apiserver runs them (`k8s.io/apiserver/pkg/admission/plugin/policy`).
//!
//! A request meets the policies in three steps:
//!
//! ```text
//! hooks       policies and bindings from Sources, compiled once per policy
//!             (uid, generation) and kept while the snapshots are the same Arcs
//! select      for each policy, in name order: matchConstraints match? (else skip)
//!             for each of its bindings, in name order: matchResources match?
//!             params: paramKind + paramRef → 0, 1 or more objects
//!             → one invocation per (policy, binding, param)
//! evaluate    CEL, with object, oldObject, request, params, namespaceObject,
//!             variables and authorizer; matchConditions first
//! ```
//!
//! Errors on the way (an unknown namespace, a missing param under
//! `parameterNotFoundAction: Deny`, an expression that does not compile or
//! fails) follow the policy's `failurePolicy`: `Fail` refuses the request,
//! `Ignore` skips what failed.
//!
//! Selecting may read the store (params), so it is async; evaluating is
//! CPU-bound and synchronous. When an expression of a selected policy names
//! `authorizer`, the whole evaluation moves to Tokio's blocking pool, where
//! [`crate::cel::authorizer`] may block on the async authorizer; otherwise
//! it runs in place.
//!
//! Variables are evaluated lazily, at most once per invocation: an
//! expression that reads `variables.x` first evaluates `x` (and what `x`
//! reads). A variable that fails fails only the expressions that read it,
//! with kube's `composited variable "x" fails to evaluate: …`.
//!
//! Cost: each expression may spend [`crate::cel::PER_CALL_LIMIT`], one
//! invocation [`crate::cel::RUNTIME_BUDGET`] in all.
//!
//! Params are read from the store by key, not from an informer: the
//! resource is guessed from `paramKind.kind` as kube's
//! `UnsafeGuessKindToResource` does (`ConfigMap` → `configmaps`), and the
//! object is the stored one (its storage version).

pub mod apply;
pub mod compile;
pub mod mutating;
pub mod typecheck;
pub mod validating;

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::Value as Cel;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::matching;
use super::sources::{Snapshot, Source, Sources};
use super::Attributes;
use crate::cel::{Activation, Budget, EvalError, PER_CALL_LIMIT, RUNTIME_BUDGET};
use crate::errors::{Cause, Status};
use crate::storage::Storage;
use compile::{Common, Expression};

/// The API group of policies and bindings.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// One compiled policy with the bindings that name it, in name order.
pub struct Hook<P> {
    /// The compiled policy.
    pub policy: Arc<P>,
    /// Its bindings.
    pub bindings: Vec<Arc<Value>>,
}

/// Compiled policies, rebuilt when the policies' or bindings' snapshot
/// changes; a policy whose uid and generation are unchanged keeps its
/// compiled form.
pub struct Cache<P> {
    policies: &'static str,
    bindings: &'static str,
    compile: fn(&Value) -> P,
    /// The two copies, once the admission feed has plugged them in.
    copies: std::sync::OnceLock<(Arc<dyn Source>, Arc<dyn Source>)>,
    state: Mutex<Option<CacheState<P>>>,
}

struct CacheState<P> {
    policies: Snapshot,
    bindings: Snapshot,
    hooks: Arc<Vec<Hook<P>>>,
    compiled: HashMap<(String, i64), Arc<P>>,
}

impl<P> Cache<P> {
    /// A cache of the policies of resource `policies` and the bindings of
    /// `bindings` (both of [`GROUP`]), compiled with `compile`.
    pub fn new(policies: &'static str, bindings: &'static str, compile: fn(&Value) -> P) -> Self {
        Cache { policies, bindings, compile, copies: std::sync::OnceLock::new(), state: Mutex::new(None) }
    }

    /// The hooks of the current snapshots (policies in name order).
    pub fn hooks(&self, sources: &Sources) -> Arc<Vec<Hook<P>>> {
        let copies = match self.copies.get() {
            Some(c) => Some(c),
            None => match (sources.get(GROUP, self.policies), sources.get(GROUP, self.bindings)) {
                (Some(p), Some(b)) => Some(self.copies.get_or_init(|| (p, b))),
                _ => None,
            },
        };
        let Some((policies, bindings)) = copies else { return Arc::new(Vec::new()) };
        let (policies, bindings) = (policies.snapshot(), bindings.snapshot());
        let mut state = self.state.lock();
        if let Some(s) = state.as_ref() {
            if Arc::ptr_eq(&s.policies, &policies) && Arc::ptr_eq(&s.bindings, &bindings) {
                return s.hooks.clone();
            }
        }
        let old = state.take().map(|s| s.compiled).unwrap_or_default();
        let mut compiled = HashMap::new();
        let mut by_policy: HashMap<&str, Vec<Arc<Value>>> = HashMap::new();
        for b in bindings.values() {
            if let Some(name) = b["spec"]["policyName"].as_str() {
                by_policy.entry(name).or_default().push(b.clone());
            }
        }
        let mut hooks = Vec::new();
        for p in policies.values() {
            let key = (p["metadata"]["uid"].as_str().unwrap_or("").to_string(), p["metadata"]["generation"].as_i64().unwrap_or(0));
            let c = old.get(&key).cloned().unwrap_or_else(|| Arc::new((self.compile)(p)));
            compiled.insert(key, c.clone());
            let bs = by_policy.remove(crate::meta::name(p)).unwrap_or_default();
            if !bs.is_empty() {
                hooks.push(Hook { policy: c, bindings: bs });
            }
        }
        let hooks = Arc::new(hooks);
        *state = Some(CacheState { policies, bindings, hooks: hooks.clone(), compiled });
        hooks
    }

    /// The copies the policies must have complete before they decide
    /// (kube's ready func of the policy plugins: the policy source and the
    /// namespaces).
    pub fn needs(&self) -> [(&'static str, &'static str); 3] {
        [(GROUP, self.policies), (GROUP, self.bindings), ("", "namespaces")]
    }

    /// Whether every operation must reach the plugin: while the copies are
    /// incomplete it waits there (and refuses if they stay so), even
    /// though no policy is known yet.
    pub fn waiting(&self, sources: &Sources) -> bool {
        !sources.ready(&self.needs())
    }

    /// The compiled policies of the last [`Cache::hooks`] call.
    pub fn last(&self) -> Option<Arc<Vec<Hook<P>>>> {
        self.state.lock().as_ref().map(|s| s.hooks.clone())
    }
}

/// Whether the request writes an admission policy or binding, which the
/// policy plugins leave alone (kube's `shouldIgnoreResource` over the
/// policy resources), so that policies can be written before the
/// plugins are ready.
pub fn ignored(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == GROUP
        && matches!(attrs.resource.resource, "validatingadmissionpolicies" | "validatingadmissionpolicybindings" | "mutatingadmissionpolicies" | "mutatingadmissionpolicybindings")
}

/// Whether the policy's `matchConstraints` match: its selectors, some
/// `resourceRules` entry (a policy without one matches nothing), no
/// `excludeResourceRules` entry.
///
/// # Errors
/// The namespace is not known (kube: `failed to configure policy: …`).
pub fn policy_matches(common: &Common, attrs: &Attributes<'_>, sources: &Sources) -> Result<bool, String> {
    if common.match_constraints["resourceRules"].as_array().is_none_or(Vec::is_empty) {
        return Ok(false);
    }
    matching::resources_match(&common.match_constraints, attrs, sources).map_err(|e| e.0)
}

/// Whether a binding's `matchResources` match (absent: everything its
/// policy matches).
///
/// # Errors
/// As [`policy_matches`].
pub fn binding_matches(binding: &Value, attrs: &Attributes<'_>, sources: &Sources) -> Result<bool, String> {
    matching::resources_match(&binding["spec"]["matchResources"], attrs, sources).map_err(|e| e.0)
}

/// Why a policy's `paramKind` cannot be used: the kind is not served
/// (kube's policy source finds no REST mapping for it), worded as kube
/// words it: `failed to find resource referenced by paramKind:
/// 'example.com/v1, Kind=Nothing'`. `None` without a paramKind or when
/// the kind is served.
pub fn param_kind_error(param_kind: Option<&Value>, schemas: &crate::schema::SchemaStore) -> Option<String> {
    let kind = param_kind?;
    let api_version = kind["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let k = kind["kind"].as_str().unwrap_or("");
    if schemas.of_kind(group, version, k).is_some() {
        return None;
    }
    Some(format!("failed to find resource referenced by paramKind: '{group}/{version}, Kind={k}'"))
}

/// kube's guess of a kind's resource (`UnsafeGuessKindToResource`):
/// lowercase, `s` → `ses`, `y` → `ies`, else `+s`.
pub fn guess_resource(kind: &str) -> String {
    let k = kind.to_lowercase();
    if k.ends_with('s') {
        format!("{k}es")
    } else if let Some(stem) = k.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{k}s")
    }
}

/// The params of one binding (kube's `CollectParams`): `[None]` when the
/// policy has no `paramKind` or the binding no `paramRef`; else the object
/// `paramRef.name`, or the objects `paramRef.selector` selects, in
/// `paramRef.namespace` (default: the request's namespace; a cluster-scoped
/// request looks for cluster-scoped params). None found: no invocation,
/// or an error under `parameterNotFoundAction: Deny`.
///
/// # Errors
/// kube's messages: no params under Deny; a store failure.
pub async fn collect_params(storage: &dyn Storage, param_kind: Option<&Value>, binding: &Value, namespace: &str) -> Result<Vec<Option<Value>>, String> {
    let param_ref = &binding["spec"]["paramRef"];
    let Some(kind) = param_kind else { return Ok(vec![None]) };
    if !param_ref.is_object() {
        return Ok(vec![None]);
    }
    let api_version = kind["apiVersion"].as_str().unwrap_or("");
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let resource = guess_resource(kind["kind"].as_str().unwrap_or(""));
    let ns = param_ref["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(namespace);
    let scopes: Vec<Option<&str>> = if ns.is_empty() { vec![None] } else { vec![Some(ns), None] };
    let mut found = Vec::new();
    if let Some(name) = param_ref["name"].as_str().filter(|n| !n.is_empty()) {
        if param_ref["selector"].is_object() {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        for scope in scopes {
            match storage.get(&crate::storage::keys::object(group, &resource, scope, name)).await {
                Ok(v) => {
                    found.push(Some(v));
                    break;
                }
                Err(crate::storage::Error::NotFound) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    } else if param_ref["selector"].is_object() {
        let selector = crate::selectors::LabelSelector::from_object(&param_ref["selector"]);
        let prefix = crate::storage::keys::prefix(group, &resource, (!ns.is_empty()).then_some(ns));
        let list = storage.list(&prefix, &crate::storage::ListOptions::default()).await.map_err(|e| e.to_string())?;
        for item in list.items {
            // Without a namespace only cluster-scoped objects qualify.
            if (ns.is_empty() && !crate::meta::namespace(&item).is_empty()) || !selector.matches_object(&item) {
                continue;
            }
            found.push(Some(item));
        }
    } else {
        return Err("one of name or selector must be provided".into());
    }
    if found.is_empty() && param_ref["parameterNotFoundAction"] == "Deny" {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
    }
    Ok(found)
}

/// kube's `AdmissionRequest` as CEL's `request` sees it
/// (`CreateAdmissionRequest`): uid (empty, as kube leaves it), kind,
/// resource, subResource, requestKind, requestResource,
/// requestSubResource, name, namespace, operation, userInfo, dryRun,
/// options; empty optional fields are left out, as Go's `omitempty` does.
pub fn request_object(attrs: &Attributes<'_>) -> Value {
    let gvk = |k: &super::Kind<'_>| json!({"group": k.group, "version": k.version, "kind": k.kind});
    let gvr = json!({"group": attrs.resource.group, "version": attrs.resource.version, "resource": attrs.resource.resource});
    let mut r = serde_json::Map::new();
    r.insert("uid".into(), json!(""));
    r.insert("kind".into(), gvk(&attrs.kind));
    r.insert("resource".into(), gvr.clone());
    r.insert("requestKind".into(), gvk(&attrs.request_kind));
    r.insert("requestResource".into(), gvr);
    if !attrs.subresource.is_empty() {
        r.insert("subResource".into(), json!(attrs.subresource));
        r.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    if !attrs.name.is_empty() {
        r.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        r.insert("namespace".into(), json!(attrs.namespace));
    }
    r.insert("operation".into(), json!(attrs.operation.as_str()));
    r.insert("userInfo".into(), attrs.user.to_json());
    r.insert("dryRun".into(), json!(attrs.dry_run));
    if !attrs.options.is_null() {
        r.insert("options".into(), attrs.options.clone());
    }
    Value::Object(r)
}

/// The `namespaceObject` of a request (kube's `CreateNamespaceObject`: the
/// namespace's metadata without managedFields and ownerReferences, its
/// spec and status), `null` for cluster-scoped objects and Namespaces.
///
/// # Errors
/// The namespace is not known: kube answers 404 for it.
pub fn namespace_object(attrs: &Attributes<'_>, sources: &Sources) -> Result<Value, Status> {
    let is_namespace = attrs.kind.group.is_empty() && attrs.kind.version == "v1" && attrs.kind.kind == "Namespace";
    if attrs.namespace.is_empty() || is_namespace {
        return Ok(Value::Null);
    }
    let Some(ns) = sources.namespace(attrs.namespace) else { return Err(Status::not_found("", "namespaces", attrs.namespace)) };
    let mut meta = serde_json::Map::new();
    for f in
        ["name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "finalizers"]
    {
        if let Some(v) = ns["metadata"].get(f) {
            meta.insert(f.into(), v.clone());
        }
    }
    Ok(json!({"metadata": meta, "spec": ns["spec"], "status": ns["status"]}))
}

/// What every expression of one request sees, as CEL values (built once
/// per request, shared by its invocations).
#[derive(Clone)]
pub struct Inputs {
    /// `object` (null for deletes).
    pub object: Cel,
    /// `oldObject` (null for creates).
    pub old_object: Cel,
    /// `request`.
    pub request: Cel,
    /// `namespaceObject`.
    pub namespace_object: Cel,
    /// `authorizer`, when some expression uses it.
    pub authorizer: Option<Cel>,
}

impl Inputs {
    /// The inputs of `attrs`; `authorizer` is built only when `with_authorizer`.
    ///
    /// # Errors
    /// As [`namespace_object`].
    pub fn of(attrs: &Attributes<'_>, sources: &Sources, authorizer: Option<&Arc<dyn crate::authz::Authorizer>>) -> Result<Inputs, Status> {
        let authorizer = authorizer.map(|a| crate::admission::cel_authorizer::variable(attrs, a));
        Ok(Inputs {
            object: attrs.object.as_ref().map_or(Cel::Null, crate::cel::to_cel),
            old_object: attrs.old_object.map_or(Cel::Null, crate::cel::to_cel),
            request: crate::cel::to_cel(&request_object(attrs)),
            namespace_object: crate::cel::to_cel(&namespace_object(attrs, sources)?),
            authorizer,
        })
    }
}

/// The state of one variable during an invocation.
#[derive(Clone)]
enum Slot {
    Pending,
    Busy,
    Done(Result<Cel, String>),
}

/// Evaluates the expressions of one invocation (policy, binding, param):
/// one activation, the variables evaluated on first use, one budget.
pub struct Evaluator<'p> {
    variables: &'p [(String, Expression)],
    slots: Vec<Slot>,
    activation: Activation,
    remaining: u64,
}

impl<'p> Evaluator<'p> {
    /// An evaluator over `inputs` with `params`, for a policy whose
    /// variables are `variables`.
    pub fn new(inputs: &Inputs, params: Option<&Value>, variables: &'p [(String, Expression)]) -> Self {
        let mut activation = Activation::new();
        activation.bind("object", inputs.object.clone());
        activation.bind("oldObject", inputs.old_object.clone());
        activation.bind("request", inputs.request.clone());
        activation.bind("namespaceObject", inputs.namespace_object.clone());
        activation.bind("params", params.map_or(Cel::Null, crate::cel::to_cel));
        if let Some(a) = &inputs.authorizer {
            activation.bind("authorizer", a.clone());
        }
        activation.bind("variables", Cel::Map(Map { map: Arc::new(HashMap::new()) }));
        Evaluator { variables, slots: vec![Slot::Pending; variables.len()], activation, remaining: RUNTIME_BUDGET }
    }

    /// Evaluates `e`.
    ///
    /// # Errors
    /// kube's messages: `compilation error: …`, `expression 'e' resulted
    /// in error: …` (a variable's failure included), `validation failed
    /// due to running out of cost budget, no further validation rules will
    /// be run`.
    pub fn eval(&mut self, e: &Expression) -> Result<Cel, String> {
        self.eval_raw(e).map_err(|err| match err {
            Failure::Compile(m) => format!("compilation error: {m}"),
            Failure::OutOfBudget => "validation failed due to running out of cost budget, no further validation rules will be run".to_string(),
            Failure::Eval(m) => format!("expression '{}' resulted in error: {m}", e.source),
        })
    }

    fn eval_raw(&mut self, e: &Expression) -> Result<Cel, Failure> {
        let program = e.program.as_ref().map_err(|m| Failure::Compile(m.clone()))?;
        for name in &e.variables {
            if let Some(Err(m)) = self.variable(name) {
                return Err(Failure::Eval(m));
            }
        }
        if self.remaining == 0 {
            return Err(Failure::OutOfBudget);
        }
        let mut budget = Budget::new(self.remaining.min(PER_CALL_LIMIT));
        let before = budget.remaining;
        let r = program.eval(&self.activation, &mut budget);
        self.remaining -= before - budget.remaining;
        match r {
            Ok(v) => Ok(v),
            Err(EvalError::CostLimit) if self.remaining == 0 => Err(Failure::OutOfBudget),
            Err(err) => Err(Failure::Eval(err.to_string())),
        }
    }

    /// Evaluates variable `name` if not done yet, and rebinds `variables`;
    /// `None` when the policy has no such variable.
    fn variable(&mut self, name: &str) -> Option<Result<(), String>> {
        let i = self.variables.iter().position(|(n, _)| n == name)?;
        match &self.slots[i] {
            Slot::Done(r) => return Some(r.as_ref().map(|_| ()).map_err(String::clone)),
            Slot::Busy => return Some(Err(format!("composited variable {name:?} refers to itself"))),
            Slot::Pending => {}
        }
        self.slots[i] = Slot::Busy;
        let vars = self.variables;
        let expr = &vars[i].1;
        let r = match self.eval_raw(expr) {
            Ok(v) => Ok(v),
            Err(Failure::Compile(m)) => Err(format!("composited variable {name:?} fails to compile: {m}")),
            Err(Failure::Eval(m)) => Err(format!("composited variable {name:?} fails to evaluate: {m}")),
            Err(Failure::OutOfBudget) => Err(format!("composited variable {name:?} fails to evaluate: operation cancelled: actual cost limit exceeded")),
        };
        let out = r.as_ref().map(|_| ()).map_err(String::clone);
        self.slots[i] = Slot::Done(r);
        let map: HashMap<Key, Cel> =
            self.variables.iter().zip(&self.slots).filter_map(|((n, _), s)| if let Slot::Done(Ok(v)) = s { Some((Key::String(Arc::new(n.clone())), v.clone())) } else { None }).collect();
        self.activation.bind("variables", Cel::Map(Map { map: Arc::new(map) }));
        Some(out)
    }

    /// Evaluates the match conditions (kube's `matchconditions.Matcher`):
    /// `Ok(false)` when one is false; errors, when none is false, joined
    /// as kube's aggregate prints them (`a` or `[a, b]`).
    ///
    /// # Errors
    /// The joined errors.
    pub fn match_conditions(&mut self, conditions: &[(String, Expression)]) -> Result<bool, String> {
        let mut errors = Vec::new();
        let mut matched = true;
        for (_, c) in conditions {
            match self.eval(c) {
                Ok(Cel::Bool(false)) => matched = false,
                Ok(Cel::Bool(true)) => {}
                Ok(other) => errors.push(format!("expression '{}' resulted in error: expected a bool, got {}", c.source, crate::cel::type_name(&other))),
                Err(e) => errors.push(e),
            }
        }
        if !matched {
            return Ok(false);
        }
        match errors.len() {
            0 => Ok(true),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

enum Failure {
    Compile(String),
    Eval(String),
    OutOfBudget,
}

/// kube's `admission.NewForbidden` for a policy's denial: 403
/// `<resource> "<name>" is forbidden: <message>` with the resource and
/// name as details; the name is the object's (`generateName` for a create
/// without one), else `Unknown`.
pub fn forbidden(attrs: &Attributes<'_>, message: &str) -> Status {
    let name = if !attrs.name.is_empty() {
        attrs.name.to_string()
    } else {
        let obj = attrs.object.as_ref().unwrap_or(&Value::Null);
        let n = crate::meta::name(obj);
        let g = obj["metadata"]["generateName"].as_str().unwrap_or("");
        if !n.is_empty() {
            n.to_string()
        } else if !g.is_empty() {
            g.to_string()
        } else {
            "Unknown".to_string()
        }
    };
    Status::forbidden_because(attrs.resource.group, attrs.resource.resource, &name, message)
}

/// The HTTP code of a denial's reason (kube's `reasonToCode`).
pub fn reason_code(reason: &str) -> u16 {
    match reason {
        "Unauthorized" => 401,
        "Invalid" => 422,
        "RequestEntityTooLarge" => 413,
        _ => 403,
    }
}

/// Adds a cause with only a message to `status`.
pub fn add_cause(status: &mut Status, message: &str) {
    let cause = Cause { message: message.to_string(), ..Default::default() };
    status.details.get_or_insert_with(Default::default).causes.push(cause);
}

pub use super::cel_authorizer::run;

/// A store of fixed objects for the plugins' tests: reads only.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;

    use async_trait::async_trait;
    use serde_json::Value;

    use crate::storage::{Error, ListOptions, ListResult, Preconditions, Result, Storage, TryUpdate, WatchOptions, WatchStream};

    /// Objects by key.
    pub struct Fixed(pub BTreeMap<String, Value>);

    #[async_trait]
    impl Storage for Fixed {
        async fn get(&self, key: &str) -> Result<Value> {
            self.0.get(key).cloned().ok_or(Error::NotFound)
        }
        async fn list(&self, prefix: &str, _opts: &ListOptions) -> Result<ListResult> {
            Ok(ListResult { items: self.0.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v.clone()).collect(), ..Default::default() })
        }
        async fn create(&self, _key: &str, _obj: Value) -> Result<Value> {
            Err(Error::Unavailable("read-only test store".into()))
        }
        async fn guaranteed_update(&self, _key: &str, _p: &Preconditions, _u: &mut dyn TryUpdate) -> Result<Value> {
            Err(Error::Unavailable("read-only test store".into()))
        }
        async fn delete(&self, _key: &str, _p: &Preconditions) -> Result<Value> {
            Err(Error::Unavailable("read-only test store".into()))
        }
        async fn watch(&self, _key: &str, _opts: &WatchOptions) -> Result<WatchStream> {
            Err(Error::Unavailable("read-only test store".into()))
        }
        async fn current_revision(&self) -> Result<i64> {
            Ok(1)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kinds_to_resources_as_kube_guesses() {
        assert_eq!(guess_resource("ConfigMap"), "configmaps");
        assert_eq!(guess_resource("Ingress"), "ingresses");
        assert_eq!(guess_resource("NetworkPolicy"), "networkpolicies");
    }

    #[test]
    fn variables_are_lazy_and_fail_only_their_readers() {
        let vars = vec![
            ("a".to_string(), Expression::compile("object.spec.replicas * 2")),
            ("b".to_string(), Expression::compile("variables.a + 1")),
            ("bad".to_string(), Expression::compile("object.nope")),
        ];
        let inputs = Inputs { object: crate::cel::to_cel(&json!({"spec": {"replicas": 3}})), old_object: Cel::Null, request: Cel::Null, namespace_object: Cel::Null, authorizer: None };
        let mut ev = Evaluator::new(&inputs, None, &vars);
        assert_eq!(ev.eval(&Expression::compile("variables.b")), Ok(Cel::Int(7)));
        let err = ev.eval(&Expression::compile("variables.bad == 1")).unwrap_err();
        assert!(err.starts_with("expression 'variables.bad == 1' resulted in error: composited variable \"bad\" fails to evaluate: "), "{err}");
        assert_eq!(ev.eval(&Expression::compile("variables.a")), Ok(Cel::Int(6)));
        assert!(ev.eval(&Expression::compile("1 +")).unwrap_err().starts_with("compilation error: compilation failed: "));
        let conds = vec![("x".to_string(), Expression::compile("object.nope")), ("y".to_string(), Expression::compile("false"))];
        assert_eq!(ev.match_conditions(&conds), Ok(false));
        assert!(ev.match_conditions(&conds[..1]).is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_authorizer_is_asked_only_on_the_blocking_pool() {
        let user = crate::authn::UserInfo { name: "alice".into(), ..Default::default() };
        let checker = Arc::new(crate::admission::cel_authorizer::AuthzChecker { user, authorizer: Arc::new(crate::authz::always::AlwaysAllow), runtime: tokio::runtime::Handle::current() });
        let authorizer = crate::cel::authorizer::variable(checker, Default::default());
        let eval = move || {
            let mut a = Activation::new();
            a.bind("authorizer", authorizer.clone());
            let p = crate::cel::Program::compile("authorizer.serviceAccount('ns', 'sa').path('/x').check('get')").map_err(|e| e.to_string())?;
            let d = p.eval(&a, &mut Budget::new(PER_CALL_LIMIT)).map_err(|e| e.to_string())?;
            let mut a2 = Activation::new();
            a2.bind("d", d);
            let p = crate::cel::Program::compile("[d.allowed(), d.errored()]").map_err(|e| e.to_string())?;
            p.eval(&a2, &mut Budget::new(PER_CALL_LIMIT)).map_err(|e| e.to_string()).and_then(|v| crate::cel::to_json(&v))
        };
        let e2 = eval.clone();
        assert_eq!(run(true, eval).await.ok(), Some(Ok(json!([true, false]))));
        assert_eq!(run(false, e2).await.ok(), Some(Ok(json!([false, true]))));
    }

    #[tokio::test]
    async fn params_by_name_selector_and_not_found_action() {
        let cm = |ns: &str, name: &str, tier: &str| json!({"metadata": {"name": name, "namespace": ns, "labels": {"tier": tier}}, "data": {"max": "3"}});
        let mut objs = std::collections::BTreeMap::new();
        objs.insert("/registry/configmaps/default/limits".to_string(), cm("default", "limits", "a"));
        objs.insert("/registry/configmaps/default/other".to_string(), cm("default", "other", "b"));
        objs.insert("/registry/configmaps/ops/limits".to_string(), cm("ops", "limits", "a"));
        let store = testing::Fixed(objs);
        let kind = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        let binding = |r: Value| json!({"spec": {"paramRef": r}});
        let names = |ps: Vec<Option<Value>>| ps.into_iter().map(|p| p.map(|p| format!("{}/{}", crate::meta::namespace(&p), crate::meta::name(&p))).unwrap_or_default()).collect::<Vec<_>>();
        let got = collect_params(&store, Some(&kind), &binding(json!({"name": "limits"})), "default").await;
        assert_eq!(got.map(names), Ok(vec!["default/limits".to_string()]));
        let got = collect_params(&store, Some(&kind), &binding(json!({"name": "limits", "namespace": "ops"})), "default").await;
        assert_eq!(got.map(names), Ok(vec!["ops/limits".to_string()]));
        let got = collect_params(&store, Some(&kind), &binding(json!({"selector": {"matchLabels": {"tier": "a"}}})), "default").await;
        assert_eq!(got.map(names), Ok(vec!["default/limits".to_string()]));
        let got = collect_params(&store, Some(&kind), &binding(json!({"name": "gone"})), "default").await;
        assert_eq!(got.map(names), Ok(vec![]));
        let got = collect_params(&store, Some(&kind), &binding(json!({"name": "gone", "parameterNotFoundAction": "Deny"})), "default").await;
        assert_eq!(got.map(names), Err("no params found for policy binding with `Deny` parameterNotFoundAction".to_string()));
        assert_eq!(collect_params(&store, None, &binding(json!({"name": "gone"})), "default").await.map(names), Ok(vec![String::new()]));
    }

    /// Until the policies, bindings and namespaces have listed, the policy
    /// plugins (and the webhooks) take every write, wait for the copies up
    /// to kube's 10 s and then refuse it with kube's 403; writes of
    /// policies themselves pass; once the copies are in, writes are
    /// evaluated as usual.
    #[tokio::test]
    async fn plugins_refuse_writes_until_their_copies_have_listed() {
        use crate::admission::sources::Fixed;
        use crate::admission::{Kind, Mutating, Operation, Resource, Validating};

        let sources = Sources::new();
        let storage: Arc<dyn Storage> = Arc::new(testing::Fixed(Default::default()));
        let allow: Arc<dyn crate::authz::Authorizer> = Arc::new(crate::authz::always::AlwaysAllow);
        let vap = validating::ValidatingAdmissionPolicy::new(sources.clone(), storage.clone(), allow.clone(), crate::schema::SchemaStore::builtin());
        let map = mutating::MutatingAdmissionPolicy::new(sources.clone(), storage.clone(), allow.clone(), crate::schema::SchemaStore::builtin());
        let hooks = crate::admission::webhook::config::Hooks::new(sources.clone(), allow, false);
        let req = crate::admission::testing::TestRequest::default();
        let attrs = |group: &'static str, resource: &'static str, kind: &'static str, name: &'static str| {
            req.create(
                Resource { group, version: "v1", resource },
                Kind { group, version: "v1", kind },
                name,
                "default",
                json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": 1}}),
            )
        };
        assert!(vap.handles(Operation::Create) && map.handles(Operation::Create) && hooks.handles(Operation::Create), "not ready: every write reaches the plugins");
        let deployment = attrs("apps", "deployments", "Deployment", "web");
        let mut mutated = attrs("apps", "deployments", "Deployment", "web");
        let began = std::time::Instant::now();
        let (v, m, w) = tokio::join!(vap.validate(&deployment), map.admit(&mut mutated), crate::admission::webhook::dispatch::wait_ready(&hooks, &deployment));
        assert!(began.elapsed() >= crate::admission::sources::WAIT_FOR_READY, "the plugins waited for the copies first");
        for refusal in [v, m, w] {
            let err = refusal.unwrap_err();
            assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
            assert_eq!(err.message, r#"deployments.apps "web" is forbidden: not yet ready to handle request"#);
        }
        // Policies and bindings are written without waiting (kube ignores
        // them in the policy plugins).
        let policy = attrs(GROUP, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", "p");
        assert!(vap.validate(&policy).await.is_ok());

        // The feed plugs in listed copies: writes are evaluated at once.
        sources.set(GROUP, "validatingadmissionpolicies", Fixed::of([]));
        sources.set(GROUP, "validatingadmissionpolicybindings", Fixed::of([]));
        sources.set("", "namespaces", Fixed::of([json!({"metadata": {"name": "default"}})]));
        assert!(!vap.handles(Operation::Create), "ready, and no policy: writes skip the plugin");
        assert!(vap.validate(&deployment).await.is_ok());
        // Resources the feed does not serve count as listed once it is done.
        assert!(map.handles(Operation::Create));
        sources.mark_fed();
        assert!(!map.handles(Operation::Create));
        assert!(map.admit(&mut mutated).await.is_ok());
        assert!(crate::admission::webhook::dispatch::wait_ready(&hooks, &deployment).await.is_ok());
    }
}
