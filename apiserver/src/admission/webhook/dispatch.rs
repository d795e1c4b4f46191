//! What the two webhook plugins share: whether a webhook is called for a
//! request (kube `generic.Webhook.ShouldCallHook`), the call itself with
//! kube's error wording (`mutating/dispatcher.go`,
//! `validating/dispatcher.go`, `util/webhook/client.go`), and the
//! resolution of `service` references through EndpointSlices (kube
//! `util/proxy.ResolveEndpoint`).

use std::sync::Arc;

use serde_json::Value;

use super::config::{Endpoint, Hook, Hooks};
use crate::admission::matching::{namespace_matches, object_matches, rule_matches};
use crate::admission::Attributes;
use crate::authz::Authorizer;
use crate::cel::{Activation, Budget, PER_CALL_LIMIT};
use crate::errors::go_quote;
use crate::errors::Status;
use crate::selectors::LabelSelector;
use crate::storage::{keys, Storage};
use crate::webhook;

/// How a call of a webhook failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The webhook could not be called or answered unusably (kube's
    /// `ErrCallingWebhook`): its failure policy decides. The text is what
    /// kube puts after `failed calling webhook "<name>": `.
    Calling(String),
    /// The request fails with this Status whatever the failure policy: the
    /// webhook's denial, a dry run it does not support, a patch that does
    /// not apply.
    Status(Box<Status>),
}

/// The Status of a call that failed under `failurePolicy: Fail` (kube
/// answers `apierrors.NewInternalError(ErrCallingWebhook)`).
pub fn failed_closed(webhook: &str, reason: &str) -> Status {
    Status::internal(format!("failed calling webhook {}: {reason}", go_quote(webhook)))
}

/// kube's Status for a dry run sent to a webhook that has side effects.
pub fn dry_run_unsupported(webhook: &str) -> Status {
    Status::bad_request(format!("admission webhook {} does not support dry run", go_quote(webhook)))
}

