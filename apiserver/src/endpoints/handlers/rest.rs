//! What every write does to an object before it is stored (kube
//! `registry/rest/create.go` `BeforeCreate` and `update.go` `BeforeUpdate`).

use serde_json::{Map, Value};

use super::Scope;
use crate::errors::{Cause, Details, Status};
use crate::meta;
use crate::registry::validation;
use crate::storage::Update;

fn not_an_object() -> Status {
    Status::bad_request("the body of the request must be a JSON object")
}

/// Fills in or checks `apiVersion` and `kind` against the endpoint.
fn check_type_meta(scope: &Scope, obj: &mut Value) -> Result<(), Status> {
    let r = &scope.resource;
    let want_av = r.api_version();
    let o = obj.as_object_mut().ok_or_else(not_an_object)?;
    match o.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("apiVersion".into(), Value::String(want_av.clone()));
        }
        Some(av) if av != want_av => {
            return Err(Status::bad_request(format!("the API version in the data ({av}) does not match the expected API version ({want_av})")));
        }
        _ => {}
    }
    match o.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("kind".into(), Value::String(r.kind.to_string()));
        }
        Some(k) if k != r.kind => {
            return Err(Status::bad_request(format!("{} in version {:?} cannot be handled as a {}: the kind in the data does not match", k, r.version, r.kind)));
        }
        _ => {}
    }
    Ok(())
}

/// Sets or checks `metadata.namespace` against the URL.
fn check_namespace(scope: &Scope, obj: &mut Value) -> Result<(), Status> {
    let url_ns = scope.info.namespace.clone();
    let m = meta::meta_mut(obj).ok_or_else(not_an_object)?;
    if scope.resource.namespaced {
        match m.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                m.insert("namespace".into(), Value::String(url_ns));
            }
            Some(ns) if ns != url_ns => {
                return Err(Status::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
            }
            _ => {}
        }
    } else {
        m.remove("namespace");
    }
    Ok(())
}

/// Checks value types and drops the fields the type's schema does not
/// declare, as kube's decoder does, and applies `fieldValidation` to the
/// dropped ones: Strict fails, Warn adds a warning per field, Ignore says
/// nothing. Empty or null map fields are dropped, as Go's `omitempty`
/// encodes them. Types without a schema keep every field.
///
/// # Errors
/// 400 for a value of the wrong JSON type (always); 400 strict decoding
/// error; 422 for a bad `fieldValidation` value.
pub fn prune_unknown_fields(scope: &Scope, obj: &mut Value) -> Result<(), Status> {
    let directive = scope.query.field_validation(scope.options_kind())?;
    let r = &scope.resource;
    let Some(schema) = scope.state.schemas.of_kind(r.group, r.version, r.kind) else { return Ok(()) };
    if let Some(e) = schema.type_error(obj) {
        return Err(Status::bad_request(format!("{} in version {:?} cannot be handled as a {}: {e}", r.kind, r.version, r.kind)));
    }
    let unknown: Vec<String> = schema.prune(obj).iter().map(|p| format!("unknown field {p:?}")).collect();
    schema.drop_empty_maps(obj);
    report_field_errors(scope, directive, unknown)
}

