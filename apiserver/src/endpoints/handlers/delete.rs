//! DELETE and DELETECOLLECTION (kube `handlers/delete.go` and the generic
//! store's `Delete`).
//!
//! An object with finalizers is not removed: it gets `deletionTimestamp`
//! (202 Accepted with the object) and goes once an update empties its
//! finalizers. Otherwise it is removed (200 with a Success Status).
//! Namespaces turn `Terminating`; [`crate::controllers::namespace`] then
//! empties and removes them.

use std::sync::Arc;

use serde_json::Value;

use super::list::predicate;
use super::Scope;
use crate::endpoints::{negotiation, responses, Response};
use crate::errors::Status;
use crate::meta;
use crate::storage::{ListOptions, Preconditions, Update};

/// The parts of `DeleteOptions` that matter here.
#[derive(Debug, Default)]
struct DeleteOptions {
    preconditions: Preconditions,
    dry_run: bool,
}

/// Reads `DeleteOptions` as kube's delete handler does: from the body when
/// there is one, otherwise from the query (`propagationPolicy`,
/// `orphanDependents`, `gracePeriodSeconds`, `dryRun`), then checks them
/// as `ValidateDeleteOptions`.
///
/// # Errors
/// 400 for an undecodable body or query value; 422 Invalid on
/// `DeleteOptions.meta.k8s.io` for a bad propagationPolicy, both
/// orphanDependents and propagationPolicy, or a dryRun other than `All`.
async fn delete_options(scope: &mut Scope) -> Result<DeleteOptions, Status> {
    use crate::errors::Cause;
    let bytes = scope.body_bytes().await?;
    let v: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        let q = &scope.query;
        let mut m = serde_json::Map::new();
        if let Some(pp) = q.get("propagationPolicy") {
            m.insert("propagationPolicy".into(), pp.into());
        }
        if q.get("orphanDependents").is_some() {
            m.insert("orphanDependents".into(), q.flag("orphanDependents").into());
        }
        if let Some(g) = q.get("gracePeriodSeconds") {
            let g: i64 = g.parse().map_err(|_| Status::bad_request(format!("strconv.ParseInt: parsing {g:?}: invalid syntax")))?;
            m.insert("gracePeriodSeconds".into(), g.into());
        }
        let dry: Vec<Value> = q.all("dryRun").into_iter().map(Value::from).collect();
        if !dry.is_empty() {
            m.insert("dryRun".into(), Value::Array(dry));
        }
        Value::Object(m)
    } else {
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| Status::bad_request(format!("the body of the request could not be decoded as DeleteOptions: {e}")))?;
        if !v.is_object() {
            return Err(Status::bad_request("DeleteOptions must be a JSON object"));
        }
        v
    };
    let mut causes = Vec::new();
    let policy = &v["propagationPolicy"];
    if !policy.is_null() && !v["orphanDependents"].is_null() {
        causes.push(Cause::invalid("propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be both set"));
    }
    if !policy.is_null() && !matches!(policy.as_str(), Some("Foreground" | "Background" | "Orphan")) {
        causes.push(Cause::not_supported("propagationPolicy", &go_value(policy), &["Foreground", "Background", "Orphan", "nil"]));
    }
    let dry: Vec<&Value> = v["dryRun"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    if dry.iter().any(|d| *d != "All") {
        let shown: Vec<String> = dry.iter().map(|d| go_value(d)).collect();
        causes.push(Cause::not_supported("dryRun", &format!("[]string{{{}}}", shown.join(", ")), &["All"]));
    }
    if !causes.is_empty() {
        return Err(Status::invalid("meta.k8s.io", "DeleteOptions", "", causes));
    }
    let mut opts = DeleteOptions { dry_run: !dry.is_empty(), ..Default::default() };
    let p = &v["preconditions"];
    opts.preconditions.uid = p["uid"].as_str().map(String::from);
    opts.preconditions.resource_version = p["resourceVersion"].as_str().map(String::from);
    Ok(opts)
}

