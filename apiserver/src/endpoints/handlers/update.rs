//! UPDATE (kube `handlers/update.go`): PUT of a whole object, and of the
//! `status` and `scale` subresources. A stale `metadata.resourceVersion`
//! gives 409 Conflict with kube's optimistic-lock message.

use serde_json::{json, Value};

use super::{rest, Scope};
use crate::endpoints::Response;
use crate::errors::Status;
use crate::meta;
use crate::selectors::LabelSelector;
use crate::storage::{Preconditions, Update};

/// An object as an `autoscaling/v1` Scale.
pub fn to_scale(obj: &Value) -> Value {
    let m = &obj["metadata"];
    let sel = LabelSelector::from_object(&obj["spec"]["selector"]);
    let selector: Vec<String> = sel
        .0
        .iter()
        .filter_map(|r| match r {
            crate::selectors::LabelRequirement::Equals(k, v, true) => Some(format!("{k}={v}")),
            _ => None,
        })
        .collect();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector.join(",")},
    })
}

/// Applies a Scale to its object: its replicas, under its resourceVersion.
///
/// # Errors
/// 400 for a Scale without `spec.replicas`; 422 Invalid on the Scale for
/// negative replicas.
pub fn from_scale(scale: &Value, old: &Value) -> Result<Value, Status> {
    let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| Status::bad_request("spec.replicas: Required value"))?;
    if replicas < 0 {
        // kube's `ValidateScale`, reported on the Scale, not its object.
        let cause = crate::errors::Cause::invalid("spec.replicas", &Value::from(replicas), "must be greater than or equal to 0");
        return Err(Status::invalid("autoscaling", "Scale", meta::name(old), vec![cause]));
    }
    let mut new = old.clone();
    new["spec"]["replicas"] = Value::from(replicas);
    let rv = meta::resource_version(scale);
    if !rv.is_empty() {
        new["metadata"]["resourceVersion"] = Value::String(rv.to_string());
    }
    Ok(new)
}

/// Runs a guaranteed update whose new object comes from `make(old)`, with
/// dry-run support. Returns (object, created).
///
/// # Errors
/// Whatever `make` or the update checks return; 404 if the object is missing
/// and the type does not create on update.
pub async fn apply_update(scope: &Scope, create_body: Option<Value>, make: &(dyn Fn(&Value) -> Result<Value, Status> + Sync)) -> Result<(Value, bool), Status> {
    let dry_run = scope.query.dry_run(scope.options_kind())?;
    let mut dry_result: Option<Value> = None;
    let mut created = false;
    let mut f = |cur: Option<Value>| -> Result<Update, Status> {
        let Some(old) = cur else {
            let Some(body) = &create_body else { return Err(scope.not_found()) };
            let mut obj = body.clone();
            if let Some(m) = meta::meta_mut(&mut obj) {
                m.remove("resourceVersion");
            }
            rest::before_create(scope, &mut obj)?;
            created = true;
            if dry_run {
                dry_result = Some(obj);
                return Ok(Update::Unchanged);
            }
            return Ok(Update::Put(obj));
        };
        let new = make(&old)?;
        let u = rest::before_update(scope, new, &old)?;
        if dry_run {
            dry_result = Some(match &u {
                Update::Put(o) => o.clone(),
                _ => old,
            });
            return Ok(Update::Unchanged);
        }
        Ok(u)
    };
    let r = scope.storage.guaranteed_update(&scope.key(), &Preconditions::default(), &mut f).await;
    if let Some(obj) = dry_result {
        return Ok((obj, created));
    }
    let obj = r.map_err(|e| scope.storage_error(e, &scope.info.name))?;
    Ok((obj, created))
}

/// Handles `update`.
///
/// # Errors
/// 400, 404, 409, 422 as kube.
pub async fn handle(mut scope: Scope) -> Result<Response, Status> {
    let body = scope.body_json().await?;
    if !body.is_object() {
        return Err(Status::bad_request("the body of the request must be a JSON object"));
    }
    let body_name = meta::name(&body);
    // Subresources too: kube's update handler checks the name of a Scale or
    // status body against the URL as well.
    if !body_name.is_empty() && body_name != scope.info.name {
        return Err(Status::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({})", scope.info.name)));
    }
    if scope.info.subresource == "scale" {
        let (obj, _) = apply_update(&scope, None, &|old| from_scale(&body, old)).await?;
        return Ok(crate::endpoints::responses::json(200, &to_scale(&obj)));
    }
    let create_body = if scope.resource.strategy.allow_create_on_update() && scope.info.subresource.is_empty() {
        rest::ensure_namespace(&scope, &scope.info.namespace.clone()).await?;
        Some(body.clone())
    } else {
        None
    };
    let (obj, created) = apply_update(&scope, create_body, &|_old| Ok(body.clone())).await?;
    Ok(scope.respond_object(if created { 201 } else { 200 }, obj))
}