/// Applies `fieldValidation` to field errors (`unknown field "x"`,
/// `duplicate field "y"`): Strict fails with all of them, Warn adds one
/// warning each, Ignore drops them.
///
/// # Errors
/// 400 strict decoding error.
pub fn report_field_errors(scope: &Scope, directive: crate::openapi::fields::FieldValidation, errors: Vec<String>) -> Result<(), Status> {
    use crate::openapi::fields::FieldValidation;
    if errors.is_empty() {
        return Ok(());
    }
    match directive {
        FieldValidation::Strict => Err(Status::strict_decoding(scope.resource.kind, scope.resource.version, &errors)),
        FieldValidation::Warn => {
            errors.into_iter().for_each(|e| scope.warnings.add(e));
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

fn validate(scope: &Scope, obj: &Value, old: Option<&Value>) -> Result<(), Status> {
    let r = &scope.resource;
    let mut causes = validation::object_meta(obj, r.strategy.name_rule(), r.namespaced);
    causes.extend(match old {
        Some(old) => r.strategy.validate_update(obj, old),
        None => r.strategy.validate(obj),
    });
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(r.group, r.kind, meta::name(obj), causes))
    }
}

/// Prepares a new object: type and namespace, generated name, uid,
/// creation timestamp, generation, defaults, strategy, validation.
///
/// # Errors
/// 400 for mismatched type or namespace, 422 Invalid, 500 when a
/// resourceVersion is set (kube's wording).
pub fn before_create(scope: &Scope, obj: &mut Value) -> Result<(), Status> {
    validate_field_manager(scope)?;
    check_type_meta(scope, obj)?;
    prune_unknown_fields(scope, obj)?;
    check_namespace(scope, obj)?;
    let strategy = &scope.resource.strategy;
    {
        let m = meta::meta_mut(obj).ok_or_else(not_an_object)?;
        if m.get("resourceVersion").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
            return Err(Status::internal("resourceVersion should not be set on objects to be created"));
        }
        let name_empty = m.get("name").and_then(Value::as_str).is_none_or(str::is_empty);
        if name_empty {
            if let Some(g) = m.get("generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
                let n = meta::generate_name(g);
                m.insert("name".into(), Value::String(n));
            }
        }
        m.insert("uid".into(), Value::String(meta::new_uid()));
        m.insert("creationTimestamp".into(), Value::String(meta::now()));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("selfLink");
        if strategy.has_generation() {
            m.insert("generation".into(), Value::from(1));
        } else {
            m.remove("generation");
        }
    }
    strategy.default(obj);
    // Fields are tracked after defaulting and before the strategy, as kube's
    // create handler does: defaults count as the request's, fields the
    // server generates (a Job's selector) do not.
    track_managed_fields(scope, None, obj);
    strategy.prepare_for_create(obj);
    validate(scope, obj, None)
}

/// Checks the `fieldManager` query parameter as kube does
/// (`ValidateFieldManager`): at most 128 bytes, printable characters only.
///
/// # Errors
/// 422 Invalid on `CreateOptions`, `UpdateOptions` or `PatchOptions` of
/// group `meta.k8s.io`, per the request's verb.
pub fn validate_field_manager(scope: &Scope) -> Result<(), Status> {
    let Some(m) = scope.query.get("fieldManager") else { return Ok(()) };
    let cause = if m.len() > 128 {
        Cause::too_long("fieldManager", 128)
    } else if m.chars().any(char::is_control) {
        Cause::invalid("fieldManager", &Value::String(m.to_string()), "must only contain printable characters")
    } else {
        return Ok(());
    };
    Err(Status::invalid("meta.k8s.io", scope.options_kind(), "", vec![cause]))
}

/// Records the request's manager in `metadata.managedFields` (operation
/// `Update`; see [`crate::fieldmanager`]).
fn track_managed_fields(scope: &Scope, old: Option<&Value>, new: &mut Value) {
    use crate::fieldmanager::{self, Scope as Part};
    let r = &scope.resource;
    let schema = scope.state.schemas.of_kind(r.group, r.version, r.kind);
    let user_agent = scope.req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok());
    let manager = fieldmanager::manager_name(scope.query.get("fieldManager"), user_agent);
    let subresource = scope.info.subresource.as_str();
    let part = if subresource == "status" {
        Part::StatusOnly
    } else if r.subresources.contains(&"status") {
        Part::NoStatus
    } else {
        Part::All
    };
    let api_version = r.api_version();
    let now = meta::now();
    fieldmanager::update(schema.as_ref(), old, new, &fieldmanager::Request { manager: &manager, api_version: &api_version, subresource, scope: part, now: &now });
}