/// Whether the request is about a webhook configuration or an admission
/// policy or binding, which no webhook is called for (kube
/// `IsExemptAdmissionConfigurationResource`).
pub fn exempt(attrs: &Attributes<'_>) -> bool {
    attrs.kind.group == super::config::GROUP
        && matches!(
            attrs.kind.kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// Waits until the copies of the configurations and the namespaces are
/// complete (kube's `WaitForReady`, whose ready func is the namespace and
/// configuration informers having synced): [`Sources::wait_ready`].
///
/// # Errors
/// 403 `… is forbidden: not yet ready to handle request` after
/// [`crate::admission::sources::WAIT_FOR_READY`].
///
/// [`Sources::wait_ready`]: crate::admission::sources::Sources::wait_ready
pub async fn wait_ready(hooks: &Hooks, attrs: &Attributes<'_>) -> Result<(), Status> {
    hooks.sources().wait_ready(&hooks.needs(), attrs).await
}

/// Whether `hook` is called for `attrs` (kube `ShouldCallHook`): a rule
/// matches (exactly, or for another version of the resource under
/// `matchPolicy: Equivalent`), the object selector and the namespace
/// selector match, and then every match condition is true.
///
/// A namespace the feed has not seen yet is read from the store (kube
/// falls back to a live read too).
///
/// # Errors
/// 500 when the namespace cannot be found; 403 `<resource> "<name>" is
/// forbidden: <error>` when a match condition fails to evaluate and the
/// failure policy is Fail (under Ignore the webhook is skipped).
pub async fn should_call(hook: &Arc<Hook>, attrs: &Attributes<'_>, hooks: &Hooks, storage: &dyn Storage) -> Result<bool, Status> {
    let sources = hooks.sources().as_ref();
    let rule = hook.rules.iter().any(|r| rule_matches(r, attrs, false)) || (hook.equivalent && hook.rules.iter().any(|r| rule_matches(r, attrs, true)));
    if !rule || !object_matches(&hook.object_selector, attrs) {
        return Ok(false);
    }
    let in_namespace = match namespace_matches(&hook.namespace_selector, attrs, sources) {
        Ok(m) => m,
        Err(_) => match storage.get(&keys::namespace(attrs.namespace)).await {
            Ok(ns) => LabelSelector::from_object(&hook.namespace_selector).matches_object(&ns),
            Err(crate::storage::Error::NotFound) => return Err(Status::internal(format!("namespaces {} not found", go_quote(attrs.namespace)))),
            Err(e) => return Err(Status::internal(e)),
        },
    };
    if !in_namespace {
        return Ok(false);
    }
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    match conditions(hook, attrs, hooks.authorizer()).await {
        Ok(m) => Ok(m),
        Err(_) if hook.fail_open => Ok(false),
        Err(e) => {
            tracing::warn!("failed evaluating match conditions of webhook {:?}, failing closed: {e}", hook.name);
            Err(Status::forbidden_because(attrs.resource.group, attrs.resource.resource, attrs.name, &e))
        }
    }
}

/// The variables of match conditions (`object`, `oldObject`, `request`).
fn variables(attrs: &Attributes<'_>) -> Activation {
    let mut vars = Activation::new();
    vars.bind_json("object", attrs.object.as_ref().unwrap_or(&Value::Null));
    vars.bind_json("oldObject", attrs.old_object.unwrap_or(&Value::Null));
    vars.bind_json("request", &super::review::admission_request(attrs, ""));
    vars
}

/// Evaluates the match conditions of `hook`; those that name `authorizer`
/// run on the blocking pool with it bound to `authorizer` asked as the
/// request's user (its checks wait for the authorizer).
async fn conditions(hook: &Arc<Hook>, attrs: &Attributes<'_>, authorizer: &Arc<dyn Authorizer>) -> Result<bool, String> {
    let mut vars = variables(attrs);
    if !hook.conditions_use_authorizer {
        return conditions_hold(hook, &vars);
    }
    vars.bind("authorizer", crate::admission::cel_authorizer::variable(attrs, authorizer));
    let hook = hook.clone();
    crate::admission::cel_authorizer::run(true, move || conditions_hold(&hook, &vars)).await.map_err(|e| format!("evaluating match conditions: {}", e.message))?
}

/// One call of `hook` about `attrs`, as mutating and validating webhooks
/// share it: refused under dry-run unless the webhook has no side effects,
/// the AdmissionReview posted and its answer checked (uid, kind; a patch
/// only when `mutating`), its audit annotations and warnings passed on.
/// Whether it allowed the request, and its patch, are the caller's.
///
/// # Errors
/// The dry-run refusal as a Status; calling and answer errors as
/// [`CallError::Calling`], for the failure policy.
pub async fn exchange(hook: &Hook, attrs: &Attributes<'_>, mutating: bool) -> Result<super::review::Answer, CallError> {
    use super::review;
    if attrs.dry_run && !hook.dry_run_safe {
        return Err(CallError::Status(Box::new(dry_run_unsupported(&hook.name))));
    }
    let version = hook.version.ok_or_else(|| CallError::Calling(format!("could not create admission objects: {}", review::NO_KNOWN_VERSION)))?;
    let uid = crate::meta::new_uid();
    let body = post(hook, &review::review(attrs, version, &uid)).await?;
    let answer = review::verify(&body, version, &uid, mutating).map_err(|e| match e {
        review::Invalid::Response(m) => CallError::Calling(format!("received invalid webhook response: {m}")),
        review::Invalid::Decode(m) => CallError::Calling(format!("failed to call webhook: {m}")),
    })?;
    for (k, v) in &answer.audit_annotations {
        attrs.add_audit_annotation(&format!("{}/{k}", hook.name), v);
    }
    for w in &answer.warnings {
        attrs.warnings.add(w.clone());
    }
    Ok(answer)
}

/// kube's `matchconditions.Matcher`: a false condition skips the webhook
/// (whatever errors others had); otherwise any errors fail, joined as Go's
/// `utilerrors.NewAggregate` joins them.
fn conditions_hold(hook: &Hook, vars: &Activation) -> Result<bool, String> {
    let mut errors = Vec::new();
    for c in &hook.conditions {
        let result = match &c.program {
            Ok(p) => p.eval_bool(vars, &mut Budget::new(PER_CALL_LIMIT)).map_err(|e| format!("expression '{}' resulted in error: {e}", c.expression)),
            Err(e) => Err(e.clone()),
        };
        match result {
            Ok(false) => return Ok(false),
            Ok(true) => {}
            Err(e) => errors.push(e),
        }
    }
    match errors.len() {
        0 => Ok(true),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// POSTs `review` to `hook` and returns its JSON answer (kube's
/// `client.Post().Body(request).Timeout(t).Do(ctx).Into(response)` under
/// the webhook's `timeoutSeconds`).
///
/// # Errors
/// [`CallError::Calling`] with kube's words: `failed to call webhook:
/// Post "<url>?timeout=<n>s": <Go's error>` for a transport failure or a
/// timeout (`context deadline exceeded`), `failed to call webhook: <the
/// answer's Status message or client-go's words for its code>` for a
/// non-2xx answer, `could not get REST client: …` when the webhook has no
/// usable client.
pub async fn post(hook: &Hook, review: &Value) -> Result<Value, CallError> {
    let client = hook.client.as_ref().map_err(|e| CallError::Calling(format!("could not get REST client: {e}")))?;
    if hook.endpoint == Endpoint::Missing {
        return Err(CallError::Calling("could not get REST client: webhook configuration must have either service or URL".into()));
    }
    let url = format!("{}?timeout={}s", hook.endpoint.base_url(), hook.timeout.as_secs());
    let body = serde_json::to_vec(review).map_err(|e| CallError::Calling(format!("could not create admission objects: {e}")))?;
    let reply = match client.post_raw(&url, body, hook.timeout).await {
        Ok(r) => r,
        Err(e) => return Err(CallError::Calling(format!("failed to call webhook: Post {}: {e}", go_quote(&url)))),
    };
    if !(200..300).contains(&reply.code) {
        return Err(CallError::Calling(format!("failed to call webhook: {}", error_answer_message(&reply))));
    }
    serde_json::from_slice(&reply.body).map_err(|e| CallError::Calling(format!("failed to call webhook: couldn't get version/kind; json parse error: {e}")))
}

/// client-go's message for a non-2xx answer: the message of a `Status`
/// with `status: Failure`, else `NewGenericServerResponse`'s words for the
/// code (a `text/plain` body is quoted in them; any other body is
/// "unknown").
fn error_answer_message(reply: &webhook::Reply) -> String {
    if let Ok(status) = serde_json::from_slice::<Value>(&reply.body) {
        if status["kind"] == "Status" && status["status"] == "Failure" {
            return status["message"].as_str().unwrap_or_default().to_string();
        }
    }
    let server_message = if reply.content_type.starts_with("text/plain") {
        let body = &reply.body[..reply.body.len().min(1024)];
        String::from_utf8_lossy(body).trim().to_string()
    } else {
        "unknown".to_string()
    };
    match reply.code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => server_message,
        405 => "the server does not allow this method on the requested resource".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        c if c >= 500 => format!("an error on the server ({}) has prevented the request from succeeding", go_quote(&server_message)),
        c => format!("the server responded with the status code {c} but did not return more information"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn match_conditions_as_kubes_matcher() {
        let hook = |conditions: Value| {
            let w = json!({"name": "h", "matchConditions": conditions});
            super::super::config::Hook::compile("c", 0, &w, false, &Arc::new(super::super::service::ServiceResolver::new(crate::admission::sources::Sources::new())))
        };
        let req = crate::admission::testing::TestRequest { user: crate::authn::UserInfo { name: "alice".into(), ..Default::default() }, ..Default::default() };
        let attrs = req.create(
            crate::admission::Resource { group: "", version: "v1", resource: "configmaps" },
            crate::admission::Kind { group: "", version: "v1", kind: "ConfigMap" },
            "x",
            "default",
            json!({"metadata": {"name": "x"}}),
        );
        let t = json!({"name": "t", "expression": "request.userInfo.username == 'alice' && oldObject == null"});
        let f = json!({"name": "f", "expression": "object.metadata.name == 'y'"});
        let e = json!({"name": "e", "expression": "object.metadata.nope.x == 1"});
        let bad = json!({"name": "bad", "expression": "object.("});
        let vars = variables(&attrs);
        assert_eq!(conditions_hold(&hook(json!([t])), &vars), Ok(true));
        assert_eq!(conditions_hold(&hook(json!([e, f])), &vars), Ok(false), "a false condition wins over errors");
        let err = conditions_hold(&hook(json!([t, e])), &vars).err().unwrap_or_default();
        assert!(err.starts_with("expression 'object.metadata.nope.x == 1' resulted in error: "), "{err}");
        let err = conditions_hold(&hook(json!([e, bad])), &vars).err().unwrap_or_default();
        assert!(err.starts_with("[expression 'object.metadata.nope.x == 1' resulted in error: ") && err.contains(", compilation error: "), "{err}");
    }

    #[test]
    fn error_answers_are_worded_as_client_go_words_them() {
        let reply = |code: u16, ct: &str, body: &str| webhook::Reply { code, content_type: ct.into(), body: bytes::Bytes::from(body.to_string()) };
        assert_eq!(error_answer_message(&reply(500, "text/plain", "boom\n")), r#"an error on the server ("boom") has prevented the request from succeeding"#);
        assert_eq!(error_answer_message(&reply(500, "application/json", "{}")), r#"an error on the server ("unknown") has prevented the request from succeeding"#);
        assert_eq!(error_answer_message(&reply(404, "", "")), "the server could not find the requested resource");
        assert_eq!(error_answer_message(&reply(418, "", "")), "the server responded with the status code 418 but did not return more information");
        assert_eq!(error_answer_message(&reply(400, "application/json", r#"{"kind":"Status","status":"Failure","message":"bad review"}"#)), "bad review");
        assert_eq!(error_answer_message(&reply(400, "application/json", r#"{"kind":"Status","message":"bad review"}"#)), "the server rejected our request for an unknown reason");
    }
}