/// A JSON value as Go's `%q`/`%v` prints it in field errors.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// Namespaces kube never deletes (`default`, `kube-system`, `kube-public`).
const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Deletes one object: (object or Status, removed now?).
async fn delete_one(scope: &Scope, key: &str, name: &str, opts: &DeleteOptions) -> Result<(Value, bool), Status> {
    let is_namespace = scope.resource.resource == "namespaces" && scope.resource.group.is_empty();
    if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
        // kube's NamespaceLifecycle admission.
        return Err(Status::forbidden("", "namespaces", name, format!("namespaces {name:?} is forbidden: this namespace may not be deleted")));
    }
    let mut removed = false;
    let mut dry: Option<Value> = None;
    let mut f = |cur: Option<Value>| -> Result<Update, Status> {
        let Some(mut obj) = cur else { return Ok(Update::Unchanged) };
        let ns_finalizers = is_namespace && obj["spec"]["finalizers"].as_array().is_some_and(|a| !a.is_empty());
        if meta::has_finalizers(&obj) || ns_finalizers {
            if meta::is_deleting(&obj) {
                return Ok(Update::Unchanged);
            }
            if let Some(m) = meta::meta_mut(&mut obj) {
                m.insert("deletionTimestamp".into(), Value::String(meta::now()));
                m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
            }
            if is_namespace {
                obj["status"]["phase"] = Value::String("Terminating".into());
            }
            if opts.dry_run {
                dry = Some(obj);
                return Ok(Update::Unchanged);
            }
            removed = false;
            return Ok(Update::Put(obj));
        }
        removed = true;
        if opts.dry_run {
            dry = Some(obj);
            return Ok(Update::Unchanged);
        }
        Ok(Update::Delete)
    };
    let r = scope.storage.guaranteed_update(key, &opts.preconditions, &mut f).await;
    let obj = match dry {
        Some(o) => o,
        None => r.map_err(|e| scope.storage_error(e, name))?,
    };
    if is_namespace && !removed && !opts.dry_run {
        crate::controllers::namespace::spawn_cleanup(scope.state.clone(), name.to_string());
    }
    Ok((obj, removed))
}

/// Handles `delete`.
///
/// # Errors
/// 404; 409 when a precondition fails.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    let opts = delete_options(&mut scope).await?;
    let name = scope.info.name.clone();
    let (obj, removed) = delete_one(&scope, &scope.key(), &name, &opts).await?;
    if removed {
        let r = &scope.resource;
        let s = Status::success(r.group, r.resource, &name, meta::meta_str(&obj, "uid"));
        return Ok(responses::json(200, &s.to_value()));
    }
    Ok(scope.respond_object(202, obj))
}

/// Handles `deletecollection`: deletes every object matching the selectors;
/// returns the list of deleted objects.
///
/// # Errors
/// 400 for bad selectors.
pub async fn collection(mut scope: Scope) -> Result<Response, Status> {
    let opts = delete_options(&mut scope).await?;
    let list = scope
        .state
        .storage
        .list(&scope.prefix(), &ListOptions { predicate: predicate(&scope)?, ..Default::default() })
        .await
        .map_err(|e| scope.storage_error(e, ""))?;
    let mut deleted = Vec::new();
    for item in list.items {
        let name = meta::name(&item).to_string();
        let key = scope.resource.key(meta::namespace(&item), &name);
        match delete_one(&scope, &key, &name, &opts).await {
            Ok((obj, removed)) => deleted.push(if removed { item } else { obj }),
            Err(s) if s.is_not_found() => {}
            Err(s) => return Err(s),
        }
    }
    let v = negotiation::list(&scope.resource, deleted, &list.revision.to_string(), None);
    Ok(responses::json(200, &v))
}

/// Deletes every object of every namespaced resource in `namespace`;
/// returns how many remain (held by finalizers).
///
/// # Errors
/// Storage errors.
pub async fn delete_namespace_content(state: &Arc<crate::endpoints::ApiState>, namespace: &str) -> Result<usize, crate::storage::Error> {
    let mut remaining = 0;
    for res in state.registry.namespaced() {
        let prefix = res.prefix(Some(namespace));
        let list = state.storage.list(&prefix, &ListOptions::default()).await?;
        for item in list.items {
            let key = res.key(namespace, meta::name(&item));
            if meta::has_finalizers(&item) {
                remaining += 1;
                if !meta::is_deleting(&item) {
                    let mut f = |cur: Option<Value>| -> Result<Update, Status> {
                        let Some(mut o) = cur else { return Ok(Update::Unchanged) };
                        if !meta::has_finalizers(&o) {
                            return Ok(Update::Delete);
                        }
                        if let Some(m) = meta::meta_mut(&mut o) {
                            m.insert("deletionTimestamp".into(), Value::String(meta::now()));
                            m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
                        }
                        Ok(Update::Put(o))
                    };
                    let _ = state.storage.guaranteed_update(&key, &Preconditions::default(), &mut f).await;
                }
                continue;
            }
            match state.storage.delete(&key, &Preconditions::default()).await {
                Ok(_) | Err(crate::storage::Error::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(remaining)
}
