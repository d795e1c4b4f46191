//! DELETE and DELETECOLLECTION (kube `handlers/delete.go`): reads the
//! `DeleteOptions` and asks the REST object. What a delete does (graceful
//! deletion, finalizers, a namespace turning `Terminating`) is the generic
//! store's business.

use serde_json::Value;

use super::list::list_options;
use super::Scope;
use crate::endpoints::{negotiation, responses, Response};
use crate::errors::Status;
use crate::meta;
use crate::registry::rest::DeleteOptions;

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
        if let Some(audit) = crate::audit::AuditContext::of(scope.req.extensions()) {
            audit.log_request_object(&v);
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
    opts.raw = v.clone();
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

/// Handles `delete`.
///
/// # Errors
/// 403 (admission), 404; 409 when a precondition fails.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    let opts = delete_options(&mut scope).await?;
    let deleter = scope.rest.deleter().ok_or_else(Status::method_not_allowed)?;
    let (obj, removed) = deleter.delete(&scope.context(), &scope.info.name, &opts).await?;
    if removed {
        let r = scope.resource();
        let s = Status::success(&r.group, &r.resource, &scope.info.name, meta::meta_str(&obj, "uid"));
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
    let list = list_options(&scope, crate::storage::ListOptions::default())?;
    let deleter = scope.rest.collection_deleter().ok_or_else(Status::method_not_allowed)?;
    let (deleted, revision) = deleter.delete_collection(&scope.context(), &opts, &list).await?;
    let v = negotiation::list(scope.resource(), deleted, &revision.to_string(), None);
    Ok(responses::json(200, &v))
}