/// Checks that `namespace` exists and is not terminating, before creating
/// in it (kube's NamespaceLifecycle admission).
///
/// # Errors
/// 404 for a missing namespace, 403 for a terminating one.
pub async fn ensure_namespace(scope: &Scope, namespace: &str) -> Result<(), Status> {
    if !scope.resource.namespaced {
        return Ok(());
    }
    let key = crate::storage::keys::namespace(namespace);
    match scope.state.storage.get(&key).await {
        Ok(ns) => {
            if meta::is_deleting(&ns) || ns["status"]["phase"] == "Terminating" {
                let msg = format!("unable to create new content in namespace {namespace} because it is being terminated");
                let mut s = Status::forbidden(scope.resource.group, scope.resource.resource, "", msg.clone());
                s.details = Some(Details {
                    group: scope.resource.group.into(),
                    kind: scope.resource.resource.into(),
                    causes: vec![Cause { reason: "NamespaceTerminating".into(), message: msg, field: "metadata.namespace".into() }],
                    ..Default::default()
                });
                return Err(s);
            }
            Ok(())
        }
        Err(crate::storage::Error::NotFound) => Err(Status::not_found("", "namespaces", namespace)),
        Err(e) => Err(scope.storage_error(e, namespace)),
    }
}

/// Copies the system fields a client cannot change from `old` to `new`.
fn carry_system_meta(new: &mut Value, old: &Value) -> Result<(), Status> {
    let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
    let m = meta::meta_mut(new).ok_or_else(not_an_object)?;
    for f in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    Ok(())
}

fn without_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// Prepares an update of `old` to `new` (PUT, PATCH, status): type,
/// namespace and name checks, the resourceVersion precondition, immutable
/// system fields, strategy, generation bump, validation. Returns what to
/// write; an object whose last finalizer went away while it was being
/// deleted is deleted.
///
/// # Errors
/// 409 Conflict for a stale resourceVersion, 400 and 422 as for create.
pub fn before_update(scope: &Scope, mut new: Value, old: &Value) -> Result<Update, Status> {
    let r = &scope.resource;
    validate_field_manager(scope)?;
    check_type_meta(scope, &mut new)?;
    prune_unknown_fields(scope, &mut new)?;
    check_namespace(scope, &mut new)?;
    let name = meta::name(old).to_string();
    let new_name = meta::name(&new).to_string();
    if new_name.is_empty() {
        if let Some(m) = meta::meta_mut(&mut new) {
            m.insert("name".into(), Value::String(name.clone()));
        }
    } else if new_name != name {
        return Err(Status::bad_request(format!("the name of the object ({new_name}) does not match the name on the URL ({name})")));
    }
    let new_rv = meta::resource_version(&new).to_string();
    let old_rv = meta::resource_version(old).to_string();
    if !new_rv.is_empty() && new_rv != old_rv {
        return Err(Status::optimistic_lock(r.group, r.resource, &name));
    }
    let new_uid = meta::meta_str(&new, "uid").to_string();
    if !new_uid.is_empty() && new_uid != meta::meta_str(old, "uid") {
        return Err(Status::invalid(r.group, r.kind, &name, vec![Cause::invalid("metadata.uid", &Value::String(new_uid), "field is immutable")]));
    }

    if scope.info.subresource == "status" {
        // Only status changes through /status (kube's status strategies).
        let mut merged = old.clone();
        match new.get("status") {
            Some(s) => merged["status"] = s.clone(),
            None => {
                if let Some(o) = merged.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        new = merged;
        track_managed_fields(scope, Some(old), &mut new);
    } else {
        carry_system_meta(&mut new, old)?;
        r.strategy.default(&mut new);
        track_managed_fields(scope, Some(old), &mut new);
        r.strategy.prepare_for_update(&mut new, old);
        if r.strategy.has_generation() {
            let gen = old["metadata"]["generation"].as_i64().unwrap_or(1);
            let changed = new.get("spec") != old.get("spec");
            if let Some(m) = meta::meta_mut(&mut new) {
                m.insert("generation".into(), Value::from(if changed { gen + 1 } else { gen }));
            }
        }
    }
    if let Some(m) = meta::meta_mut(&mut new) {
        m.insert("resourceVersion".into(), Value::String(old_rv));
    }
    validate(scope, &new, Some(old))?;
    if without_rv(&new) == without_rv(old) {
        return Ok(Update::Unchanged);
    }
    if meta::is_deleting(&new) && !meta::has_finalizers(&new) {
        return Ok(Update::Delete);
    }
    Ok(Update::Put(new))
}

/// An empty JSON object.
pub fn empty_object() -> Value {
    Value::Object(Map::new())
}
